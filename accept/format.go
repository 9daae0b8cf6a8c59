package accept

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/names"
)

// The byte formats; docs/ACCEPT.md specifies them. All integers are
// little-endian.
const (
	segMagic  = "ECHOACLG" // a log segment file
	snapMagic = "ECHOACSN" // a snapshot file
	// version is the format version of the segments and snapshots written
	// today: version 1 plus record kind 3. Writers always write it (a
	// segment's header is written before its records are known), so a
	// binary that reads only version 1 refuses every file that may hold
	// kind 3 by its version. Readers also read version 1 (minVersion), in
	// which kind 3 is corruption (docs/FORMAT.md, "Upgrades").
	version    = 2
	minVersion = 1

	segHeaderLen   = 24 // magic 8, version 2, reserved 2, first seq 8, crc 4
	blockHeaderLen = 8  // body length 4, crc 4
	blockFixedLen  = 12 // seq 8, count 4
	snapHeaderLen  = 28 // magic 8, version 2, reserved 2, seq 8, count 8
	snapTrailerLen = 4  // crc

	kindAccepted  = 1
	kindCommitted = 2
	// kindDelayed is an accepted record with a run-at: the job is not
	// dispatched before then. Its run-at is never 0 (that is kindAccepted).
	kindDelayed = 3

	// maxBlockBody bounds a block body. A length field above it is corrupt.
	maxBlockBody = 1 << 30
	// maxQueueLen is names.MaxLen: a queue name's length fits one byte.
	maxQueueLen = names.MaxLen
	// maxPayloadLimit is the largest Options.MaxPayload accepted.
	maxPayloadLimit = 64 << 20
	// blockBytes is the most bytes of records an open block gathers: it is
	// cut when it reaches them, and Record waits while it holds them. So a
	// block body stays below blockBytes + one record, far below
	// maxBlockBody.
	blockBytes = 16 << 20
	// maxPrealloc bounds the records preallocated for each of the two
	// block buffers (the open block and the one being written), 1 MiB of
	// records each; a larger block grows as it fills. Open allocates both,
	// so that the first blocks neither grow their buffer record by record
	// nor wait for the second buffer's allocation while the producer is
	// held at K.
	maxPrealloc = 16384
)

// errBlockBody marks a block whose length and checksum are intact but whose
// body does not decode: not a torn write (a crash tears only what was being
// written, which the checksum catches) but another format, such as a record
// kind a newer version writes. Recovery refuses it instead of dropping it
// as a torn tail. It wraps ErrCorrupt.
var errBlockBody = fmt.Errorf("an intact block that does not decode (written by a newer version?): %w", ErrCorrupt)

// rec is one log record: an accepted intent (kindAccepted, or kindDelayed
// with a run-at) or a committed id.
type rec struct {
	kind    byte
	id      brand.ID
	queue   names.Queue
	payload []byte
	runAt   int64 // Unix milliseconds; kindDelayed only
}

// acceptedRec returns the record that accepts in.
func acceptedRec(in Intent) rec {
	if in.RunAt != 0 {
		return rec{kind: kindDelayed, id: in.ID, queue: in.Queue, payload: in.Payload, runAt: in.RunAt}
	}
	return rec{kind: kindAccepted, id: in.ID, queue: in.Queue, payload: in.Payload}
}

// intent returns the intent an accepted or delayed record carries.
func (r rec) intent() Intent {
	return Intent{ID: r.id, Queue: r.queue, Payload: r.payload, RunAt: r.runAt}
}

func (r rec) size() int {
	switch r.kind {
	case kindCommitted:
		return 9
	case kindDelayed:
		return 1 + 8 + 8 + 1 + len(r.queue.String()) + 4 + len(r.payload)
	}
	return 1 + 8 + 1 + len(r.queue.String()) + 4 + len(r.payload)
}

func appendRec(dst []byte, r rec) []byte {
	dst = append(dst, r.kind)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.id))
	if r.kind == kindCommitted {
		return dst
	}
	if r.kind == kindDelayed {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r.runAt))
	}
	dst = append(dst, byte(len(r.queue.String())))
	dst = append(dst, r.queue.String()...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.payload)))
	return append(dst, r.payload...)
}

