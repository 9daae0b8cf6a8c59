package remote

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func genVolume() *rapid.Generator[string] {
	return rapid.StringMatching(`[A-Za-z0-9_-][A-Za-z0-9._-]{0,40}`)
}

func genHash(t *rapid.T, label string) Hash {
	var h Hash
	copy(h[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	return h
}

// genCommit draws a valid commit: unique page indexes spread over inline
// pages and frames of segments of its volume.
func genCommit(t *rapid.T) *Commit {
	c := &Commit{Volume: genVolume().Draw(t, "volume")}
	c.LSN = rapid.OneOf(rapid.Uint64Range(1, 5), rapid.Uint64Range(1, MaxLSN)).Draw(t, "lsn")
	if c.LSN > 1 {
		c.Prev = genHash(t, "prev")
	}
	c.LocalFrom = rapid.Uint64().Draw(t, "from")
	c.LocalTo = c.LocalFrom + rapid.Uint64Range(0, math.MaxUint64-c.LocalFrom).Draw(t, "span")
	c.Checkpoint = rapid.Bool().Draw(t, "checkpoint")
	if m := rapid.MapOfN(rapid.StringN(1, 20, MaxMetaKey), rapid.SliceOfN(rapid.Byte(), 0, 40), 0, 5).Draw(t, "meta"); len(m) > 0 {
		c.Meta = m
	}
	idx := rapid.SliceOfNDistinct(rapid.OneOf(rapid.Uint64Range(0, 300), rapid.Uint64()), 0, 60, rapid.ID[uint64]).Draw(t, "indexes")
	slices.Sort(idx)
	for len(idx) > 0 {
		n := rapid.IntRange(1, len(idx)).Draw(t, "n")
		part := idx[:n]
		idx = idx[n:]
		if rapid.Bool().Draw(t, "inline") {
			for _, i := range part {
				c.Inline = append(c.Inline, Page{Index: i, Data: rapid.SliceOfN(rapid.Byte(), 0, 30).Draw(t, "data")})
			}
			slices.SortFunc(c.Inline, func(a, b Page) int { return cmpUint(a.Index, b.Index) })
			continue
		}
		raw := rapid.Uint64Range(0, MaxFrameRaw).Draw(t, "raw")
		f := FrameRef{Offset: rapid.Uint64Range(0, 1<<40).Draw(t, "off"), Length: rapid.Uint64Range(1, 1<<20).Draw(t, "len"),
			RawLength: raw, CRC: rapid.Uint32().Draw(t, "crc")}
		for _, i := range part {
			off := rapid.Uint64Range(0, raw).Draw(t, "poff")
			ln := rapid.Uint64Range(0, min(raw-off, MaxPageSize)).Draw(t, "plen")
			f.Pages = append(f.Pages, PageLoc{Index: i, Offset: uint32(off), Length: uint32(ln)})
		}
		id := fmt.Sprintf("%032x", rapid.IntRange(0, 3).Draw(t, "seg"))
		c.Segments = append(c.Segments, SegmentRef{Key: SegmentKey(c.Volume, id), Frames: []FrameRef{f}})
	}
	return c
}

func sameCommit(a, b *Commit) bool {
	if a.Volume != b.Volume || a.LSN != b.LSN || a.Prev != b.Prev || a.LocalFrom != b.LocalFrom ||
		a.LocalTo != b.LocalTo || a.Checkpoint != b.Checkpoint || len(a.Meta) != len(b.Meta) ||
		len(a.Inline) != len(b.Inline) || fmt.Sprint(a.Segments) != fmt.Sprint(b.Segments) {
		return false
	}
	for k, v := range a.Meta {
		if w, ok := b.Meta[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	for i := range a.Inline {
		if a.Inline[i].Index != b.Inline[i].Index || !bytes.Equal(a.Inline[i].Data, b.Inline[i].Data) {
			return false
		}
	}
	return true
}

func TestCommitRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCommit(t)
		b, err := EncodeCommit(c)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		d, err := DecodeCommit(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !sameCommit(c, d) {
			t.Fatalf("round trip changed the commit:\n%+v\n%+v", c, d)
		}
		again, _ := EncodeCommit(d)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestSegmentRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		idx := rapid.SliceOfNDistinct(rapid.Uint64(), 1, 200, rapid.ID[uint64]).Draw(t, "indexes")
		slices.Sort(idx)
		pages := make([]Page, len(idx))
		for i, x := range idx {
			size := rapid.OneOf(rapid.IntRange(0, 100), rapid.IntRange(0, 20000), rapid.IntRange(FrameBytes-10, FrameBytes+10)).Draw(t, "size")
			pages[i] = Page{Index: x, Data: pageData(7, x, size)}
		}
		seg, err := BuildSegment("v", "salt", pages)
		if err != nil {
			t.Fatal(err)
		}
		frames, got, err := DecodeSegment(seg.Data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if fmt.Sprint(frames) != fmt.Sprint(seg.Frame) || len(got) != len(pages) {
			t.Fatalf("footer differs from the built frames")
		}
		for i := range pages {
			if got[i].Index != pages[i].Index || !bytes.Equal(got[i].Data, pages[i].Data) {
				t.Fatalf("page %d differs", pages[i].Index)
			}
		}
		for _, f := range frames {
			if len(f.Pages) > FramePages || (f.RawLength > FrameBytes && len(f.Pages) != 1) {
				t.Fatalf("frame out of bounds: %d pages, %d bytes", len(f.Pages), f.RawLength)
			}
			ps, err := DecodeFrame(f, seg.Data[f.Offset:f.Offset+f.Length])
			if err != nil || len(ps) != len(f.Pages) {
				t.Fatalf("frame alone: %v", err)
			}
		}
		again, _ := BuildSegment("v", "salt", pages)
		if again.Key != seg.Key || !bytes.Equal(again.Data, seg.Data) {
			t.Fatalf("building twice gave different segments")
		}
	})
}

func TestKeysRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genVolume().Draw(t, "volume")
		a := rapid.Uint64Range(1, MaxLSN).Draw(t, "a")
		b := rapid.Uint64Range(1, MaxLSN).Draw(t, "b")
		if got, err := ParseLogKey(v, LogKey(v, a)); err != nil || got != a {
			t.Fatalf("ParseLogKey(LogKey(%d)) = %d, %v", a, got, err)
		}
		if (a < b) != (LogKey(v, a) > LogKey(v, b)) && a != b {
			t.Fatalf("keys of %d and %d do not sort newest first", a, b)
		}
		h := genHash(t, "h")
		if l, g, err := ParseCheckpointKey(v, CheckpointKey(v, a, h)); err != nil || l != a || g != h {
			t.Fatalf("checkpoint key round trip: %v", err)
		}
		if CheckKey(LogKey(v, a)) != nil || CheckKey(CheckpointKey(v, a, h)) != nil {
			t.Fatalf("generated keys fail CheckKey")
		}
		m := encodeMarker(checkpointMarker{Volume: v, LSN: a, Hash: h})
		if vv, l, g, err := DecodeCheckpointMarker(m); err != nil || vv != v || l != a || g != h {
			t.Fatalf("marker round trip: %v", err)
		}
	})
}

