package accept

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/champ"
)

// recovered is the state recoverDir rebuilds.
type recovered struct {
	m        champ.Map[brand.ID, *Intent]
	base     uint64   // seq covered by the snapshot used (0: none)
	next     uint64   // seq of the next block
	replayed int      // log records applied after the snapshot
	dropped  int64    // torn tail bytes dropped
	segs     []uint64 // segment first seqs, ascending
	snaps    []uint64 // snapshot seqs, ascending
	seg      *os.File // the last segment, open for appending
}

// recoverDir rebuilds the outbox in dir: the newest intact snapshot the
// log reaches back to, plus every log block after it.
func recoverDir(ctx context.Context, dir string, log *slog.Logger) (*recovered, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("accept: recover %s: %w", dir, err)
	}
	st := &recovered{}
	for _, e := range entries {
		name := e.Name()
		if v, ok := parseName(name, segPrefix, segSuffix); ok {
			st.segs = append(st.segs, v)
		} else if v, ok := parseName(name, snPrefix, snSuffix); ok {
			st.snaps = append(st.snaps, v)
		} else if strings.HasSuffix(name, tmpSuffix) {
			// A snapshot whose rename never happened.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("accept: recover %s: %w", dir, err)
			}
		}
	}
	slices.Sort(st.segs)
	slices.Sort(st.snaps)
	if err := st.chooseBase(dir, log); err != nil {
		return nil, fmt.Errorf("accept: recover %s: %w", dir, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("accept: recover %s: %w", dir, err)
	}
	if err := st.replay(dir, log); err != nil {
		return nil, fmt.Errorf("accept: recover %s: %w", dir, err)
	}
	return st, nil
}

// reaches reports whether the log holds every block after base: some
// segment starts at or before base+1 (or there is no log at all).
func (st *recovered) reaches(base uint64) bool {
	return len(st.segs) == 0 || st.segs[0] <= base+1
}

// chooseBase loads the newest intact snapshot that the log reaches back
// to, or starts empty if the log starts at block 1.
func (st *recovered) chooseBase(dir string, log *slog.Logger) error {
	var errs []error
	for i := len(st.snaps) - 1; i >= 0; i-- {
		seq := st.snaps[i]
		if !st.reaches(seq) {
			continue
		}
		m, err := loadSnapshot(dir, seq)
		if errors.Is(err, ErrVersion) {
			// A newer version wrote it: refuse, and set nothing aside.
			return err
		}
		if err != nil {
			log.Warn("accept: snapshot unreadable; trying an older one", "dir", dir, "seq", seq, "err", err)
			errs = append(errs, err)
			continue
		}
		st.m, st.base = m, seq
		return st.setAside(dir, i+1)
	}
	// No usable snapshot: start empty, which needs the whole log. (Some
	// segment always exists once a snapshot does.)
	switch {
	case len(st.segs) > 0 && st.segs[0] != 1:
		return fmt.Errorf("no intact snapshot, and the log starts at block %d: %w", st.segs[0], errors.Join(append(errs, ErrCorrupt)...))
	case len(st.segs) == 0 && len(st.snaps) > 0:
		return fmt.Errorf("no intact snapshot, and no log: %w", errors.Join(append(errs, ErrCorrupt)...))
	}
	st.m, st.base = champ.New[brand.ID, *Intent](champ.Uint64[brand.ID]), 0
	return st.setAside(dir, 0)
}

// setAside renames the snapshots from st.snaps[from:], which recovery
// could not use, to *.corrupt (kept for inspection), so that none counts
// as the fallback of the next compaction.
func (st *recovered) setAside(dir string, from int) error {
	for _, bad := range st.snaps[from:] {
		name := filepath.Join(dir, snapName(bad))
		if err := os.Rename(name, name+corruptSuffix); err != nil {
			return fmt.Errorf("setting aside snapshot %d: %w", bad, err)
		}
	}
	st.snaps = st.snaps[:from]
	return nil
}

// loadSnapshot reads snapshot seq into a map. The intents share one
// allocation (and their payloads the file's bytes), which lives while any
// of them does.
func loadSnapshot(dir string, seq uint64) (champ.Map[brand.ID, *Intent], error) {
	var m champ.Map[brand.ID, *Intent]
	data, err := os.ReadFile(filepath.Join(dir, snapName(seq)))
	if err != nil {
		return m, fmt.Errorf("snapshot %d: %w", seq, err)
	}
	got, intents, err := decodeSnapshot(data)
	if err != nil {
		return m, fmt.Errorf("snapshot %d: %w", seq, err)
	}
	if got != seq {
		return m, fmt.Errorf("snapshot file %d says it covers block %d: %w", seq, got, ErrCorrupt)
	}
	return champ.Build(champ.Uint64[brand.ID], len(intents), func(i int) (brand.ID, *Intent) {
		return intents[i].ID, &intents[i]
	}), nil
}

