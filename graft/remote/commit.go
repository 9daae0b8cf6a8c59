package remote

import (
	"bytes"
	"fmt"
	"slices"
)

// Commit is one entry of a volume's remote log: the object at
// volumes/<Volume>/log/<^LSN>.
type Commit struct {
	Volume string
	// LSN is the remote LSN, 1 for the first commit.
	LSN uint64
	// Prev is the Hash of the commit at LSN-1 (zero for LSN 1).
	Prev Hash
	// The commit covers local LSNs (LocalFrom, LocalTo]: the sync point.
	LocalFrom, LocalTo uint64
	// Checkpoint marks a commit that references every live page of the
	// volume at this LSN.
	Checkpoint bool
	// Meta is small metadata committed with the pages (nil when empty).
	Meta map[string][]byte
	// Inline pages travel inside the commit object.
	Inline []Page
	// Segments reference pages stored in segment frames.
	Segments []SegmentRef
}

const flagCheckpoint = 1

// PageRef is how a commit reaches one page: inline bytes, or a frame.
type PageRef struct {
	Index uint64
	// Data holds the page of an inline reference.
	Data []byte
	// Segment is the segment key of a frame reference ("" if inline).
	Segment string
	Frame   FrameRef
	Loc     PageLoc
}

// Inline reports whether the page is carried inside the commit object.
func (r PageRef) Inline() bool { return r.Segment == "" }

// Pages returns every page the commit references, in ascending index.
func (c *Commit) Pages() []PageRef {
	var out []PageRef
	for _, p := range c.Inline {
		out = append(out, PageRef{Index: p.Index, Data: p.Data})
	}
	for _, s := range c.Segments {
		for _, f := range s.Frames {
			for _, l := range f.Pages {
				out = append(out, PageRef{Index: l.Index, Segment: s.Key, Frame: f, Loc: l})
			}
		}
	}
	slices.SortFunc(out, func(a, b PageRef) int { return cmpUint(a.Index, b.Index) })
	return out
}

// validate checks the rules EncodeCommit and DecodeCommit share; fail
// builds the error.
func (c *Commit) validate(fail func(format string, args ...any) error) error {
	if err := checkVolume(c.Volume); err != nil {
		return fail("volume: %v", err)
	}
	if c.LSN < 1 || c.LSN > MaxLSN {
		return fail("remote lsn %d out of range", c.LSN)
	}
	if c.LocalFrom > c.LocalTo {
		return fail("local range (%d,%d] is reversed", c.LocalFrom, c.LocalTo)
	}
	if c.LSN == 1 && !c.Prev.IsZero() {
		return fail("lsn 1 names a predecessor")
	}
	for k, v := range c.Meta {
		if len(k) == 0 || len(k) > MaxMetaKey || len(v) > MaxMetaValue {
			return fail("metadata %q: key of %d bytes, value of %d", k, len(k), len(v))
		}
	}
	if err := checkPages(c.Inline); err != nil {
		return fail("inline pages: %v", err)
	}
	var idx []uint64
	for _, p := range c.Inline {
		idx = append(idx, p.Index)
	}
	for _, s := range c.Segments {
		if !checkSegmentKey(c.Volume, s.Key) {
			return fail("segment key %q is not segments/%s/<32 hex>", s.Key, c.Volume)
		}
		if len(s.Frames) == 0 {
			return fail("segment %s with no frames", s.Key)
		}
		for _, f := range s.Frames {
			if len(f.Pages) == 0 || f.RawLength > MaxFrameRaw || f.Length == 0 {
				return fail("segment %s: bad %v", s.Key, f)
			}
			for i, l := range f.Pages {
				if uint64(l.Offset)+uint64(l.Length) > f.RawLength || (i > 0 && l.Index <= f.Pages[i-1].Index) {
					return fail("segment %s %v: page %d misplaced", s.Key, f, l.Index)
				}
				idx = append(idx, l.Index)
			}
		}
	}
	slices.Sort(idx)
	for i := 1; i < len(idx); i++ {
		if idx[i] == idx[i-1] {
			return fail("page %d referenced twice", idx[i])
		}
	}
	return nil
}

// EncodeCommit returns the bytes of a commit object. A commit that breaks a
// rule of the format is rejected with an error wrapping ErrInvalid.
func EncodeCommit(c *Commit) ([]byte, error) {
	if err := c.validate(func(f string, a ...any) error {
		return invalid("commit %s@%d: %s", c.Volume, c.LSN, fmt.Sprintf(f, a...))
	}); err != nil {
		return nil, err
	}
	e := enc{b: make([]byte, 0, 128)}
	e.raw(commitMagic[:])
	e.u16(FormatVersion)
	var flags uint16
	if c.Checkpoint {
		flags |= flagCheckpoint
	}
	e.u16(flags)
	e.u64(c.LSN)
	e.u64(c.LocalFrom)
	e.u64(c.LocalTo)
	e.raw(c.Prev[:])
	e.str(c.Volume)
	keys := make([]string, 0, len(c.Meta))
	for k := range c.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.bytes(c.Meta[k])
	}
	e.uvarint(uint64(len(c.Inline)))
	var prev uint64
	for i, p := range c.Inline {
		e.index(i, &prev, p.Index)
		e.bytes(p.Data)
	}
	e.uvarint(uint64(len(c.Segments)))
	for _, s := range c.Segments {
		e.str(s.Key)
		e.uvarint(uint64(len(s.Frames)))
		for _, f := range s.Frames {
			encodeFrame(&e, f)
		}
	}
	e.crc()
	return e.b, nil
}