// decodeRec decodes one record from the front of b and returns it with the
// rest of b. The payload aliases b (its capacity clipped); the queue is
// checked (names.ParseQueue: the log is read from disk) unless it equals
// prevQueue, which is then reused.
// ver is the version of the file that holds it: kind 3 is corruption in
// version 1.
func decodeRec(b []byte, prevQueue names.Queue, ver uint16) (rec, []byte, error) {
	if len(b) < 9 {
		return rec{}, nil, fmt.Errorf("record: %d bytes, want at least 9: %w", len(b), ErrCorrupt)
	}
	r := rec{kind: b[0], id: brand.ID(binary.LittleEndian.Uint64(b[1:9]))}
	b = b[9:]
	if r.id == 0 {
		return rec{}, nil, fmt.Errorf("record: id 0: %w", ErrCorrupt)
	}
	switch r.kind {
	case kindCommitted:
		return r, b, nil
	case kindAccepted:
	case kindDelayed:
		if ver < 2 {
			return rec{}, nil, fmt.Errorf("record %d: kind 3 in a file of version %d: %w", r.id, ver, ErrCorrupt)
		}
		if len(b) < 8 {
			return rec{}, nil, fmt.Errorf("record %d: truncated run-at: %w", r.id, ErrCorrupt)
		}
		r.runAt = int64(binary.LittleEndian.Uint64(b))
		if r.runAt <= 0 {
			return rec{}, nil, fmt.Errorf("record %d: run-at %d, want a positive Unix millisecond: %w", r.id, r.runAt, ErrCorrupt)
		}
		b = b[8:]
	default:
		return rec{}, nil, fmt.Errorf("record: kind %d: %w", r.kind, ErrCorrupt)
	}
	if len(b) < 1 || len(b) < 1+int(b[0])+4 {
		return rec{}, nil, fmt.Errorf("record %d: truncated queue: %w", r.id, ErrCorrupt)
	}
	qb := b[1 : 1+int(b[0])]
	if !prevQueue.IsZero() && string(qb) == prevQueue.String() {
		r.queue = prevQueue
	} else {
		q, err := names.ParseQueue(string(qb))
		if err != nil {
			return rec{}, nil, fmt.Errorf("record %d: %v: %w", r.id, err, ErrCorrupt)
		}
		r.queue = q
	}
	b = b[1+len(qb):]
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return rec{}, nil, fmt.Errorf("record %d: payload of %d bytes, %d left: %w", r.id, n, len(b), ErrCorrupt)
	}
	r.payload = b[:n:n]
	return r, b[n:], nil
}

// acceptedAt is the decoders' common case, inline: the record at the
// front of b is an accepted one, with a non-zero id, on queue m (the queue
// of the record before), and holds its whole payload. It returns the id,
// the payload (aliasing b, capacity clipped) and the rest of b; ok false
// means any other record, which decodeRec decodes (and says what is
// wrong with).
func (m *queueMatch) acceptedAt(b []byte) (id brand.ID, payload, rest []byte, ok bool) {
	q := m.n
	if q == 0 || len(b) < 14+q || b[0] != kindAccepted || int(b[9]) != q {
		return 0, nil, nil, false
	}
	if q <= 8 && len(b) >= 18 {
		if binary.LittleEndian.Uint64(b[10:18])&m.mask != m.word {
			return 0, nil, nil, false
		}
	} else if string(b[10:10+q]) != m.q.String() {
		return 0, nil, nil, false
	}
	n := binary.LittleEndian.Uint32(b[10+q:])
	id = brand.ID(binary.LittleEndian.Uint64(b[1:9]))
	if id == 0 || uint64(n) > uint64(len(b)-14-q) {
		return 0, nil, nil, false
	}
	end := 14 + q + int(n)
	return id, b[14+q : end : end], b[end:], true
}