// replay applies the log blocks after st.base, truncates a torn tail of
// the last segment, and opens the last segment for appending (creating
// the first one if there is none).
func (st *recovered) replay(dir string, log *slog.Logger) error {
	next := st.base + 1
	rp := replayer{base: st.m}
	start := 0
	for i, first := range st.segs {
		if first <= next {
			start = i
		}
	}
	for i := start; i < len(st.segs); i++ {
		last := i == len(st.segs)-1
		name := segName(st.segs[i])
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("segment %s: %w", name, err)
		}
		first, ver, err := decodeSegHeader(data)
		if err == nil && first != st.segs[i] {
			err = fmt.Errorf("segment %s says its first block is %d: %w", name, first, ErrCorrupt)
		}
		if err != nil {
			// Blocks are appended only after the header is durable, so only a
			// last segment no longer than a header can have a torn one.
			if !last || len(data) > segHeaderLen || !errors.Is(err, ErrCorrupt) || st.segs[i] != next {
				return fmt.Errorf("segment %s: %w", name, err)
			}
			// A torn header: the crash came while the segment was created.
			log.Warn("accept: rewriting a torn segment header", "segment", name, "err", err)
			st.dropped += int64(len(data))
			f, err := createSegment(dir, next)
			if err != nil {
				return fmt.Errorf("segment %s: %w", name, err)
			}
			st.seg = f
			break
		}
		if i > start && first != next {
			return fmt.Errorf("segment %s starts at block %d, want %d: %w", name, first, next, ErrCorrupt)
		}
		off, fresh := segHeaderLen, true
		for off < len(data) {
			seq, count, body, n, err := blockFrame(data[off:])
			// The block is applied if it is the next; while the replay
			// collects intents in log order and the chunk has room, its
			// records are decoded into the chunk, unless one is a commit.
			var recs []rec
			direct := false
			if err == nil && seq == next && rp.collecting(int(count)) {
				if fresh {
					rp.sizeFor(len(data)-off, n, int(count))
					fresh = false
				}
				direct, err = rp.decodeIntents(seq, count, body, ver)
			}
			if err == nil && !direct {
				recs, err = decodeRecs(seq, count, body, rp.recs, ver)
			}
			if err != nil {
				// Only a frame that fails its length or checksum can be a torn
				// write; an intact block that does not decode is refused, in any
				// segment, and the file left as it is.
				if !last || errors.Is(err, errBlockBody) {
					return fmt.Errorf("segment %s, offset %d: %w", name, off, err)
				}
				// A crash tears only the end. An intact next block after the
				// damage means durable records would be dropped: refuse.
				if at := findBlock(data[off+1:], next+1, ver); at >= 0 {
					return fmt.Errorf("segment %s: the block at offset %d is damaged (%v) but block %d at offset %d is intact; "+
						"recovering would drop durable records (truncate the file at offset %d to accept that): %w",
						name, off, err, next+1, off+1+at, off, ErrCorrupt)
				}
				log.Warn("accept: dropping a torn log tail", "segment", name, "offset", off, "bytes", len(data)-off, "err", err)
				break
			}
			if !direct {
				if seq < next && seq <= st.base {
					off += n
					continue
				}
				if seq != next {
					return fmt.Errorf("segment %s, offset %d: block %d, want %d: %w", name, off, seq, next, ErrCorrupt)
				}
				rp.recs = recs
				if fresh {
					rp.sizeFor(len(data)-off, n, len(recs))
					fresh = false
				}
				if err := rp.apply(recs); err != nil {
					return fmt.Errorf("segment %s, block %d: %w", name, seq, err)
				}
			}
			st.replayed += int(count)
			next++
			off += n
		}
		if last {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("segment %s: %w", name, err)
			}
			if off < len(data) {
				st.dropped += int64(len(data) - off)
				err = f.Truncate(int64(off))
				if err == nil {
					err = f.Sync()
				}
				if err != nil {
					f.Close()
					return fmt.Errorf("segment %s: truncating a torn tail: %w", name, err)
				}
			}
			if ver != version {
				// Blocks are never appended to a segment of an older version:
				// the next block starts a segment of today's. A segment that
				// holds no block from next on is rewritten in place.
				if err := f.Close(); err != nil {
					return fmt.Errorf("segment %s: %w", name, err)
				}
				if f, err = createSegment(dir, next); err != nil {
					return fmt.Errorf("segment %s: %w", segName(next), err)
				}
				if first != next {
					st.segs = append(st.segs, next)
				}
			}
			st.seg = f
		}
	}
	if st.seg == nil {
		f, err := createSegment(dir, next)
		if err != nil {
			return fmt.Errorf("segment %s: %w", segName(next), err)
		}
		st.seg = f
		st.segs = append(st.segs, next)
	}
	m, err := rp.merge()
	if err != nil {
		return err
	}
	st.m = m
	st.next = next
	return nil
}

