package remote

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// Every decoder is total: on any input it returns a value or an error
// wrapping ErrCorrupt, and never panics. What it accepts re-encodes to the
// same bytes. With fix set, a target first rewrites the input's trailing
// CRC-32C to match, so that the fuzzer explores the parser behind it.

func fixCRC(b []byte, fix bool) []byte {
	if !fix || len(b) < 4 {
		return b
	}
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[len(c)-4:], crc(c[:len(c)-4]))
	return c
}

func FuzzDecodeCommit(f *testing.F) {
	b, _ := sampleCommit(f)
	f.Add(b, false)
	f.Add(b, true)
	small, _ := EncodeCommit(&Commit{Volume: "v", LSN: 1, Inline: []Page{{Index: 3, Data: []byte("x")}}})
	f.Add(small, true)
	f.Add([]byte("ESRC"), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		b = fixCRC(b, fix)
		c, err := DecodeCommit(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		again, err := EncodeCommit(c)
		if err != nil {
			t.Fatalf("decoded commit does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			// Non-minimal varints decode too; the re-encoding must still
			// decode to the same commit.
			d, err := DecodeCommit(again)
			if err != nil || !sameCommit(c, d) {
				t.Fatalf("re-encoding changed the commit: %v", err)
			}
		}
	})
}

// FuzzDecodeSegmentFrame decodes a frame reference (the commit's encoding
// of it) followed by the frame's bytes. With fix set, the reference's
// length and CRC are made to match the bytes so that the fuzzer reaches
// the zstd decoder and the page bounds.
func FuzzDecodeSegmentFrame(f *testing.F) {
	seg, err := BuildSegment("v", "s", pagesAt(1, 0, 1, 70, 300))
	if err != nil {
		f.Fatal(err)
	}
	for _, fr := range seg.Frame {
		e := enc{}
		encodeFrame(&e, fr)
		f.Add(append(e.b, seg.Data[fr.Offset:fr.Offset+fr.Length]...), false)
		f.Add(append(e.b, seg.Data[fr.Offset:fr.Offset+fr.Length]...), true)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0x28, 0xb5, 0x2f, 0xfd}, true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		d := &dec{what: "frame ref", b: b}
		ref := decodeFrame(d)
		if d.err != nil {
			if !errors.Is(d.err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", d.err)
			}
			return
		}
		z := b[d.off:]
		if fix {
			ref.Length, ref.CRC = uint64(len(z)), crc(z)
		}
		pages, err := DecodeFrame(ref, z)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if len(pages) != len(ref.Pages) {
			t.Fatalf("%d pages for %d references", len(pages), len(ref.Pages))
		}
		for i, p := range pages {
			if p.Index != ref.Pages[i].Index || len(p.Data) != int(ref.Pages[i].Length) {
				t.Fatalf("page %d does not match its reference", i)
			}
		}
	})
}

func FuzzDecodeWholeSegment(f *testing.F) {
	seg, err := BuildSegment("v", "s", pagesAt(1, 0, 1, 70, 300))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg.Data, false)
	f.Add(seg.Data, true)
	one, _ := BuildSegment("v", "s", []Page{{Index: 1}})
	f.Add(one.Data, true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		b = fixCRC(b, fix)
		frames, pages, err := DecodeSegment(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		n := 0
		for _, fr := range frames {
			n += len(fr.Pages)
		}
		if n != len(pages) {
			t.Fatalf("%d pages for %d references", len(pages), n)
		}
	})
}

func FuzzDecodeCheckpointMarker(f *testing.F) {
	f.Add(encodeMarker(checkpointMarker{Volume: "vol.x", LSN: 77, Hash: Hash{1}}), true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		b = fixCRC(b, fix)
		v, lsn, h, err := DecodeCheckpointMarker(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(encodeMarker(checkpointMarker{Volume: v, LSN: lsn, Hash: h}), b) {
			t.Fatalf("marker does not re-encode to its bytes")
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	f.Add("v", LogKey("v", 1))
	f.Add("v", CheckpointKey("v", 9, Hash{2}))
	f.Fuzz(func(t *testing.T, v, key string) {
		if lsn, err := ParseLogKey(v, key); err == nil && LogKey(v, lsn) != key {
			t.Fatalf("ParseLogKey accepted a non-canonical key %q", key)
		} else if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if lsn, h, err := ParseCheckpointKey(v, key); err == nil && CheckpointKey(v, lsn, h) != key {
			t.Fatalf("ParseCheckpointKey accepted a non-canonical key %q", key)
		}
		if err := CheckKey(key); err != nil && !errors.Is(err, ErrBadKey) {
			t.Fatal(err)
		}
	})
}

func FuzzDecodeTombstone(f *testing.F) {
	f.Add(encodeTombstone("vol.x", 12), true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		b = fixCRC(b, fix)
		v, lsn, err := DecodeTombstone(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(encodeTombstone(v, lsn), b) {
			t.Fatalf("tombstone does not re-encode to its bytes")
		}
	})
}
