package accept

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/durable"
	goldenfile "github.com/echostore/echostore/internal/golden"
)

// Golden files of the outbox's files and the accept volume's job page
// (docs/ACCEPT.md, "File formats"; docs/FORMAT.md, "Upgrades"). `go test
// ./accept -run Golden -update` rewrites the files of the current version
// (segments and snapshots of version 2, job pages) from the encoders; the
// files of version 1 are written only when missing (internal/golden).

// golden returns the checked-in bytes of name, which must be what today's
// encoder writes (golden.Bytes).
func golden(t *testing.T, name string, enc []byte) []byte {
	t.Helper()
	return goldenfile.Bytes(t, name, true, enc)
}

// goldenOld returns the checked-in bytes of name, a file of an older
// version, which enc (an encoder of that version) writes only if missing.
func goldenOld(t *testing.T, name string, enc []byte) []byte {
	t.Helper()
	return goldenfile.Bytes(t, name, false, enc)
}

// The outbox the golden files hold: three jobs accepted, the first
// committed; blocks 1 (three records), 2 (empty) and 3 (one record); a
// snapshot as of block 2.
var (
	gid1 = brand.ID(1<<22 | 1)
	gid2 = brand.ID(1<<22 | 2)
	gid3 = brand.ID(2 << 22)
)

func goldenBlocks() [][]rec {
	return [][]rec{
		{{kind: kindAccepted, id: gid1, queue: qn("emails"), payload: []byte(`{"to":"a"}`)},
			{kind: kindAccepted, id: gid2, queue: qn("emails"), payload: []byte{}},
			{kind: kindCommitted, id: gid1}},
		{},
		{{kind: kindAccepted, id: gid3, queue: qn("sms.eu-1"), payload: []byte("hi")}},
	}
}

