package graft

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"time"

	"github.com/echostore/echostore/durable"
)

// Every record value starts with a version byte; records that are not plain
// payloads end with a CRC-32C (Castagnoli) of everything before it, big
// endian. docs/GRAFT.md specifies each byte.
const (
	recordV1       byte = 1
	recordV2       byte = 2
	recordV3       byte = 3
	crcLen              = 4
	storeMagic          = "GRFT"
	storeRecLen         = 1 + len(storeMagic) + 8 + crcLen
	volumeRecV1Len      = 1 + 7*8 + crcLen
	volumeRecV2Len      = volumeRecV1Len + 8 + 32 + 8
	volumeRecV3Len      = volumeRecV2Len + 16
)

func appendCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, durable.Castagnoli))
}

// checkCRC verifies the trailing checksum and a version-1 body, and returns
// the body before the checksum.
func checkCRC(what string, b []byte) ([]byte, error) {
	return checkCRCVersions(what, b, recordV1)
}

// checkCRCVersions is checkCRC accepting version bytes up to maxVersion.
func checkCRCVersions(what string, b []byte, maxVersion byte) ([]byte, error) {
	if len(b) < 1+crcLen {
		return nil, corrupt(what, "%d bytes is too short", len(b))
	}
	body := b[:len(b)-crcLen]
	if got, want := binary.BigEndian.Uint32(b[len(body):]), crc32.Checksum(body, durable.Castagnoli); got != want {
		return nil, corrupt(what, "checksum %08x, computed %08x", got, want)
	}
	if body[0] < recordV1 || body[0] > maxVersion {
		return nil, corrupt(what, "unknown version %d", body[0])
	}
	return body, nil
}

// storeRecord is the value of the store key: the format marker and the next
// volume id to hand out.
type storeRecord struct {
	NextID uint64
}

func encodeStoreRecord(r storeRecord) []byte {
	b := make([]byte, 0, storeRecLen)
	b = append(b, recordV1)
	b = append(b, storeMagic...)
	b = binary.BigEndian.AppendUint64(b, r.NextID)
	return appendCRC(b)
}

func decodeStoreRecord(b []byte) (storeRecord, error) {
	const what = "store record"
	body, err := checkCRC(what, b)
	if err != nil {
		return storeRecord{}, err
	}
	if len(b) != storeRecLen {
		return storeRecord{}, corrupt(what, "%d bytes, want %d", len(b), storeRecLen)
	}
	if string(body[1:5]) != storeMagic {
		return storeRecord{}, corrupt(what, "magic %q, want %q", body[1:5], storeMagic)
	}
	r := storeRecord{NextID: binary.BigEndian.Uint64(body[5:13])}
	if r.NextID == 0 {
		return storeRecord{}, corrupt(what, "next volume id is 0")
	}
	return r, nil
}

// volumeRecord is the value of a volume key. It is rewritten in the batch of
// every commit, so head, pages and bytes always describe the same LSN.
//
// Version 1 has the first seven fields; version 2 appends the replication
// fields (remote LSN, its hash, the local LSN it covers); version 3 the
// identity of the remote they refer to. Fields are only ever appended;
// encoders write version 3 and decoders read versions 1 and 2 with the new
// fields zero.
type volumeRecord struct {
	ID       uint64 // internal id, the volume's key prefix
	Head     uint64 // newest committed LSN (0: none yet)
	Horizon  uint64 // GC horizon: LSNs below it are no longer readable
	KeepFrom uint64 // GC never passes this LSN; Unpinned if unconstrained
	Pages    uint64 // pages present at Head
	Bytes    uint64 // sum of their lengths
	Created  int64  // creation time, Unix nanoseconds

	RemoteLSN  uint64   // newest remote LSN pushed or applied (0: none)
	RemoteHash [32]byte // SHA-256 of that remote commit (zero with RemoteLSN 0)
	SyncLocal  uint64   // the local LSN that remote commit covers (the sync point)

	RemoteID RemoteID // the identity of the remote pushed to or pulled from (zero: none recorded)
}

