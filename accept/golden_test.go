package accept

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/echostore/echostore/brand"
	goldenfile "github.com/echostore/echostore/internal/golden"
)

// Golden files of the outbox's files and the accept volume's job page
// (docs/ACCEPT.md, "File formats"; docs/FORMAT.md, "Upgrades"). `go test
// ./accept -run Golden -update` rewrites the files of the current version
// from the encoders (internal/golden).

// golden returns the checked-in bytes of name, which must be what today's
// encoder writes (golden.Bytes).
func golden(t *testing.T, name string, enc []byte) []byte {
	t.Helper()
	return goldenfile.Bytes(t, name, true, enc)
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
		{{kind: kindAccepted, id: gid1, queue: "emails", payload: []byte(`{"to":"a"}`)},
			{kind: kindAccepted, id: gid2, queue: "emails", payload: []byte{}},
			{kind: kindCommitted, id: gid1}},
		{},
		{{kind: kindAccepted, id: gid3, queue: "sms.eu-1", payload: []byte("hi")}},
	}
}

func goldenSegment() []byte {
	b := appendSegHeader(nil, 1)
	for i, recs := range goldenBlocks() {
		b = appendBlock(b, uint64(i+1), recs)
	}
	return b
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func crcLE(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// TestGoldenLogSegmentV1: the log segment, its header and blocks checked
// against hand-built bytes and decoded record by record.
func TestGoldenLogSegmentV1(t *testing.T) {
	b := golden(t, "dir.v1/log-0000000000000001.log", goldenSegment())
	hdr := crcLE(append(append([]byte("ECHOACLG"), 1, 0, 0, 0), le64(1)...))
	if !bytes.Equal(b[:segHeaderLen], hdr) {
		t.Fatalf("segment header %x, the spec gives %x", b[:segHeaderLen], hdr)
	}
	if first, err := decodeSegHeader(b); err != nil || first != 1 {
		t.Fatalf("segment header: %d, %v", first, err)
	}
	// Block 1 by hand: length, CRC of (length ‖ body), body.
	body := append(le64(1), le32(3)...)
	body = append(append(append(body, 1), le64(uint64(gid1))...), 6)
	body = append(append(append(body, "emails"...), le32(10)...), `{"to":"a"}`...)
	body = append(append(append(body, 1), le64(uint64(gid2))...), 6)
	body = append(append(body, "emails"...), le32(0)...)
	body = append(append(body, 2), le64(uint64(gid1))...)
	block1 := append(le32(uint32(len(body))), le32(crc32.Update(crc32.Checksum(le32(uint32(len(body))), castagnoli), castagnoli, body))...)
	block1 = append(block1, body...)
	rest := b[segHeaderLen:]
	if !bytes.HasPrefix(rest, block1) {
		t.Fatalf("block 1 %x, the spec gives %x", rest[:len(block1)], block1)
	}
	for i, want := range goldenBlocks() {
		seq, recs, n, err := decodeBlock(rest)
		if err != nil || seq != uint64(i+1) || len(recs) != len(want) {
			t.Fatalf("block %d: seq %d, %d records, %v", i+1, seq, len(recs), err)
		}
		for k := range want {
			g, w := recs[k], want[k]
			if g.kind != w.kind || g.id != w.id || g.queue != w.queue || !bytes.Equal(g.payload, w.payload) {
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
	return []Intent{{ID: gid2, Queue: "emails", Payload: []byte{}}}
}

// TestGoldenSnapshotV1: the snapshot as of block 2, byte for byte from the
// spec, and decoded.
func TestGoldenSnapshotV1(t *testing.T) {
	b := golden(t, "dir.v1/snap-0000000000000002.snap", encodeSnapshot(2, goldenIntents()))
	want := append(append([]byte("ECHOACSN"), 1, 0, 0, 0), le64(2)...)
	want = append(want, le64(1)...)
	want = append(append(append(want, 1), le64(uint64(gid2))...), 6)
	want = append(append(want, "emails"...), le32(0)...)
	want = crcLE(want)
	if !bytes.Equal(b, want) {
		t.Fatalf("snapshot %x, the spec gives %x", b, want)
	}
	seq, intents, err := decodeSnapshot(b)
	if err != nil || seq != 2 || len(intents) != 1 || intents[0].ID != gid2 || intents[0].Queue != "emails" || len(intents[0].Payload) != 0 {
		t.Fatalf("snapshot: %d %+v %v", seq, intents, err)
	}
}

// TestGoldenOutboxDirV1 recovers an outbox from a copy of the golden
// directory through the public API: the snapshot is the base, block 3 is
// replayed on it.
func TestGoldenOutboxDirV1(t *testing.T) {
	dir := goldenfile.CopyDir(t, goldenfile.Path("dir.v1"))
	ctx := t.Context()
	o, err := Open(ctx, dir, Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.Pending(ctx)
	want := []Intent{{ID: gid2, Queue: "emails", Payload: []byte{}}, {ID: gid3, Queue: "sms.eu-1", Payload: []byte("hi")}}
	if err != nil || len(got) != 2 || got[0].ID != want[0].ID || got[1].ID != want[1].ID || got[1].Queue != want[1].Queue ||
		!bytes.Equal(got[0].Payload, want[0].Payload) || !bytes.Equal(got[1].Payload, want[1].Payload) {
		t.Fatalf("recovered %+v, %v; want %+v", got, err, want)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
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

// TestGoldenDelayedV1: a job with a run-at travels as outbox record kind 3
// (in log blocks and snapshots, format version 1) and as job page version 2
// on the accept volume.
func TestGoldenDelayedV1(t *testing.T) {
	const runAt = int64(1796083200000) // 2026-11-30T00:00:00Z
	in := Intent{ID: gid3, Queue: "sms.eu-1", Payload: []byte("later"), RunAt: runAt}
	seg := golden(t, "log-delayed.v1.bin", appendBlock(appendSegHeader(nil, 1), 1, []rec{acceptedRec(in)}))
	// The record by hand: kind 3, id, run-at, queue, payload.
	r := append(append([]byte{3}, le64(uint64(gid3))...), le64(uint64(runAt))...)
	r = append(append(append(r, 8), "sms.eu-1"...), le32(5)...)
	r = append(r, "later"...)
	if !bytes.HasSuffix(seg, r) {
		t.Fatalf("delayed record: the segment ends %x, the spec gives %x", seg[len(seg)-len(r):], r)
	}
	_, recs, _, err := decodeBlock(seg[segHeaderLen:])
	if err != nil || len(recs) != 1 || recs[0].kind != kindDelayed || !reflect.DeepEqual(recs[0].intent(), in) {
		t.Fatalf("delayed block: %+v, %v", recs, err)
	}
	snap := golden(t, "snap-delayed.v1.bin", encodeSnapshot(1, []Intent{in}))
	if _, intents, err := decodeSnapshot(snap); err != nil || len(intents) != 1 || !reflect.DeepEqual(intents[0], in) {
		t.Fatalf("delayed snapshot: %+v, %v", intents, err)
	}
	page := golden(t, "job-page-delayed.v2.bin", EncodeJob(Job{ID: gid3, Payload: []byte("later"), RunAt: runAt}))
	want := crcLE(append(append(append(append([]byte{2}, le64(uint64(gid3))...), le64(uint64(runAt))...), le32(5)...), "later"...))
	if !bytes.Equal(page, want) {
		t.Fatalf("job page version 2 %x, the spec gives %x", page, want)
	}
	j, err := DecodeJob(page)
	if err != nil || j.ID != gid3 || j.RunAt != runAt || string(j.Payload) != "later" {
		t.Fatalf("job page version 2: %+v, %v", j, err)
	}
	// Version 1 pages still read, with no run-at.
	if j, err := DecodeJob(EncodeJobPage(gid3, []byte("now"))); err != nil || j.RunAt != 0 || string(j.Payload) != "now" {
		t.Fatalf("job page version 1: %+v, %v", j, err)
	}
}

// TestGoldenNewerRecordKindNotTruncated: a log written by a newer version
// (here: a record kind this reader does not know, in a block whose length
// and checksum are intact) is refused, and the file is left as it was. A
// crash tears only an incomplete write; a complete, checksummed block that
// does not decode is another format, and dropping it as a torn tail would
// delete durable records — the way an older binary would treat kind 3.
func TestGoldenNewerRecordKindNotTruncated(t *testing.T) {
	dir := t.TempDir()
	seg := appendBlock(appendSegHeader(nil, 1), 1, []rec{{kind: kindAccepted, id: gid1, queue: "q", payload: []byte("a")}})
	// Block 2 holds one record of kind 9, framed and checksummed.
	body := append(append(le64(2), le32(1)...), append([]byte{9}, le64(uint64(gid2))...)...)
	frame := append(le32(uint32(len(body))), le32(crc32.Update(crc32.Checksum(le32(uint32(len(body))), castagnoli), castagnoli, body))...)
	seg = append(seg, append(frame, body...)...)
	path := filepath.Join(dir, "log-0000000000000001.log")
	if err := os.WriteFile(path, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := Open(t.Context(), dir, Options{FlushInterval: -1})
	if err == nil {
		o.Close(t.Context())
	}
	after, _ := os.ReadFile(path)
	if err == nil || !bytes.Equal(after, seg) {
		t.Fatalf("Open: %v; the segment went from %d to %d bytes: a complete block of an unknown kind was dropped as a torn tail", err, len(seg), len(after))
	}
}