// short reports whether b starts with an accepted record on m's queue,
// a name of at most 8 bytes, with at least 22 bytes in b: the check of
// acceptedAt that the hot loops make inline, before they read the id and
// the payload's length themselves.
func (m *queueMatch) short(b []byte) bool {
	return m.n != 0 && m.n <= 8 && len(b) >= 22 && b[0] == kindAccepted && int(b[9]) == m.n &&
		binary.LittleEndian.Uint64(b[10:18])&m.mask == m.word
}

// queueMatch recognises the bytes of one queue name: those of the record
// before, which a block or a snapshot almost always repeats. Its zero
// value matches nothing.
type queueMatch struct {
	q          names.Queue
	n          int
	word, mask uint64 // a name of at most 8 bytes, little-endian, and its mask
}

func (m *queueMatch) set(q names.Queue) {
	if q == m.q {
		return
	}
	*m = queueMatch{q: q, n: len(q.String())}
	if m.n <= 8 {
		var w [8]byte
		copy(w[:], q.String())
		m.word = binary.LittleEndian.Uint64(w[:])
		m.mask = ^uint64(0) >> (64 - 8*uint(m.n))
	}
}

// appendSegHeader appends the header of a segment of today's version.
func appendSegHeader(dst []byte, first uint64) []byte {
	return appendSegHeaderVersion(dst, version, first)
}

func appendSegHeaderVersion(dst []byte, ver uint16, first uint64) []byte {
	start := len(dst)
	dst = append(dst, segMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, ver)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, first)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], durable.Castagnoli))
}

// decodeSegHeader checks a segment header and returns its first seq and
// its version (minVersion..version; another is ErrVersion).
func decodeSegHeader(b []byte) (first uint64, ver uint16, err error) {
	if len(b) < segHeaderLen {
		return 0, 0, fmt.Errorf("segment header: %d bytes, want %d: %w", len(b), segHeaderLen, ErrCorrupt)
	}
	if string(b[:8]) != segMagic {
		return 0, 0, fmt.Errorf("segment header: bad magic %q: %w", b[:8], ErrCorrupt)
	}
	if crc32.Checksum(b[:20], durable.Castagnoli) != binary.LittleEndian.Uint32(b[20:24]) {
		return 0, 0, fmt.Errorf("segment header: checksum mismatch: %w", ErrCorrupt)
	}
	ver = binary.LittleEndian.Uint16(b[8:10])
	if ver < minVersion || ver > version {
		return 0, 0, fmt.Errorf("segment header: version %d, want %d..%d: %w", ver, minVersion, version, ErrVersion)
	}
	if r := binary.LittleEndian.Uint16(b[10:12]); r != 0 {
		return 0, 0, fmt.Errorf("segment header: reserved field %d, want 0: %w", r, ErrCorrupt)
	}
	return binary.LittleEndian.Uint64(b[12:20]), ver, nil
}

// appendBlock appends the framed block seq holding recs to dst.
func appendBlock(dst []byte, seq uint64, recs []rec) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, blockHeaderLen)...)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(recs)))
	for _, r := range recs {
		dst = appendRec(dst, r)
	}
	body := dst[start+blockHeaderLen:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	crc := crc32.Update(crc32.Checksum(dst[start:start+4], durable.Castagnoli), durable.Castagnoli, body)
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	return dst
}

// decodeBlock decodes the block at the front of b, from a segment of
// today's version. It returns the block's seq, its records, and its framed
// length. The payloads alias b (their capacity clipped), which the records
// therefore keep alive. Every failure wraps ErrCorrupt, a short b included
// (a torn tail).
func decodeBlock(b []byte) (seq uint64, recs []rec, n int, err error) {
	return decodeBlockInto(b, nil, version)
}

// decodeBlockInto is decodeBlock for a segment of version ver, appending
// the records to recs[:0], so that a caller replaying many blocks reuses
// one slice.
func decodeBlockInto(b []byte, recs []rec, ver uint16) (seq uint64, _ []rec, n int, err error) {
	seq, count, body, n, err := blockFrame(b)
	if err != nil {
		return 0, nil, 0, err
	}
	if recs, err = decodeRecs(seq, count, body, recs, ver); err != nil {
		return 0, nil, 0, err
	}
	return seq, recs, n, nil
}