func encodeVolumeRecord(r volumeRecord) []byte {
	b := make([]byte, 0, volumeRecV3Len)
	b = append(b, recordV3)
	for _, f := range [...]uint64{r.ID, r.Head, r.Horizon, r.KeepFrom, r.Pages, r.Bytes, uint64(r.Created), r.RemoteLSN} {
		b = binary.BigEndian.AppendUint64(b, f)
	}
	b = append(b, r.RemoteHash[:]...)
	b = binary.BigEndian.AppendUint64(b, r.SyncLocal)
	b = append(b, r.RemoteID[:]...)
	return appendCRC(b)
}

func decodeVolumeRecord(b []byte) (volumeRecord, error) {
	const what = "volume record"
	body, err := checkCRCVersions(what, b, recordV3)
	if err != nil {
		return volumeRecord{}, err
	}
	want := volumeRecV1Len
	switch body[0] {
	case recordV2:
		want = volumeRecV2Len
	case recordV3:
		want = volumeRecV3Len
	}
	if len(b) != want {
		return volumeRecord{}, corrupt(what, "version %d: %d bytes, want %d", body[0], len(b), want)
	}
	f := func(n int) uint64 { return binary.BigEndian.Uint64(body[1+8*n:]) }
	r := volumeRecord{ID: f(0), Head: f(1), Horizon: f(2), KeepFrom: f(3), Pages: f(4), Bytes: f(5), Created: int64(f(6))}
	if body[0] >= recordV2 {
		r.RemoteLSN = f(7)
		copy(r.RemoteHash[:], body[1+8*8:])
		r.SyncLocal = binary.BigEndian.Uint64(body[1+8*8+32:])
	}
	if body[0] >= recordV3 {
		copy(r.RemoteID[:], body[1+8*8+32+8:])
	}
	switch {
	case r.SyncLocal > r.Head:
		return volumeRecord{}, corrupt(what, "sync point %d above head %d", r.SyncLocal, r.Head)
	case r.RemoteLSN == 0 && (r.SyncLocal != 0 || r.RemoteHash != [32]byte{}):
		return volumeRecord{}, corrupt(what, "sync point without a remote LSN")
	case r.ID == 0:
		return volumeRecord{}, corrupt(what, "volume id 0")
	case r.Horizon > r.Head:
		return volumeRecord{}, corrupt(what, "GC horizon %d above head %d", r.Horizon, r.Head)
	case r.Head == 0 && (r.Pages != 0 || r.Bytes != 0):
		return volumeRecord{}, corrupt(what, "%d pages of %d bytes before the first commit", r.Pages, r.Bytes)
	}
	return r, nil
}

// MetaEntry is one metadata key and its value as set by a commit.
type MetaEntry struct {
	Key   string
	Value []byte
}

// Commit describes one committed LSN of a volume: the record the replication
// layer reads to find the pages changed in an LSN range.
type Commit struct {
	LSN   uint64
	Time  time.Time   // when the commit was made (wall clock, nanoseconds)
	Pages []uint64    // indexes of the pages it wrote, ascending, each once
	Meta  []MetaEntry // metadata it set, by ascending key, each once
}

// encodeCommitRecord encodes c (its LSN lives in the key). Pages and Meta
// must be sorted ascending without duplicates.
func encodeCommitRecord(c Commit) []byte {
	n := 1 + 8 + binary.MaxVarintLen64*(2+len(c.Pages)) + crcLen
	for _, m := range c.Meta {
		n += 2*binary.MaxVarintLen64 + len(m.Key) + len(m.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, recordV1)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Time.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(c.Pages)))
	prev := uint64(0)
	for k, p := range c.Pages {
		if k == 0 {
			b = binary.AppendUvarint(b, p)
		} else {
			b = binary.AppendUvarint(b, p-prev)
		}
		prev = p
	}
	b = binary.AppendUvarint(b, uint64(len(c.Meta)))
	for _, m := range c.Meta {
		b = binary.AppendUvarint(b, uint64(len(m.Key)))
		b = append(b, m.Key...)
		b = binary.AppendUvarint(b, uint64(len(m.Value)))
		b = append(b, m.Value...)
	}
	return appendCRC(b)
}