// DecodeCommit parses and verifies a commit object. Any malformed,
// truncated or corrupted input yields an error wrapping ErrCorrupt; it never
// panics. The returned commit shares memory with b.
func DecodeCommit(b []byte) (*Commit, error) {
	const what = "commit"
	body, err := checkTrailer(what, b)
	if err != nil {
		return nil, err
	}
	d := &dec{what: what, b: body}
	c := &Commit{}
	flags := d.header(commitMagic, flagCheckpoint)
	c.Checkpoint = flags&flagCheckpoint != 0
	c.LSN = d.u64()
	c.LocalFrom = d.u64()
	c.LocalTo = d.u64()
	copy(c.Prev[:], d.take(32))
	c.Volume = string(d.bytes(256))
	if n := d.count(2); n > 0 {
		c.Meta = make(map[string][]byte, n)
		last := ""
		for i := range n {
			k := string(d.bytes(MaxMetaKey))
			v := d.bytes(MaxMetaValue)
			if d.err == nil && i > 0 && k <= last {
				d.fail("metadata keys not strictly ascending at %q", k)
			}
			last = k
			c.Meta[k] = v
		}
	}
	if n := d.count(2); n > 0 && d.err == nil {
		c.Inline = make([]Page, n)
		var prev uint64
		for i := range c.Inline {
			idx := d.index(i, &prev)
			c.Inline[i] = Page{Index: idx, Data: d.bytes(MaxPageSize)}
		}
	}
	if n := d.count(2); n > 0 && d.err == nil {
		c.Segments = make([]SegmentRef, n)
		for i := range c.Segments {
			s := &c.Segments[i]
			s.Key = string(d.bytes(MaxKeyLen))
			nf := d.count(8)
			if d.err != nil {
				break
			}
			s.Frames = make([]FrameRef, nf)
			for j := range s.Frames {
				s.Frames[j] = decodeFrame(d)
			}
		}
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	if err := c.validate(func(f string, a ...any) error { return corrupt(what, f, a...) }); err != nil {
		return nil, err
	}
	return c, nil
}

// checkpointMarker is the body of volumes/V/checkpoints/<^lsn>-<hash>.
type checkpointMarker struct {
	Volume string
	LSN    uint64
	Hash   Hash
}

func encodeMarker(m checkpointMarker) []byte {
	e := enc{}
	e.raw(checkpointMagic[:])
	e.u16(FormatVersion)
	e.u16(0)
	e.u64(m.LSN)
	e.raw(m.Hash[:])
	e.str(m.Volume)
	e.crc()
	return e.b
}

// DecodeCheckpointMarker parses a checkpoint marker object and returns the
// volume, LSN and commit hash it names.
func DecodeCheckpointMarker(b []byte) (volume string, lsn uint64, h Hash, err error) {
	const what = "checkpoint marker"
	body, err := checkTrailer(what, b)
	if err != nil {
		return "", 0, Hash{}, err
	}
	d := &dec{what: what, b: body}
	d.header(checkpointMagic, 0)
	lsn = d.u64()
	copy(h[:], d.take(32))
	volume = string(d.bytes(256))
	if err := d.end(); err != nil {
		return "", 0, Hash{}, err
	}
	if checkVolume(volume) != nil || lsn < 1 || lsn > MaxLSN {
		return "", 0, Hash{}, corrupt(what, "volume %q, lsn %d", volume, lsn)
	}
	return volume, lsn, h, nil
}

// equalCommitBytes compares two encoded commits.
func equalCommitBytes(a, b []byte) bool { return bytes.Equal(a, b) }

// encodeTombstone returns the object that replaces a trimmed commit: its
// key must stay taken, or a stale writer could create the LSN again.
func encodeTombstone(volume string, lsn uint64) []byte {
	e := enc{}
	e.raw(tombstoneMagic[:])
	e.u16(FormatVersion)
	e.u16(0)
	e.u64(lsn)
	e.str(volume)
	e.crc()
	return e.b
}

// tombstoneSize is the size of the tombstones of volume (commit objects
// are always larger).
func tombstoneSize(volume string) int64 { return int64(len(encodeTombstone(volume, 1))) }

func isTombstone(b []byte) bool { return bytes.HasPrefix(b, tombstoneMagic[:]) }

// DecodeTombstone parses the tombstone of a trimmed commit and returns the
// volume and LSN it names.
func DecodeTombstone(b []byte) (volume string, lsn uint64, err error) {
	const what = "tombstone"
	body, err := checkTrailer(what, b)
	if err != nil {
		return "", 0, err
	}
	d := &dec{what: what, b: body}
	d.header(tombstoneMagic, 0)
	lsn = d.u64()
	volume = string(d.bytes(256))
	if err := d.end(); err != nil {
		return "", 0, err
	}
	if checkVolume(volume) != nil || lsn < 1 || lsn > MaxLSN {
		return "", 0, corrupt(what, "volume %q, lsn %d", volume, lsn)
	}
	return volume, lsn, nil
}
