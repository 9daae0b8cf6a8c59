package remote

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"

	goldenfile "github.com/echostore/echostore/internal/golden"
)

// Golden files of every remote object version (docs/REMOTE.md; docs/FORMAT.md,
// "Upgrades"). `go test ./graft/remote -run Golden -update` rewrites the
// files of the current version from the encoders. The segment golden is
// written once and never rewritten: its zstd bytes depend on the zstd
// library, so the re-encode check compares its structure, and every later
// reader must still read the old bytes (internal/golden).

// golden returns the checked-in bytes of name (golden.Bytes).
func golden(t *testing.T, name string, current bool, enc []byte) []byte {
	t.Helper()
	return goldenfile.Bytes(t, name, current, enc)
}

// header is the hand-built start of every object: magic, u16 version, u16 flags.
func header(magic string, version, flags uint16) []byte {
	b := []byte(magic)
	b = binary.LittleEndian.AppendUint16(b, version)
	return binary.LittleEndian.AppendUint16(b, flags)
}

const goldenVolume = "archive.q.s"

var (
	goldenPrev    = Hash{0x11, 1: 0x22, 31: 0x33}
	goldenSegment = SegmentKey(goldenVolume, "00112233445566778899aabbccddeeff")
)

func goldenCommit() *Commit {
	return &Commit{
		Volume: goldenVolume, LSN: 2, Prev: goldenPrev, LocalFrom: 3, LocalTo: 5,
		Meta:   map[string][]byte{"archive.seq": {0, 0, 0, 0, 0, 0, 0, 3}, "archive.w": {0, 0, 0, 0, 0, 0, 0x12, 0x34}},
		Inline: []Page{{Index: 1, Data: []byte("inline one")}, {Index: 7, Data: []byte{}}},
		Segments: []SegmentRef{{Key: goldenSegment, Frames: []FrameRef{
			{Offset: 8, Length: 100, RawLength: 8192, CRC: 0xCAFEF00D, Pages: []PageLoc{{Index: 10, Offset: 0, Length: 4096}, {Index: 11, Offset: 4096, Length: 4096}}},
			{Offset: 108, Length: 20, RawLength: 3, CRC: 0x01020304, Pages: []PageLoc{{Index: 1 << 49, Offset: 0, Length: 3}}},
		}}},
	}
}