// goldenSegment returns the segment of blocks under a header of version
// ver.
func goldenSegment(ver uint16, blocks [][]rec) []byte {
	b := appendSegHeaderVersion(nil, ver, 1)
	for i, recs := range blocks {
		b = appendBlock(b, uint64(i+1), recs)
	}
	return b
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func crcLE(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// TestGoldenLogSegmentV1: the log segment of version 1, its header and
// blocks checked against hand-built bytes and decoded record by record.
// Today's encoder writes version 2; its blocks under a version-1 header
// give the same bytes.
func TestGoldenLogSegmentV1(t *testing.T) {
	b := goldenOld(t, "dir.v1/log-0000000000000001.log", goldenSegment(1, goldenBlocks()))
	if !bytes.Equal(b, goldenSegment(1, goldenBlocks())) {
		t.Fatalf("the version-1 segment %x differs from today's blocks under a version-1 header", b)
	}
	checkSegment(t, b, 1, goldenBlocks())
}

// checkSegment checks the golden segment b of version ver against
// hand-built bytes (its header and block 1) and decodes it record by
// record. Block 1 accepts gid1, accepts gid2 (in version 2 with
// goldenRunAt: kind 3, id, run-at, queue, payload) and commits gid1.
func checkSegment(t *testing.T, b []byte, ver uint16, blocks [][]rec) {
	t.Helper()
	hdr := crcLE(append(append([]byte("ECHOACLG"), byte(ver), 0, 0, 0), le64(1)...))
	if !bytes.Equal(b[:segHeaderLen], hdr) {
		t.Fatalf("segment header %x, the spec gives %x", b[:segHeaderLen], hdr)
	}
	if first, v, err := decodeSegHeader(b); err != nil || first != 1 || v != ver {
		t.Fatalf("segment header: first %d, version %d, %v", first, v, err)
	}
	body := append(le64(1), le32(3)...)
	body = append(append(append(body, 1), le64(uint64(gid1))...), 6)
	body = append(append(append(body, "emails"...), le32(10)...), `{"to":"a"}`...)
	if ver == 1 {
		body = append(append(body, 1), le64(uint64(gid2))...)
	} else {
		body = append(append(append(body, 3), le64(uint64(gid2))...), le64(uint64(goldenRunAt))...)
	}
	body = append(append(append(body, 6), "emails"...), le32(0)...)
	body = append(append(body, 2), le64(uint64(gid1))...)
	checkBlocks(t, b, ver, frameBody(body), blocks)
}

// frameBody returns a block body framed by hand: length, CRC of
// (length ‖ body), body.
func frameBody(body []byte) []byte {
	l := le32(uint32(len(body)))
	return append(append(l, le32(crc32.Update(crc32.Checksum(l, durable.Castagnoli), durable.Castagnoli, body))...), body...)
}

// checkBlocks checks that the segment seg of version ver starts with the
// hand-built block1 after its header and holds exactly the blocks want.
func checkBlocks(t *testing.T, seg []byte, ver uint16, block1 []byte, want [][]rec) {
	t.Helper()
	rest := seg[segHeaderLen:]
	if !bytes.HasPrefix(rest, block1) {
		t.Fatalf("block 1 %x, the spec gives %x", rest[:min(len(rest), len(block1))], block1)
	}
	for i, want := range want {
		seq, recs, n, err := decodeBlockInto(rest, nil, ver)
		if err != nil || seq != uint64(i+1) || len(recs) != len(want) {
			t.Fatalf("block %d: seq %d, %d records, %v", i+1, seq, len(recs), err)
		}
		for k := range want {
			g, w := recs[k], want[k]
			if g.kind != w.kind || g.id != w.id || g.queue != w.queue || !bytes.Equal(g.payload, w.payload) || g.runAt != w.runAt {
				t.Fatalf("block %d record %d = %+v, want %+v", i+1, k, g, w)
			}
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the last block", len(rest))
	}
}

func goldenIntents() []Intent {
	return []Intent{{ID: gid2, Queue: qn("emails"), Payload: []byte{}}}
}

// TestGoldenSnapshotV1: the snapshot of version 1 as of block 2, byte for
// byte from the spec, and decoded; the version-1 encoder writes the same
// bytes.
func TestGoldenSnapshotV1(t *testing.T) {
	b := goldenOld(t, "dir.v1/snap-0000000000000002.snap", encodeSnapshotVersion(1, 2, goldenIntents()))
	want := append(append([]byte("ECHOACSN"), 1, 0, 0, 0), le64(2)...)
	want = append(want, le64(1)...)
	want = append(append(append(want, 1), le64(uint64(gid2))...), 6)
	want = append(append(want, "emails"...), le32(0)...)
	if !bytes.Equal(b, encodeSnapshotVersion(1, 2, goldenIntents())) {
		t.Fatal("the version-1 encoder writes other bytes")
	}
	checkSnapshot(t, b, crcLE(want), goldenIntents())
}

// checkSnapshot checks the snapshot b as of block 2 against the hand-built
// bytes want, and its decoded intents.
func checkSnapshot(t *testing.T, b, want []byte, intents []Intent) {
	t.Helper()
	if !bytes.Equal(b, want) {
		t.Fatalf("snapshot %x, the spec gives %x", b, want)
	}
	seq, got, err := decodeSnapshot(b)
	if err != nil || seq != 2 || !reflect.DeepEqual(got, intents) {
		t.Fatalf("snapshot: %d %+v %v, want %+v", seq, got, err, intents)
	}
}

// recoverGolden opens a copy of the golden directory name and returns the
// copy, the Outbox, and its pending intents.
func recoverGolden(t *testing.T, name string) (string, *Outbox, []Intent) {
	t.Helper()
	dir := goldenfile.CopyDir(t, goldenfile.Path(name))
	o, err := Open(t.Context(), dir, Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return dir, o, pending(t, o)
}

// TestGoldenOutboxDirV1 recovers an outbox from a copy of the golden
// directory through the public API: the snapshot is the base, block 3 is
// replayed on it.
func TestGoldenOutboxDirV1(t *testing.T) {
	ctx := t.Context()
	dir, o, got := recoverGolden(t, "dir.v1")
	want := []Intent{{ID: gid2, Queue: qn("emails"), Payload: []byte{}}, {ID: gid3, Queue: qn("sms.eu-1"), Payload: []byte("hi")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered %+v; want %+v", got, want)
	}
	// Blocks are never appended to the version-1 segment: the next one goes
	// to a new segment of version 2, and the old one is left as it was.
	if err := o.Record(ctx, Intent{ID: gid4, Queue: qn("sms.eu-1"), Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(filepath.Join(dir, segName(1)))
	if !bytes.Equal(old, goldenOld(t, "dir.v1/log-0000000000000001.log", nil)) {
		t.Fatal("the version-1 segment changed")
	}
	seg, err := os.ReadFile(filepath.Join(dir, segName(4)))
	if err != nil {
		t.Fatal(err)
	}
	if first, ver, err := decodeSegHeader(seg); err != nil || first != 4 || ver != version {
		t.Fatalf("the new segment: first %d, version %d, %v", first, ver, err)
	}
	o, err = Open(ctx, dir, Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(pending(t, o)); len(got) != 3 || got[2] != uint64(gid4) {
		t.Fatalf("reopened: %v, want %d %d %d", got, gid2, gid3, gid4)
	}
	closeOK(t, o)
}

// The outbox the golden files of version 2 hold: as version 1's, with
// record kind 3 (a run-at) for gid2 and gid4; block 3 accepts gid3 due at
// once and gid4 with a run-at.
const goldenRunAt = int64(1796083200000) // 2026-11-30T00:00:00Z

var gid4 = brand.ID(2<<22 | 1)

func goldenBlocksV2() [][]rec {
	return [][]rec{
		{{kind: kindAccepted, id: gid1, queue: qn("emails"), payload: []byte(`{"to":"a"}`)},
			{kind: kindDelayed, id: gid2, queue: qn("emails"), payload: []byte{}, runAt: goldenRunAt},
			{kind: kindCommitted, id: gid1}},
		{},
		{{kind: kindAccepted, id: gid3, queue: qn("sms.eu-1"), payload: []byte("hi")},
			{kind: kindDelayed, id: gid4, queue: qn("sms.eu-1"), payload: []byte("later"), runAt: goldenRunAt}},
	}
}

// TestGoldenLogSegmentV2: the log segment of today's version, written by
// today's encoder, its header and first block checked against hand-built
// bytes and decoded record by record.
func TestGoldenLogSegmentV2(t *testing.T) {
	enc := appendSegHeader(nil, 1)
	for i, recs := range goldenBlocksV2() {
		enc = appendBlock(enc, uint64(i+1), recs)
	}
	checkSegment(t, golden(t, "dir.v2/log-0000000000000001.log", enc), 2, goldenBlocksV2())
}

func goldenIntentsV2() []Intent {
	return []Intent{{ID: gid2, Queue: qn("emails"), Payload: []byte{}, RunAt: goldenRunAt}}
}

// TestGoldenSnapshotV2: the snapshot of today's version as of block 2,
// byte for byte from the spec, and decoded.
func TestGoldenSnapshotV2(t *testing.T) {
	b := golden(t, "dir.v2/snap-0000000000000002.snap", encodeSnapshot(2, goldenIntentsV2()))
	want := append(append([]byte("ECHOACSN"), 2, 0, 0, 0), le64(2)...)
	want = append(want, le64(1)...)
	want = append(append(append(append(want, 3), le64(uint64(gid2))...), le64(uint64(goldenRunAt))...), 6)
	want = append(append(want, "emails"...), le32(0)...)
	checkSnapshot(t, b, crcLE(want), goldenIntentsV2())
}

// TestGoldenOutboxDirV2 recovers an outbox from a copy of the golden
// directory of version 2: the snapshot is the base, block 3 is replayed on
// it, and the run-ats come back; the next block is appended to the
// segment.
func TestGoldenOutboxDirV2(t *testing.T) {
	dir, o, got := recoverGolden(t, "dir.v2")
	want := []Intent{
		{ID: gid2, Queue: qn("emails"), Payload: []byte{}, RunAt: goldenRunAt},
		{ID: gid3, Queue: qn("sms.eu-1"), Payload: []byte("hi")},
		{ID: gid4, Queue: qn("sms.eu-1"), Payload: []byte("later"), RunAt: goldenRunAt},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered %+v; want %+v", got, want)
	}
	if err := o.Record(t.Context(), Intent{ID: gid4 + 1, Queue: qn("q")}); err != nil {
		t.Fatal(err)
	}
	closeOK(t, o)
	if _, err := os.Stat(filepath.Join(dir, segName(4))); !os.IsNotExist(err) {
		t.Fatalf("a new segment beside a segment of today's version: %v", err)
	}
}

// TestGoldenJobPageV1: a page of the accept volume.
func TestGoldenJobPageV1(t *testing.T) {
	b := golden(t, "job-page.v1.bin", EncodeJobPage(gid3, []byte(`{"task":"x"}`)))
	want := crcLE(append(append(append([]byte{1}, le64(uint64(gid3))...), le32(12)...), `{"task":"x"}`...))
	if !bytes.Equal(b, want) {
		t.Fatalf("job page %x, the spec gives %x", b, want)
	}
	id, payload, err := DecodeJobPage(b)
	if err != nil || id != gid3 || !reflect.DeepEqual(payload, []byte(`{"task":"x"}`)) {
		t.Fatalf("job page: %d %q %v", id, payload, err)
	}
}

// TestGoldenJobPageV2: a job with a run-at is job page version 2 on the
// accept volume; version-1 pages still decode.
func TestGoldenJobPageV2(t *testing.T) {
	page := golden(t, "job-page-delayed.v2.bin", EncodeJob(Job{ID: gid3, Payload: []byte("later"), RunAt: goldenRunAt}))
	want := crcLE(append(append(append(append([]byte{2}, le64(uint64(gid3))...), le64(uint64(goldenRunAt))...), le32(5)...), "later"...))
	if !bytes.Equal(page, want) {
		t.Fatalf("job page version 2 %x, the spec gives %x", page, want)
	}
	j, err := DecodeJob(page)
	if err != nil || j.ID != gid3 || j.RunAt != goldenRunAt || string(j.Payload) != "later" {
		t.Fatalf("job page version 2: %+v, %v", j, err)
	}
	// Version 1 pages still read, with no run-at.
	if j, err := DecodeJob(EncodeJobPage(gid3, []byte("now"))); err != nil || j.RunAt != 0 || string(j.Payload) != "now" {
		t.Fatalf("job page version 1: %+v, %v", j, err)
	}
}

// TestGoldenKind3InV1Refused: record kind 3 in a file of version 1 (the
// bytes a build wrote before version 2 existed: log-delayed.v1.bin,
// snap-delayed.v1.bin) is corruption. The block is refused, not taken for
// a torn tail, and the segment is left as it was; the snapshot does not
// decode.
func TestGoldenKind3InV1Refused(t *testing.T) {
	in := Intent{ID: gid3, Queue: qn("sms.eu-1"), Payload: []byte("later"), RunAt: goldenRunAt}
	seg := goldenOld(t, "log-delayed.v1.bin", appendBlock(appendSegHeaderVersion(nil, 1, 1), 1, []rec{acceptedRec(in)}))
	if _, ver, err := decodeSegHeader(seg); err != nil || ver != 1 {
		t.Fatalf("segment header: version %d, %v", ver, err)
	}
	// The record by hand: kind 3, id, run-at, queue, payload.
	r := append(append([]byte{3}, le64(uint64(gid3))...), le64(uint64(goldenRunAt))...)
	r = append(append(append(r, 8), "sms.eu-1"...), le32(5)...)
	r = append(r, "later"...)
	if !bytes.HasSuffix(seg, r) {
		t.Fatalf("delayed record: the segment ends %x, the spec gives %x", seg[len(seg)-len(r):], r)
	}
	if _, _, _, err := decodeBlockInto(seg[segHeaderLen:], nil, 1); !errors.Is(err, errBlockBody) {
		t.Fatalf("kind 3 in a block of a version-1 segment: %v, want errBlockBody", err)
	}
	if _, _, _, err := decodeBlockInto(seg[segHeaderLen:], nil, 2); err != nil {
		t.Fatalf("the same block in a version-2 segment: %v", err)
	}
	if after, err := openSegment(t, seg); !errors.Is(err, ErrCorrupt) || !bytes.Equal(after, seg) {
		t.Fatalf("Open: %v; the segment went from %d to %d bytes", err, len(seg), len(after))
	}

	snap := goldenOld(t, "snap-delayed.v1.bin", encodeSnapshotVersion(1, 1, []Intent{in}))
	if _, _, err := decodeSnapshot(snap); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("kind 3 in a version-1 snapshot: %v, want ErrCorrupt", err)
	}
	// Only the version differs from today's snapshot.
	v2 := encodeSnapshot(1, []Intent{in})
	if !bytes.Equal(snap[10:len(snap)-4], v2[10:len(v2)-4]) {
		t.Fatal("the version-1 snapshot differs from today's beyond its version")
	}
}

// TestGoldenNewerVersionRefused: a segment or snapshot of version 3 is
// refused with ErrVersion, and recovery leaves it as it was (a snapshot is
// not set aside as corrupt).
func TestGoldenNewerVersionRefused(t *testing.T) {
	seg := appendBlock(appendSegHeaderVersion(nil, 3, 1), 1, nil)
	if _, _, err := decodeSegHeader(seg); !errors.Is(err, ErrVersion) {
		t.Fatalf("segment of version 3: %v, want ErrVersion", err)
	}
	snap := encodeSnapshotVersion(3, 1, goldenIntentsV2())
	if _, _, err := decodeSnapshot(snap); !errors.Is(err, ErrVersion) {
		t.Fatalf("snapshot of version 3: %v, want ErrVersion", err)
	}
	for _, files := range []map[string][]byte{
		{segName(1): seg},
		{segName(1): appendSegHeader(nil, 1), snapName(1): snap},
	} {
		dir := t.TempDir()
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		o, err := Open(t.Context(), dir, Options{FlushInterval: -1})
		if err == nil {
			o.Close(t.Context())
		}
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("Open: %v, want ErrVersion", err)
		}
		for name, b := range files {
			if after, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(after, b) {
				t.Fatalf("%s changed (%d bytes to %d)", name, len(b), len(after))
			}
		}
	}
}

// TestGoldenNewerRecordKindNotTruncated: a log written by a newer version
// (here: a record kind this reader does not know, in a block whose length
// and checksum are intact) is refused, and the file is left as it was. A
// crash tears only an incomplete write; a complete, checksummed block that
// does not decode is another format, and dropping it as a torn tail would
// delete durable records — the way an older binary would treat kind 3.
func TestGoldenNewerRecordKindNotTruncated(t *testing.T) {
	seg := appendBlock(appendSegHeader(nil, 1), 1, []rec{{kind: kindAccepted, id: gid1, queue: qn("q"), payload: []byte("a")}})
	// Block 2 holds one record of kind 9, framed and checksummed.
	seg = append(seg, frameBody(append(append(le64(2), le32(1)...), append([]byte{9}, le64(uint64(gid2))...)...))...)
	if after, err := openSegment(t, seg); !errors.Is(err, ErrCorrupt) || !bytes.Equal(after, seg) {
		t.Fatalf("Open: %v; the segment went from %d to %d bytes: a complete block of an unknown kind was dropped as a torn tail", err, len(seg), len(after))
	}
}

// openSegment opens an outbox whose directory holds seg as its only
// segment, and returns Open's error and the segment's bytes after it.
func openSegment(t *testing.T, seg []byte) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, segName(1))
	if err := os.WriteFile(path, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := Open(t.Context(), dir, Options{FlushInterval: -1})
	if err == nil {
		o.Close(t.Context())
	}
	after, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return after, err
}