// decodeCommitRecord decodes the value of the commit key of lsn. It is
// total: any byte string yields a Commit or an error wrapping ErrCorrupt.
func decodeCommitRecord(lsn uint64, b []byte) (Commit, error) {
	const what = "commit record"
	body, err := checkCRC(what, b)
	if err != nil {
		return Commit{}, err
	}
	r := body[1:]
	if len(r) < 8 {
		return Commit{}, corrupt(what, "LSN %d: truncated time", lsn)
	}
	c := Commit{LSN: lsn, Time: time.Unix(0, int64(binary.BigEndian.Uint64(r)))}
	r = r[8:]
	uv := func(field string) (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			err = corrupt(what, "LSN %d: bad varint in %s", lsn, field)
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	np, ok := uv("page count")
	if !ok {
		return Commit{}, err
	}
	if np > uint64(len(r)) { // every page takes at least one byte
		return Commit{}, corrupt(what, "LSN %d: %d pages in %d bytes", lsn, np, len(r))
	}
	if np > 0 {
		c.Pages = make([]uint64, 0, np)
	}
	var prev uint64
	for k := uint64(0); k < np; k++ {
		d, ok := uv("page index")
		if !ok {
			return Commit{}, err
		}
		if k > 0 {
			if d == 0 || d > math.MaxUint64-prev {
				return Commit{}, corrupt(what, "LSN %d: page delta %d after %d", lsn, d, prev)
			}
			d += prev
		}
		c.Pages = append(c.Pages, d)
		prev = d
	}
	nm, ok := uv("metadata count")
	if !ok {
		return Commit{}, err
	}
	if nm > uint64(len(r))/2 { // every entry takes at least two bytes
		return Commit{}, corrupt(what, "LSN %d: %d metadata entries in %d bytes", lsn, nm, len(r))
	}
	if nm > 0 {
		c.Meta = make([]MetaEntry, 0, nm)
	}
	for k := uint64(0); k < nm; k++ {
		kl, ok := uv("metadata key length")
		if !ok {
			return Commit{}, err
		}
		if kl > MaxMetaKeyLen || kl > uint64(len(r)) {
			return Commit{}, corrupt(what, "LSN %d: metadata key of %d bytes", lsn, kl)
		}
		key := string(r[:kl])
		r = r[kl:]
		if k > 0 && key <= c.Meta[k-1].Key {
			return Commit{}, corrupt(what, "LSN %d: metadata key %q after %q", lsn, key, c.Meta[k-1].Key)
		}
		vl, ok := uv("metadata value length")
		if !ok {
			return Commit{}, err
		}
		if vl > uint64(len(r)) {
			return Commit{}, corrupt(what, "LSN %d: metadata value of %d bytes in %d", lsn, vl, len(r))
		}
		c.Meta = append(c.Meta, MetaEntry{Key: key, Value: bytes.Clone(r[:vl])})
		r = r[vl:]
	}
	if len(r) != 0 {
		return Commit{}, corrupt(what, "LSN %d: %d trailing bytes", lsn, len(r))
	}
	if np == 0 && nm == 0 {
		return Commit{}, corrupt(what, "LSN %d: empty commit", lsn)
	}
	return c, nil
}

// Page and metadata versions are stored as a version byte followed by the
// payload; Pebble's block checksums cover them.

// versionedPayload returns the payload of a page or metadata value.
func versionedPayload(what string, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != recordV1 {
		if len(v) == 0 {
			return nil, corrupt(what, "empty value")
		}
		return nil, corrupt(what, "unknown version %d", v[0])
	}
	return v[1:], nil
}