// TestGoldenCommitV1: a commit object with metadata, inline pages (one
// empty) and a segment of two frames; and a checkpoint commit.
func TestGoldenCommitV1(t *testing.T) {
	want := goldenCommit()
	enc, err := EncodeCommit(want)
	if err != nil {
		t.Fatal(err)
	}
	b := golden(t, "commit.v1.bin", true, enc)
	// Hand-built start: magic, version 1, flags 0, lsn 2, local (3, 5], prev, volume.
	pre := header("ESRC", 1, 0)
	for _, v := range []uint64{2, 3, 5} {
		pre = binary.LittleEndian.AppendUint64(pre, v)
	}
	pre = append(pre, goldenPrev[:]...)
	pre = append(append(pre, byte(len(goldenVolume))), goldenVolume...)
	pre = append(append(pre, 2, 11), "archive.seq"...) // two metadata entries, the first key
	if !bytes.HasPrefix(b, pre) {
		t.Fatalf("commit starts %x, the spec gives %x", b[:len(pre)], pre)
	}
	got, err := DecodeCommit(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	if h := HashOf(b); h.IsZero() {
		t.Fatal("zero hash")
	}

	cp := &Commit{Volume: goldenVolume, LSN: 3, Prev: HashOf(b), LocalFrom: 5, LocalTo: 5, Checkpoint: true,
		Meta:   map[string][]byte{"archive.seq": {0, 0, 0, 0, 0, 0, 0, 3}},
		Inline: []Page{{Index: 1, Data: []byte("inline one")}, {Index: 7, Data: []byte{}}},
		Segments: []SegmentRef{{Key: goldenSegment, Frames: []FrameRef{
			{Offset: 8, Length: 100, RawLength: 8192, CRC: 0xCAFEF00D, Pages: []PageLoc{{Index: 11, Offset: 4096, Length: 4096}}}}}},
	}
	enc, err = EncodeCommit(cp)
	if err != nil {
		t.Fatal(err)
	}
	b = golden(t, "commit-checkpoint.v1.bin", true, enc)
	if !bytes.HasPrefix(b, header("ESRC", 1, 1)) {
		t.Fatalf("checkpoint header %x", b[:8])
	}
	got, err = DecodeCommit(b)
	if err != nil || !reflect.DeepEqual(got, cp) {
		t.Fatalf("checkpoint decoded %+v, %v", got, err)
	}
	// A version this reader does not know is refused.
	v2 := bytes.Clone(b[:len(b)-4])
	v2[4] = 2
	v2 = binary.LittleEndian.AppendUint32(v2, crc(v2))
	if _, err := DecodeCommit(v2); err == nil {
		t.Fatal("version 2 decoded")
	}
}

// segmentPages is what the golden segment holds: 66 pages, so two frames
// (a frame holds at most 64 pages), one page empty.
func segmentPages() []Page {
	var pages []Page
	for i := range 66 {
		pages = append(pages, Page{Index: uint64(3 * i), Data: []byte(strings.Repeat(fmt.Sprintf("page %d;", i), i%5))})
	}
	return pages
}

// TestGoldenSegmentV1 decodes the checked-in segment (pages, frames, one
// ranged frame read) and checks that today's encoder writes the same
// structure.
func TestGoldenSegmentV1(t *testing.T) {
	built, err := BuildSegment(goldenVolume, goldenVolume+"/2/"+goldenPrev.String(), segmentPages())
	if err != nil {
		t.Fatal(err)
	}
	b := golden(t, "segment.v1.bin", false, built.Data)
	if !bytes.HasPrefix(b, header("ESRS", 1, 0)) {
		t.Fatalf("segment header %x", b[:8])
	}
	frames, pages, err := DecodeSegment(b)
	if err != nil {
		t.Fatal(err)
	}
	want := segmentPages()
	if len(pages) != len(want) || len(frames) != 2 || len(frames[0].Pages) != 64 || len(frames[1].Pages) != 2 {
		t.Fatalf("%d pages in %d frames", len(pages), len(frames))
	}
	for i := range want {
		if pages[i].Index != want[i].Index || !bytes.Equal(pages[i].Data, want[i].Data) {
			t.Fatalf("page %d = %d %q, want %d %q", i, pages[i].Index, pages[i].Data, want[i].Index, want[i].Data)
		}
	}
	// A page fault: one frame, by its reference alone.
	f := frames[1]
	ps, err := DecodeFrame(f, b[f.Offset:f.Offset+f.Length])
	if err != nil || len(ps) != 2 || ps[0].Index != 192 || ps[1].Index != 195 || string(ps[0].Data) != strings.Repeat("page 64;", 4) || len(ps[1].Data) != 0 {
		t.Fatalf("frame 1: %+v, %v", ps, err)
	}
	// Today's encoder: the same header, frame boundaries and page places.
	nf, np, err := DecodeSegment(built.Data)
	if err != nil || !reflect.DeepEqual(np, pages) || len(nf) != len(frames) {
		t.Fatalf("re-encoded segment: %d frames, %v", len(nf), err)
	}
	for i := range nf {
		if nf[i].RawLength != frames[i].RawLength || !reflect.DeepEqual(nf[i].Pages, frames[i].Pages) {
			t.Fatalf("frame %d re-encoded as %+v, golden %+v", i, nf[i], frames[i])
		}
	}
	if !bytes.Equal(built.Data, b) {
		t.Logf("note: the zstd bytes of today's encoder differ from the golden segment (a zstd library change); the format is unchanged")
	}
}

// TestGoldenMarkerAndTombstoneV1: a checkpoint marker and a tombstone, both
// byte for byte from the spec.
func TestGoldenMarkerAndTombstoneV1(t *testing.T) {
	h := Hash{0xAB, 31: 0xCD}
	m := golden(t, "checkpoint-marker.v1.bin", true, encodeMarker(checkpointMarker{Volume: goldenVolume, LSN: 3, Hash: h}))
	want := binary.LittleEndian.AppendUint64(header("ESRK", 1, 0), 3)
	want = append(want, h[:]...)
	want = append(append(want, byte(len(goldenVolume))), goldenVolume...)
	want = binary.LittleEndian.AppendUint32(want, crc(want))
	if !bytes.Equal(m, want) {
		t.Fatalf("marker %x, the spec gives %x", m, want)
	}
	v, lsn, gh, err := DecodeCheckpointMarker(m)
	if err != nil || v != goldenVolume || lsn != 3 || gh != h {
		t.Fatalf("marker: %s %d %v %v", v, lsn, gh, err)
	}

	ts := golden(t, "tombstone.v1.bin", true, encodeTombstone(goldenVolume, 1))
	want = binary.LittleEndian.AppendUint64(header("ESRT", 1, 0), 1)
	want = append(append(want, byte(len(goldenVolume))), goldenVolume...)
	want = binary.LittleEndian.AppendUint32(want, crc(want))
	if !bytes.Equal(ts, want) || len(ts) != 21+len(goldenVolume) {
		t.Fatalf("tombstone %x, the spec gives %x", ts, want)
	}
	v, lsn, err = DecodeTombstone(ts)
	if err != nil || v != goldenVolume || lsn != 1 || !isTombstone(ts) {
		t.Fatalf("tombstone: %s %d %v", v, lsn, err)
	}
}

// TestGoldenKeysV1: the key layout (no version of its own: a change is a new
// remote format).
func TestGoldenKeysV1(t *testing.T) {
	h := Hash{0xAB, 31: 0xCD}
	keys := []struct{ got, want string }{
		{LogKey(goldenVolume, 1), "volumes/archive.q.s/log/fffffffffffffffe"},
		{LogKey(goldenVolume, 2), "volumes/archive.q.s/log/fffffffffffffffd"},
		{LogKey(goldenVolume, MaxLSN), "volumes/archive.q.s/log/0000000000000001"},
		{CheckpointKey(goldenVolume, 3, h), "volumes/archive.q.s/checkpoints/fffffffffffffffc-ab000000000000000000000000000000000000000000000000000000000000cd"},
		{goldenSegment, "segments/archive.q.s/00112233445566778899aabbccddeeff"},
	}
	var enc strings.Builder
	enc.WriteString("# remote object keys, layout 1 (docs/REMOTE.md, \"Key layout\")\n")
	for _, k := range keys {
		enc.WriteString(k.got + "\n")
	}
	file := golden(t, "keys.v1.txt", true, []byte(enc.String()))
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")[1:]
	for i, k := range keys {
		if lines[i] != k.want {
			t.Fatalf("key %d = %s, the spec gives %s", i, lines[i], k.want)
		}
		if err := CheckKey(lines[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i, lsn := range []uint64{1, 2, MaxLSN} {
		if got, err := ParseLogKey(goldenVolume, lines[i]); err != nil || got != lsn {
			t.Fatalf("ParseLogKey(%s) = %d, %v", lines[i], got, err)
		}
	}
	if lsn, gh, err := ParseCheckpointKey(goldenVolume, lines[3]); err != nil || lsn != 3 || gh != h {
		t.Fatalf("ParseCheckpointKey: %d %v %v", lsn, gh, err)
	}
	if !checkSegmentKey(goldenVolume, lines[4]) {
		t.Fatal("segment key refused")
	}
}
