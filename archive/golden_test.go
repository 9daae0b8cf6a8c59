package archive

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	goldenfile "github.com/echostore/echostore/internal/golden"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// Golden files of the archive's record page and of a whole archive volume
// (docs/ARCHIVE.md; docs/FORMAT.md, "Upgrades"). `go test ./archive -run
// Golden -update` rewrites the record pages (the current version) from the
// encoder; the data dirs are written once, if missing, and never rewritten
// (internal/golden).

// goldenFile returns the checked-in bytes of name, which must be what
// today's encoder writes.
func goldenFile(t *testing.T, name string, enc []byte) []byte {
	t.Helper()
	return goldenfile.Bytes(t, name, true, enc)
}

// goldenRecords are the records of the golden pages and volume: fields in
// stored order (not sorted), an empty value, multi-byte UTF-8.
func goldenRecords() []mq.Record {
	return []mq.Record{
		{ID: brand.ID(1).XID(), Fields: []mq.Field{{Name: "k", Value: "v"}}},
		{ID: brand.ID(1<<22 | 5).XID(), Fields: []mq.Field{{Name: "z", Value: "last"}, {Name: "a", Value: ""}, {Name: "émoji", Value: "🙂 ok"}}},
		{ID: brand.ID(2 << 22).XID(), Fields: []mq.Field{{Name: "n", Value: strings.Repeat("x", 300)}}},
	}
}

// TestGoldenRecordPageV1: the example of docs/ARCHIVE.md byte for byte,
// and a page with several fields.
func TestGoldenRecordPageV1(t *testing.T) {
	recs := goldenRecords()
	b := goldenFile(t, "record-page.v1.bin", AppendRecordPage(nil, recs[0]))
	// docs/ARCHIVE.md, "Record page, version 1": record EVT_0000000000001, k = v, 31 bytes.
	want, _ := hex.DecodeString("4541524301" + "0000000000000001" + "00000001" + "000000016b" + "0000000176" + "d21cfa8a")
	if !bytes.Equal(b, want) {
		t.Fatalf("record page %x, docs/ARCHIVE.md gives %x", b, want)
	}
	for i, name := range []string{"record-page.v1.bin", "record-page-fields.v1.bin"} {
		b := goldenFile(t, name, AppendRecordPage(nil, recs[i]))
		got, err := DecodeRecordPage(b)
		if err != nil || !reflect.DeepEqual(got, recs[i]) {
			t.Fatalf("%s decodes to %+v, %v; want %+v", name, got, err, recs[i])
		}
	}
	if got := brand.EVT.Format(brandOf(t, recs[1].ID)); got != "EVT_0000000040005" {
		t.Fatalf("id %s", got)
	}
}

// TestGoldenArchiveVolumeV1 reads an archive volume written by this
// version (two folds: pages, archive.seq and archive.w) from a copy of the
// checked-in graft data dir: the frontier, and the records in both
// directions, as the merge-read's archive part sees them.
func TestGoldenArchiveVolumeV1(t *testing.T) {
	ctx := t.Context()
	src := goldenfile.Path("datadir.v1")
	recs := goldenRecords()
	vol := goldenVolume(t, src, func(vol *graft.Volume) {
		for _, slice := range [][]mq.Record{recs[:2], recs[2:]} {
			if _, err := Fold(ctx, vol, slice); err != nil {
				t.Fatal(err)
			}
		}
	})
	st, err := Frontier(ctx, vol)
	if err != nil || st.Pages != 3 || st.W != recs[2].ID || st.LSN != 2 {
		t.Fatalf("frontier %+v, %v; want 3 pages, W %d, LSN 2", st, err, recs[2].ID)
	}
	checkReads(t, vol, recs)
	if got := readRange(t, vol, 2, 2<<22-1, false); len(got) != 1 || got[0].ID != recs[1].ID {
		t.Fatalf("range read: %+v", got)
	}
}