// blockFrame checks the frame of the block at the front of b (its length
// and checksum, and that its count of records can fit) and returns its
// seq, its count of records, the bytes of the records, and its framed
// length. Every failure wraps ErrCorrupt; only a count that cannot fit in
// an intact frame wraps errBlockBody.
func blockFrame(b []byte) (seq uint64, count uint32, body []byte, n int, err error) {
	if len(b) < blockHeaderLen {
		return 0, 0, nil, 0, fmt.Errorf("block header: %d bytes, want %d: %w", len(b), blockHeaderLen, ErrCorrupt)
	}
	l := binary.LittleEndian.Uint32(b)
	if l < blockFixedLen || l > maxBlockBody {
		return 0, 0, nil, 0, fmt.Errorf("block: body length %d out of range: %w", l, ErrCorrupt)
	}
	if uint64(len(b)-blockHeaderLen) < uint64(l) {
		return 0, 0, nil, 0, fmt.Errorf("block: body of %d bytes, %d present: %w", l, len(b)-blockHeaderLen, ErrCorrupt)
	}
	n = blockHeaderLen + int(l)
	body = b[blockHeaderLen:n]
	if crc32.Update(crc32.Checksum(b[:4], durable.Castagnoli), durable.Castagnoli, body) != binary.LittleEndian.Uint32(b[4:8]) {
		return 0, 0, nil, 0, fmt.Errorf("block: checksum mismatch: %w", ErrCorrupt)
	}
	seq = binary.LittleEndian.Uint64(body)
	count = binary.LittleEndian.Uint32(body[8:])
	body = body[blockFixedLen:]
	if uint64(count) > uint64(len(body))/9 {
		return 0, 0, nil, 0, fmt.Errorf("block %d: %d records cannot fit in %d bytes: %w", seq, count, len(body), errBlockBody)
	}
	return seq, count, body, n, nil
}

// decodeRecs decodes the count records of block seq, whose bytes (after
// blockFrame) are body, appending them to recs[:0]. Every failure wraps
// errBlockBody.
func decodeRecs(seq uint64, count uint32, body []byte, recs []rec, ver uint16) ([]rec, error) {
	recs = slices.Grow(recs[:0], int(count))
	var m queueMatch
	for i := uint32(0); i < count; i++ {
		// The common case inline; anything else takes decodeRec.
		if id, payload, rest, ok := m.acceptedAt(body); ok {
			recs = append(recs, rec{kind: kindAccepted, id: id, queue: m.q, payload: payload})
			body = rest
			continue
		}
		var r rec
		var err error
		r, body, err = decodeRec(body, m.q, ver)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w: %w", seq, err, errBlockBody)
		}
		recs = append(recs, r)
		m.set(r.queue)
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("block %d: %d bytes after the last record: %w", seq, len(body), errBlockBody)
	}
	return recs, nil
}

// encodeSnapshot returns the snapshot file (today's version) covering
// blocks up to seq and holding intents, which must be in strictly
// increasing id order.
func encodeSnapshot(seq uint64, intents []Intent) []byte {
	return encodeSnapshotVersion(version, seq, intents)
}

// EncodeSnapshot returns the bytes of a snapshot file as an Outbox writes
// it (docs/ACCEPT.md specifies them): covering blocks up to seq and holding
// intents, which must be in strictly increasing id order. An Outbox writes
// its snapshots itself; this is for what must write the same bytes
// elsewhere, such as the whole-snapshot baseline of the outbox's benchmark
// (cmd/echostore-bench/internal/acceptbench).
func EncodeSnapshot(seq uint64, intents []Intent) []byte {
	return encodeSnapshot(seq, intents)
}

