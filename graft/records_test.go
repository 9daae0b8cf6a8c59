package graft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/echostore/echostore/graft/remote"
	"reflect"
	"testing"
	"time"
)

func sampleCommits() []Commit {
	return []Commit{
		{LSN: 1, Time: time.Unix(0, 1_700_000_000_123_456_789), Pages: []uint64{0}},
		{LSN: 7, Time: time.Unix(0, 0), Pages: []uint64{1, 2, 300, ArchiveBase, ^uint64(0)},
			Meta: []MetaEntry{{Key: "", Value: []byte{}}, {Key: "seq", Value: []byte("12")}, {Key: "w", Value: []byte("EVT_0000000000001")}}},
		{LSN: 9, Time: time.Unix(5, 0), Meta: []MetaEntry{{Key: "only", Value: []byte("meta")}}},
	}
}

func TestCommitRecordRoundTrip(t *testing.T) {
	for _, c := range sampleCommits() {
		b := encodeCommitRecord(c)
		got, err := decodeCommitRecord(c.LSN, b)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", c, err)
		}
		if !got.Time.Equal(c.Time) || !reflect.DeepEqual(got.Pages, c.Pages) || !reflect.DeepEqual(got.Meta, c.Meta) {
			t.Fatalf("round trip: %+v != %+v", got, c)
		}
		for n := 0; n < len(b); n++ { // every truncation and every bit flip is caught
			if _, err := decodeCommitRecord(c.LSN, b[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d: %v", n, err)
			}
			flipped := bytes.Clone(b)
			flipped[n] ^= 0x10
			if _, err := decodeCommitRecord(c.LSN, flipped); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: %v", n, err)
			}
		}
	}
	// An empty commit never decodes, even with a valid checksum.
	if _, err := decodeCommitRecord(1, encodeCommitRecord(Commit{LSN: 1})); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty commit decoded: %v", err)
	}
}

func TestVolumeRecordRoundTrip(t *testing.T) {
	r := volumeRecord{ID: 3, Head: 10, Horizon: 4, KeepFrom: Unpinned, Pages: 5, Bytes: 999, Created: 1234,
		RemoteLSN: 7, RemoteHash: [32]byte{1, 2, 3, 31: 9}, SyncLocal: 9, RemoteID: RemoteID{0xC0, 15: 0xDE}}
	b := encodeVolumeRecord(r)
	if len(b) != volumeRecV3Len || b[0] != 3 {
		t.Fatalf("%d bytes, version %d", len(b), b[0])
	}
	got, err := decodeVolumeRecord(b)
	if err != nil || got != r {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for n := 0; n < len(b); n++ { // every truncation and every bit flip is caught
		if _, err := decodeVolumeRecord(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
		flipped := bytes.Clone(b)
		flipped[n] ^= 0x10
		if _, err := decodeVolumeRecord(flipped); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: %v", n, err)
		}
	}
	// Version 1 (written before replication) still reads, the new fields zero.
	v1 := append([]byte{1}, b[1:57]...)
	v1 = appendCRC(v1)
	old := r
	old.RemoteLSN, old.RemoteHash, old.SyncLocal, old.RemoteID = 0, [32]byte{}, 0, RemoteID{}
	if got, err := decodeVolumeRecord(v1); err != nil || got != old || len(v1) != volumeRecV1Len {
		t.Fatalf("version 1: %+v, %v", got, err)
	}
	for _, bad := range []volumeRecord{{ID: 0, Head: 1}, {ID: 1, Head: 1, Horizon: 2}, {ID: 1, Pages: 1},
		{ID: 1, Head: 1, RemoteLSN: 1, SyncLocal: 2}, {ID: 1, Head: 1, SyncLocal: 1}} {
		if _, err := decodeVolumeRecord(encodeVolumeRecord(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%+v decoded: %v", bad, err)
		}
	}
}

func FuzzDecodeCommit(f *testing.F) {
	for _, c := range sampleCommits() {
		f.Add(c.LSN, encodeCommitRecord(c))
	}
	f.Add(uint64(1), []byte{})
	f.Add(uint64(1), []byte{1, 0, 0, 0, 0})
	f.Add(uint64(2), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 5, 0, 1, 3, 'k', 'e', 'y', 1, 'v'})
	f.Fuzz(func(t *testing.T, lsn uint64, b []byte) {
		// As stored, and with a valid checksum appended so that the fuzzer
		// reaches the parser behind the checksum.
		for _, in := range [][]byte{b, appendCRC(bytes.Clone(b))} {
			c, err := decodeCommitRecord(lsn, in)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not wrap ErrCorrupt: %v", err)
				}
				continue
			}
			// What decodes re-encodes to something that decodes the same.
			c2, err := decodeCommitRecord(lsn, encodeCommitRecord(c))
			if err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("re-encode: %+v != %+v (%v)", c, c2, err)
			}
		}
	})
}