// replayer collects the effect of the replayed log on the base map. While
// the base is empty and the log holds only accepted records (a log since
// the first block, nothing committed yet), the intents go into chunks in
// log order and into the trie in one champ.Collect at the end: a duplicate
// id, which is corruption, shows as a trie smaller than the intents. The
// first block with a committed record, or a non-empty base, moves the
// intents into an overlay, which handles everything.
//
// The intents' payloads alias the segment's bytes as read (one buffer per
// file, kept alive by the intents); the intents share a chunk per segment
// when the segment's size predicts their count, one per block otherwise.
type replayer struct {
	base    champ.Map[brand.ID, *Intent]
	chunks  [][]Intent // while ov is nil; only the last has spare capacity
	n       int        // intents in chunks
	ov      overlay
	hint    int   // expected records, to size the overlay
	segLeft int   // expected records still to come in this segment
	recs    []rec // the decoding buffer, reused block after block
}

// sizeFor estimates the records left in a segment from its first
// replayed block (n bytes, count records; left bytes from it to the end of
// the segment): they size the overlay and the chunks of intents.
func (rp *replayer) sizeFor(left, n, count int) {
	rp.segLeft = max(1, left/max(1, n/max(1, count)))
	if rp.hint == 0 {
		rp.hint = rp.segLeft
	}
}

// collecting reports whether the replay still collects the intents in log
// order (no overlay yet, an empty base) and the last chunk has room for
// count more. (A segment's first block finds no room, goes through apply,
// which sizes a chunk for the segment: a block with a commit never
// allocates one.)
func (rp *replayer) collecting(count int) bool {
	if rp.ov != nil || rp.base.Len() != 0 || len(rp.chunks) == 0 {
		return false
	}
	c := rp.chunks[len(rp.chunks)-1]
	return cap(c)-len(c) >= count
}

// decodeIntents is decodeRecs for a block that apply would collect in log
// order, when the last chunk has room for it (collecting): it decodes the count records of block seq straight into the chunk
// of intents, without the records in between, and reports true. If one
// record is a commit, it leaves the chunk as it was and reports false: the
// caller decodes the block into records and applies them. Its errors are
// decodeRecs's.
func (rp *replayer) decodeIntents(seq uint64, count uint32, body []byte, ver uint16) (bool, error) {
	chunk := rp.chunks[len(rp.chunks)-1]
	start := len(chunk)
	// Written in place: the chunk's room beyond its length is zero (it is
	// cleared again if the block is not taken).
	out := chunk[start : start+int(count)]
	var m queueMatch
	for k := range out {
		// The common case inline, as in decodeRecs.
		if m.short(body) {
			id := brand.ID(binary.LittleEndian.Uint64(body[1:9]))
			q := m.n
			n := binary.LittleEndian.Uint32(body[10+q:])
			if end := 14 + q + int(n); id != 0 && uint64(n) <= uint64(len(body)-14-q) {
				p := &out[k]
				p.ID, p.Queue, p.Payload = id, m.q, body[14+q:end:end]
				body = body[end:]
				continue
			}
		}
		if id, payload, rest, ok := m.acceptedAt(body); ok {
			p := &out[k]
			p.ID, p.Queue, p.Payload = id, m.q, payload
			body = rest
			continue
		}
		var r rec
		var err error
		r, body, err = decodeRec(body, m.q, ver)
		if err != nil {
			clear(out)
			return false, fmt.Errorf("block %d: %w: %w", seq, err, errBlockBody)
		}
		if r.kind == kindCommitted {
			clear(out)
			return false, nil
		}
		out[k] = r.intent()
		m.set(r.queue)
	}
	if len(body) != 0 {
		clear(out)
		return false, fmt.Errorf("block %d: %d bytes after the last record: %w", seq, len(body), errBlockBody)
	}
	rp.chunks[len(rp.chunks)-1] = chunk[:start+int(count)]
	rp.n += int(count)
	rp.segLeft = max(0, rp.segLeft-int(count))
	return true, nil
}