// encodeSnapshotVersion is encodeSnapshot writing version ver; intents
// with a run-at need version 2.
func encodeSnapshotVersion(ver uint16, seq uint64, intents []Intent) []byte {
	size := snapHeaderLen + snapTrailerLen
	for _, in := range intents {
		size += acceptedRec(in).size()
	}
	b := make([]byte, 0, size)
	b = append(b, snapMagic...)
	b = binary.LittleEndian.AppendUint16(b, ver)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(intents)))
	for _, in := range intents {
		b = appendRec(b, acceptedRec(in))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, durable.Castagnoli))
}

// decodeSnapshot decodes a whole snapshot file: the seq it covers and its
// intents in increasing id order. The payloads alias b, which the intents
// therefore keep alive. Every failure wraps ErrCorrupt (or ErrVersion).
func decodeSnapshot(b []byte) (uint64, []Intent, error) {
	if len(b) < snapHeaderLen+snapTrailerLen {
		return 0, nil, fmt.Errorf("snapshot: %d bytes, want at least %d: %w", len(b), snapHeaderLen+snapTrailerLen, ErrCorrupt)
	}
	if string(b[:8]) != snapMagic {
		return 0, nil, fmt.Errorf("snapshot: bad magic %q: %w", b[:8], ErrCorrupt)
	}
	body, tail := b[:len(b)-snapTrailerLen], b[len(b)-snapTrailerLen:]
	if crc32.Checksum(body, durable.Castagnoli) != binary.LittleEndian.Uint32(tail) {
		return 0, nil, fmt.Errorf("snapshot: checksum mismatch: %w", ErrCorrupt)
	}
	return decodeSnapshotBody(b, body)
}

// decodeSnapshotBody is decodeSnapshot after the checksum.
func decodeSnapshotBody(b, body []byte) (uint64, []Intent, error) {
	ver := binary.LittleEndian.Uint16(b[8:10])
	if ver < minVersion || ver > version {
		return 0, nil, fmt.Errorf("snapshot: version %d, want %d..%d: %w", ver, minVersion, version, ErrVersion)
	}
	if r := binary.LittleEndian.Uint16(b[10:12]); r != 0 {
		return 0, nil, fmt.Errorf("snapshot: reserved field %d, want 0: %w", r, ErrCorrupt)
	}
	seq := binary.LittleEndian.Uint64(b[12:20])
	count := binary.LittleEndian.Uint64(b[20:28])
	rest := body[snapHeaderLen:]
	if count > uint64(len(rest))/9 {
		return 0, nil, fmt.Errorf("snapshot: %d intents cannot fit in %d bytes: %w", count, len(rest), ErrCorrupt)
	}
	out := make([]Intent, count)
	var m queueMatch
	var prev brand.ID
	for i := range out {
		// The common case inline: an accepted record with a non-zero id
		// above the previous one, on the queue of the record before. Anything
		// else takes decodeRec, which says what is wrong.
		if m.short(rest) {
			id := brand.ID(binary.LittleEndian.Uint64(rest[1:9]))
			q := m.n
			n := binary.LittleEndian.Uint32(rest[10+q:])
			if end := 14 + q + int(n); id > prev && uint64(n) <= uint64(len(rest)-14-q) {
				p := &out[i]
				p.ID, p.Queue, p.Payload = id, m.q, rest[14+q:end:end]
				rest, prev = rest[end:], id
				continue
			}
		}
		if id, payload, next, ok := m.acceptedAt(rest); ok && id > prev {
			p := &out[i]
			p.ID, p.Queue, p.Payload = id, m.q, payload
			rest, prev = next, id
			continue
		}
		r, next, err := decodeRec(rest, m.q, ver)
		if err != nil {
			return 0, nil, fmt.Errorf("snapshot intent %d: %w", i, err)
		}
		rest = next
		if r.kind != kindAccepted && r.kind != kindDelayed {
			return 0, nil, fmt.Errorf("snapshot intent %d: kind %d: %w", i, r.kind, ErrCorrupt)
		}
		if i > 0 && r.id <= prev {
			return 0, nil, fmt.Errorf("snapshot intent %d: id %d not above %d: %w", i, r.id, prev, ErrCorrupt)
		}
		out[i] = r.intent()
		m.set(r.queue)
		prev = r.id
	}
	if len(rest) != 0 {
		return 0, nil, fmt.Errorf("snapshot: %d bytes after the last intent: %w", len(rest), ErrCorrupt)
	}
	return seq, out, nil
}