// fuzzFixedRecord fuzzes the decoder of a fixed-layout record: it is total
// (corrupt input gives ErrCorrupt), what it accepts in the newest version
// re-encodes to the very bytes it read (the encoding is canonical), and what
// it accepts in an older version survives a re-encode in the newest.
func fuzzFixedRecord[R any](f *testing.F, what string, decode func([]byte) (R, error), encode func(R) []byte, seeds ...R) {
	for _, r := range seeds {
		f.Add(encode(r))
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, appendCRC(bytes.Clone(b))} {
			r, err := decode(in)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: error does not wrap ErrCorrupt: %v", what, err)
				}
				continue
			}
			out := encode(r)
			// The newest version is canonical: it re-encodes to its bytes.
			// An older version decodes to a record the newest version keeps.
			if len(in) > 0 && in[0] == out[0] && !bytes.Equal(out, in) {
				t.Fatalf("%s %+v does not re-encode to its bytes", what, r)
			}
			if r2, err := decode(out); err != nil || !reflect.DeepEqual(r, r2) {
				t.Fatalf("%s %+v does not survive a re-encode: %+v, %v", what, r, r2, err)
			}
		}
	})
}

func FuzzDecodeVolume(f *testing.F) {
	// A version-1 record (before replication added its fields).
	v1 := []byte{1}
	for _, x := range []uint64{7, 12, 3, 4, 2, 8192, 1} {
		v1 = binary.BigEndian.AppendUint64(v1, x)
	}
	f.Add(appendCRC(v1))
	fuzzFixedRecord(f, "volume record", decodeVolumeRecord, encodeVolumeRecord,
		volumeRecord{ID: 1, KeepFrom: Unpinned},
		volumeRecord{ID: 9, Head: 100, Horizon: 50, KeepFrom: 60, Pages: 3, Bytes: 4096, Created: -1})
}

func FuzzDecodeStore(f *testing.F) {
	fuzzFixedRecord(f, "store record", decodeStoreRecord, encodeStoreRecord,
		storeRecord{NextID: 1}, storeRecord{NextID: 1 << 40})
}

func FuzzDecodeKeys(f *testing.F) {
	f.Add(appendPageKey(nil, 1, 2, 3), uint64(1))
	f.Add(appendCommitKey(nil, 1, 2), uint64(1))
	f.Fuzz(func(t *testing.T, k []byte, vid uint64) {
		if i, lsn, ok := decodePageKey(k, vid); ok && !bytes.Equal(appendPageKey(nil, vid, i, lsn), k) {
			t.Fatalf("page key %x does not re-encode", k)
		}
		if lsn, ok := decodeCommitKey(k, vid); ok && !bytes.Equal(appendCommitKey(nil, vid, lsn), k) {
			t.Fatalf("commit key %x does not re-encode", k)
		}
	})
}

func TestFrameRecordRoundTrip(t *testing.T) {
	f := frameRecord{Segment: "segments/v/0123456789abcdef0123456789abcdef", Ref: remote.FrameRef{
		Offset: 8, Length: 300, RawLength: 12288, CRC: 0xdeadbeef,
		Pages: []remote.PageLoc{{Index: 3, Offset: 0, Length: 4096}, {Index: 9, Offset: 4096, Length: 8192}}}}
	b := encodeFrameRecord(f)
	got, err := decodeFrameRecord(b)
	if err != nil || got.Segment != f.Segment || got.Ref.CRC != f.Ref.CRC || len(got.Ref.Pages) != 2 || got.Ref.Pages[1] != f.Ref.Pages[1] {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := decodeFrameRecord(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	for _, v := range [][]byte{encodeRemoteRef(4096, 7), {1, 'a'}} {
		if _, _, _, _, err := pageValue(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range [][]byte{{}, {2}, {2, 0x80}, {3, 1}, append(encodeRemoteRef(1, 1), 0)} {
		if _, _, _, _, err := pageValue(v); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x: %v", v, err)
		}
	}
}

func FuzzDecodeFrameRecord(f *testing.F) {
	f.Add(encodeFrameRecord(frameRecord{Segment: "s", Ref: remote.FrameRef{Pages: []remote.PageLoc{{Index: 1}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, appendCRC(bytes.Clone(b))} {
			if _, err := decodeFrameRecord(in); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			_, _, _, _, _ = pageValue(in)
		}
	})
}