// corruptions checks every truncation and every single-bit flip of a
// valid object: each must fail with ErrCorrupt (the CRC-32C catches every
// single-bit error) and nothing may panic.
func corruptions(t *testing.T, b []byte, decode func([]byte) error) {
	t.Helper()
	if err := decode(b); err != nil {
		t.Fatalf("valid object: %v", err)
	}
	for n := range len(b) {
		if err := decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: %v", n, len(b), err)
		}
	}
	for i := range len(b) {
		for bit := range 8 {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			if err := decode(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("bit %d of byte %d flipped: %v", bit, i, err)
			}
		}
	}
	if err := decode(append(append([]byte(nil), b...), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a trailing byte: %v", err)
	}
}

func sampleCommit(t testing.TB) ([]byte, *Commit) {
	seg, err := BuildSegment("vol.x", "s", pagesAt(3, 10, 2, 70, 100))
	if err != nil {
		t.Fatal(err)
	}
	c := &Commit{Volume: "vol.x", LSN: 3, Prev: Hash{9, 9}, LocalFrom: 4, LocalTo: 9, Checkpoint: true,
		Meta:     map[string][]byte{"w": []byte("123"), "seq": {1, 2}},
		Inline:   pagesAt(3, 1, 1, 3, 20),
		Segments: []SegmentRef{{Key: seg.Key, Frames: seg.Frame}}}
	b, err := EncodeCommit(c)
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

//echostore:fault
func TestCorruptCommit(t *testing.T) {
	b, _ := sampleCommit(t)
	corruptions(t, b, func(b []byte) error { _, err := DecodeCommit(b); return err })
}

//echostore:fault
func TestCorruptSegment(t *testing.T) {
	seg, err := BuildSegment("vol.x", "s", pagesAt(3, 10, 2, 70, 100))
	if err != nil {
		t.Fatal(err)
	}
	corruptions(t, seg.Data, func(b []byte) error { _, _, err := DecodeSegment(b); return err })
	f := seg.Frame[1]
	z := seg.Data[f.Offset : f.Offset+f.Length]
	corruptions(t, z, func(b []byte) error { _, err := DecodeFrame(f, b); return err })
}

//echostore:fault
func TestCorruptMarker(t *testing.T) {
	m := encodeMarker(checkpointMarker{Volume: "vol.x", LSN: 77, Hash: Hash{1}})
	corruptions(t, m, func(b []byte) error { _, _, _, err := DecodeCheckpointMarker(b); return err })
}

// TestFrameWithoutChecksumRejected: a zstd frame without zstd's content
// checksum is refused even when our CRC matches.
func TestFrameWithoutChecksumRejected(t *testing.T) {
	raw := pageData(1, 1, 1000)
	z := theCodec().enc.EncodeAll(raw, nil)
	z[4] &^= 0x04 // clear Content_Checksum_flag; the frame is now malformed too
	f := FrameRef{Length: uint64(len(z)), RawLength: 1000, CRC: crc(z), Pages: []PageLoc{{Index: 1, Length: 1000}}}
	if _, err := DecodeFrame(f, z); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("frame without content checksum: %v", err)
	}
}

//echostore:fault
func TestCorruptTombstone(t *testing.T) {
	b := encodeTombstone("vol.x", 12)
	if v, l, err := DecodeTombstone(b); err != nil || v != "vol.x" || l != 12 {
		t.Fatalf("round trip: %v", err)
	}
	if int64(len(b)) != tombstoneSize("vol.x") {
		t.Fatal("tombstoneSize is wrong")
	}
	corruptions(t, b, func(b []byte) error { _, _, err := DecodeTombstone(b); return err })
}