// TestGoldenRetainedVolumeV1 reads an archive volume whose two oldest
// records a retention horizon dropped (graft's archive.low = 2), written by
// the version that introduced the horizon: the frontier keeps W and the
// page count, and reads start at the floor.
func TestGoldenRetainedVolumeV1(t *testing.T) {
	ctx := t.Context()
	src := goldenfile.Path("datadir-retained.v1")
	recs := goldenRecords()
	vol := goldenVolume(t, src, func(vol *graft.Volume) {
		if _, err := Fold(ctx, vol, recs); err != nil {
			t.Fatal(err)
		}
		if _, n, err := Retain(ctx, vol, Retention{Count: 1}, time.Now()); err != nil || n != 2 {
			t.Fatalf("retain: %d, %v", n, err)
		}
	})
	st, err := Frontier(ctx, vol)
	if err != nil || st.Pages != 3 || st.Low != 2 || st.W != recs[2].ID || st.LSN != 2 {
		t.Fatalf("frontier %+v, %v; want 3 pages, low 2, W %d, LSN 2", st, err, recs[2].ID)
	}
	checkReads(t, vol, recs[2:])
	// The LSN before the drop still reads every page.
	snap, err := vol.SnapshotAt(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for n := range uint64(3) {
		b, err := snap.Get(ctx, graft.ArchiveBase+n)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := DecodeRecordPage(b); err != nil || !reflect.DeepEqual(r, recs[n]) {
			t.Fatalf("page %d at LSN 1: %+v, %v", n, r, err)
		}
	}
}

// readRange reads [from, to] of the archive in vol.
func readRange(t *testing.T, vol *graft.Volume, from, to brand.ID, reverse bool) []mq.Record {
	t.Helper()
	var got []mq.Record
	for r, err := range Read(t.Context(), vol, bx(from), bx(to), reverse) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	return got
}

// checkReads reads the whole archive in vol in both directions and
// compares it with want (in id order).
func checkReads(t *testing.T, vol *graft.Volume, want []mq.Record) {
	t.Helper()
	if got := readRange(t, vol, 0, brand.Max, false); !reflect.DeepEqual(got, want) {
		t.Fatalf("read: %+v", got)
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if got := readRange(t, vol, 0, brand.Max, true); !reflect.DeepEqual(got, rev) {
		t.Fatalf("reverse read: %+v", got)
	}
}

// goldenVolume returns the volume archive.q.s of a fresh, read-only copy
// of the checked-in data dir src (opening a store writes to its
// directory). With -update and no src, it first writes src: a store holding the volume archive.q.s, filled by fill.
// A data dir is written once and never regenerated: Pebble's bytes are not
// deterministic, and its point is that later binaries read these bytes.
func goldenVolume(t *testing.T, src string, fill func(*graft.Volume)) *graft.Volume {
	t.Helper()
	if _, err := os.Stat(src); os.IsNotExist(err) && goldenfile.Updating() {
		ctx := t.Context()
		s, err := graft.Open(ctx, src, graft.Options{})
		if err != nil {
			t.Fatal(err)
		}
		vol, err := s.CreateVolume(ctx, volName("archive.q.s"))
		if err != nil {
			t.Fatal(err)
		}
		fill(vol)
		if err := errors.Join(s.Compact(ctx), s.Close()); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(src, "LOCK"))
		os.Remove(filepath.Join(src, "BALLAST")) // recreated by read-write opens; not part of the format
	}
	return openCopy(t, src)
}

// openCopy opens a fresh copy of the data dir src read-only and returns its
// volume archive.q.s.
func openCopy(t *testing.T, src string) *graft.Volume {
	t.Helper()
	dir := goldenfile.CopyDir(t, src)
	s, err := graft.Open(t.Context(), dir, graft.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	vol, err := s.Volume(t.Context(), volName("archive.q.s"))
	if err != nil {
		t.Fatal(err)
	}
	return vol
}

// goldenRecordsV2 are the records of the version-2 golden pages and
// volume, in id order: ids before the brand epoch and with sequences of
// 2^22 or more, duplicate names, bytes that are not UTF-8, empty names and
// values; one branded record among them.
func goldenRecordsV2() []mq.Record {
	return []mq.Record{
		{ID: xid.ID{Ms: 0, Seq: 1}, Fields: []mq.Field{{Name: "k", Value: "v"}}},
		{ID: xid.ID{Ms: 5}, Fields: []mq.Field{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}},
		{ID: brand.ID(7).XID(), Fields: []mq.Field{{Name: "\xff\x00", Value: "\xfe"}, {Name: "", Value: ""}}},
		{ID: xid.ID{Ms: 1704067200001, Seq: 1 << 22}, Fields: []mq.Field{{Name: "émoji", Value: "🙂"}, {Name: "émoji", Value: ""}}},
		{ID: xid.ID{Ms: 1704067200002, Seq: 1 << 40}, Fields: []mq.Field{{Name: "n", Value: strings.Repeat("x", 300)}}},
	}
}

// TestGoldenRecordPageV2: the example of docs/ARCHIVE.md byte for byte, and
// pages with duplicate names and binary fields.
func TestGoldenRecordPageV2(t *testing.T) {
	recs := goldenRecordsV2()
	for i, name := range []string{"record-page.v2.bin", "record-page-dup.v2.bin", "record-page-binary.v2.bin"} {
		b := goldenFile(t, name, AppendRecordPage(nil, recs[i]))
		if b[4] != 2 {
			t.Fatalf("%s: version %d", name, b[4])
		}
		got, err := DecodeRecordPage(b)
		if err != nil || !reflect.DeepEqual(got, recs[i]) {
			t.Fatalf("%s decodes to %+v, %v; want %+v", name, got, err, recs[i])
		}
	}
	// docs/ARCHIVE.md, "Record page, version 2": record 0-1, k = v, 39 bytes.
	want, _ := hex.DecodeString("4541524302" + "0000000000000000" + "0000000000000001" + "00000001" + "000000016b" + "0000000176" + "4515547f")
	if b := goldenFile(t, "record-page.v2.bin", AppendRecordPage(nil, recs[0])); !bytes.Equal(b, want) {
		t.Fatalf("record page %x, docs/ARCHIVE.md gives %x", b, want)
	}
}

// TestGoldenArchiveVolumeV2 reads an archive volume of version-2 pages
// beside a version-1 one (two folds, then retention keeping the newest
// three): archive.w and archive.dropped of 16 bytes, the frontier, and the
// records in both directions.
func TestGoldenArchiveVolumeV2(t *testing.T) {
	ctx := t.Context()
	recs := goldenRecordsV2()
	vol := goldenVolume(t, goldenfile.Path("datadir.v2"), func(vol *graft.Volume) {
		for _, slice := range [][]mq.Record{recs[:2], recs[2:]} {
			if _, err := Fold(ctx, vol, slice); err != nil {
				t.Fatal(err)
			}
		}
		if _, n, err := Retain(ctx, vol, Retention{Count: 3}, time.Now()); err != nil || n != 2 {
			t.Fatalf("retain: %d, %v", n, err)
		}
	})
	st, err := Frontier(ctx, vol)
	if err != nil || st.Pages != 5 || st.Low != 2 || st.W != recs[4].ID || st.LSN != 3 {
		t.Fatalf("frontier %+v, %v; want 5 pages, low 2, W %v, LSN 3", st, err, recs[4].ID)
	}
	snap, err := vol.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if w, err := snap.Meta(ctx, MetaW); err != nil || len(w) != 16 {
		t.Fatalf("archive.w: %x, %v; want 16 bytes", w, err)
	}
	if through, ok, err := droppedThrough(ctx, snap); err != nil || !ok || through != recs[1].ID {
		t.Fatalf("archive.dropped: %v %v %v, want %v", through, ok, err, recs[1].ID)
	}
	var got []mq.Record
	for r, err := range Read(ctx, vol, xid.Min, xid.Max, false) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if !reflect.DeepEqual(got, recs[2:]) {
		t.Fatalf("read: %+v", got)
	}
	var rev []mq.Record
	for r, err := range Read(ctx, vol, recs[2].ID, recs[3].ID, true) {
		if err != nil {
			t.Fatal(err)
		}
		rev = append(rev, r)
	}
	if !reflect.DeepEqual(rev, []mq.Record{recs[3], recs[2]}) {
		t.Fatalf("reverse range read: %+v", rev)
	}
}

// TestGoldenRecordPagesSpanning: the pages of a record spanning pages
// (docs/ARCHIVE.md's example, written at a 60-byte page limit so that the
// files stay small): a version-3 head and a version-4 continuation, which
// decode to the record, and which the reader of the volume puts together.
func TestGoldenRecordPagesSpanning(t *testing.T) {
	r := mq.Record{ID: xid.ID{Ms: 1, Seq: 2}, Fields: []mq.Field{{Name: "k", Value: strings.Repeat("v", 40)}}}
	pages := pagesOf(t, r, 60)
	if len(pages) != 2 {
		t.Fatalf("%d pages", len(pages))
	}
	var got [][]byte
	for i, name := range []string{"record-page-span.v3.bin", "record-page-span.v4.bin"} {
		b := goldenFile(t, name, pages[i])
		if b[4] != byte(3+i) {
			t.Fatalf("%s: version %d", name, b[4])
		}
		got = append(got, b)
	}
	if rec, err := DecodeRecordPages(got); err != nil || !reflect.DeepEqual(rec, r) {
		t.Fatalf("golden pages decode to %+v, %v", rec, err)
	}
}