func (rp *replayer) apply(recs []rec) error {
	defer func() { rp.segLeft = max(0, rp.segLeft-len(recs)) }()
	if rp.ov == nil {
		fast := rp.base.Len() == 0
		for i := 0; fast && i < len(recs); i++ {
			fast = recs[i].kind != kindCommitted
		}
		if fast {
			chunk := rp.chunk(len(recs))
			for _, r := range recs {
				chunk = append(chunk, r.intent())
			}
			rp.chunks[len(rp.chunks)-1] = chunk
			rp.n += len(recs)
			return nil
		}
		rp.ov = make(overlay, max(rp.hint, rp.n))
		for _, c := range rp.chunks {
			for i := range c {
				p := &c[i]
				if rp.ov[p.ID] != nil {
					return fmt.Errorf("id %d accepted twice: %w", p.ID, ErrCorrupt)
				}
				rp.ov[p.ID] = p
			}
		}
		rp.chunks, rp.n = nil, 0
	}
	return rp.ov.apply(rp.base, recs)
}

// chunk returns the last chunk with room for n more intents, starting a
// new one (sized for the rest of the segment) if it has not. Intents are
// only appended within a chunk's capacity, so pointers to them stay valid.
func (rp *replayer) chunk(n int) []Intent {
	if k := len(rp.chunks); k > 0 {
		if c := rp.chunks[k-1]; cap(c)-len(c) >= n {
			return c
		}
	}
	c := make([]Intent, 0, max(n, rp.segLeft))
	rp.chunks = append(rp.chunks, c)
	return c
}

func (rp *replayer) merge() (champ.Map[brand.ID, *Intent], error) {
	if rp.ov != nil {
		return rp.ov.merge(rp.base), nil
	}
	if rp.n == 0 {
		return rp.base, nil
	}
	var m champ.Map[brand.ID, *Intent]
	if len(rp.chunks) == 1 {
		c := rp.chunks[0]
		m = champ.Build(champ.Uint64[brand.ID], len(c), func(i int) (brand.ID, *Intent) { return c[i].ID, &c[i] })
	} else {
		m = champ.Collect(champ.Uint64[brand.ID], rp.n, func(yield func(brand.ID, *Intent) bool) {
			for _, c := range rp.chunks {
				for i := range c {
					if !yield(c[i].ID, &c[i]) {
						return
					}
				}
			}
		})
	}
	if m.Len() != rp.n {
		return m, fmt.Errorf("%d ids accepted twice: %w", rp.n-m.Len(), ErrCorrupt)
	}
	return m, nil
}

// overlay collects the effect of the replayed log on the base map: an id
// maps to its intent, or to nil if the log committed it. Replaying into a
// Go map and merging once is cheaper than editing the trie per record,
// and an intent accepted and committed within the log never touches it.
type overlay map[brand.ID]*Intent

// apply applies decoded log records. The intents of one block share one
// allocation.
func (ov overlay) apply(base champ.Map[brand.ID, *Intent], recs []rec) error {
	slab := make([]Intent, 0, len(recs))
	for _, r := range recs {
		switch r.kind {
		case kindAccepted, kindDelayed:
			p, inLog := ov[r.id]
			_, inBase := base.Get(r.id)
			if p != nil || !inLog && inBase {
				return fmt.Errorf("id %d accepted twice: %w", r.id, ErrCorrupt)
			}
			slab = append(slab, r.intent())
			ov[r.id] = &slab[len(slab)-1]
		case kindCommitted:
			ov[r.id] = nil
		}
	}
	return nil
}

// merge returns base with the overlay applied.
func (ov overlay) merge(base champ.Map[brand.ID, *Intent]) champ.Map[brand.ID, *Intent] {
	if len(ov) == 0 {
		return base
	}
	if base.Len() == 0 {
		return champ.Collect(champ.Uint64[brand.ID], len(ov), func(yield func(brand.ID, *Intent) bool) {
			for id, p := range ov {
				if p != nil && !yield(id, p) {
					return
				}
			}
		})
	}
	t := base.Transient()
	for id, p := range ov {
		if p == nil {
			t.Delete(id)
		} else {
			t.Set(id, p)
		}
	}
	return t.Persistent()
}

// findBlock returns the offset in b, a segment of version ver, of an
// intact block with the given seq, or -1. It looks only where the seq's
// bytes occur.
func findBlock(b []byte, seq uint64, ver uint16) int {
	pat := binary.LittleEndian.AppendUint64(nil, seq)
	for from := 0; ; {
		i := bytes.Index(b[from:], pat)
		if i < 0 {
			return -1
		}
		at := from + i - blockHeaderLen
		if at >= 0 {
			if got, _, _, err := decodeBlockInto(b[at:], nil, ver); err == nil && got == seq {
				return at
			}
		}
		from += i + 1
	}
}