// Page layout of the accept volume (docs/ACCEPT.md, "The accept volume"):
// one page per job at business index n, the n-th job committed to the
// volume; metadata metaNext holds the count of jobs, metaSafe the index below
// which every job is known to be marked committed durably in the outbox.
const (
	pageVersion        = 1 // a job due at once
	pageVersionDelayed = 2 // a job with a run-at
	pageOverhead       = 1 + 8 + 4 + 4
	metaNext           = "accept.next"
	metaSafe           = "accept.safe"
)

// Job is one job on a page of the accept volume.
type Job struct {
	ID      brand.ID // the job's branded id (JOB), never 0
	Payload []byte   // the payload, UTF-8, as enqueued
	RunAt   int64    // Unix milliseconds before which it is not dispatched; 0: at once
}

// EncodeJobPage returns the page bytes of one job due at once (version 1).
func EncodeJobPage(id brand.ID, payload []byte) []byte {
	return EncodeJob(Job{ID: id, Payload: payload})
}

// EncodeJob returns the page bytes of one job: version 1 if it is due at
// once, version 2 (with its run-at) otherwise.
func EncodeJob(j Job) []byte {
	b := make([]byte, 0, pageOverhead+8+len(j.Payload))
	if j.RunAt != 0 {
		b = append(b, pageVersionDelayed)
		b = binary.LittleEndian.AppendUint64(b, uint64(j.ID))
		b = binary.LittleEndian.AppendUint64(b, uint64(j.RunAt))
	} else {
		b = append(b, pageVersion)
		b = binary.LittleEndian.AppendUint64(b, uint64(j.ID))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(j.Payload)))
	b = append(b, j.Payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, durable.Castagnoli))
}

// DecodeJobPage decodes a page of the accept volume into its job's id and
// payload (see DecodeJob for the run-at); any other bytes give an error
// wrapping ErrCorrupt (or ErrVersion).
func DecodeJobPage(b []byte) (brand.ID, []byte, error) {
	j, err := DecodeJob(b)
	return j.ID, j.Payload, err
}

// DecodeJob decodes a page of the accept volume, version 1 or 2; any other
// bytes give an error wrapping ErrCorrupt (or ErrVersion). The payload is
// a copy.
func DecodeJob(b []byte) (Job, error) {
	if len(b) < pageOverhead {
		return Job{}, fmt.Errorf("%w: job page of %d bytes", ErrCorrupt, len(b))
	}
	if crc32.Checksum(b[:len(b)-4], durable.Castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return Job{}, fmt.Errorf("%w: job page checksum", ErrCorrupt)
	}
	j := Job{ID: brand.ID(binary.LittleEndian.Uint64(b[1:]))}
	body := b[9 : len(b)-4]
	switch b[0] {
	case pageVersion:
	case pageVersionDelayed:
		if len(body) < 8+4 {
			return Job{}, fmt.Errorf("%w: job page structure", ErrCorrupt)
		}
		if j.RunAt = int64(binary.LittleEndian.Uint64(body)); j.RunAt <= 0 {
			return Job{}, fmt.Errorf("%w: job page run-at %d", ErrCorrupt, j.RunAt)
		}
		body = body[8:]
	default:
		return Job{}, fmt.Errorf("%w: job page version %d", ErrVersion, b[0])
	}
	n := binary.LittleEndian.Uint32(body)
	if uint64(n) != uint64(len(body)-4) || j.ID == 0 {
		return Job{}, fmt.Errorf("%w: job page structure", ErrCorrupt)
	}
	j.Payload = bytes.Clone(body[4 : 4+n])
	return j, nil
}
