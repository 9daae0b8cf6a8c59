package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// archPage is archive page n of the drop tests: 2 KiB, incompressible.
func archPage(n uint64) []byte {
	b := make([]byte, 2048)
	var seed [32]byte
	seed[0], seed[1], seed[2] = byte(n), byte(n>>8), 0xA5
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

// scanIndexes lists the page indexes a scan of [lo, hi] returns, checking
// the bytes of archive pages.
func scanIndexes(t *testing.T, snap *Snapshot, lo, hi uint64, reverse bool) []uint64 {
	t.Helper()
	ctx := context.Background()
	scan := snap.Scan
	if reverse {
		scan = snap.ScanReverse
	}
	it := scan(ctx, lo, hi)
	var out []uint64
	for it.Next() {
		if i := it.Index(); i >= ArchiveBase && !bytes.Equal(it.Value(), archPage(i-ArchiveBase)) {
			t.Fatalf("scan at %d: page %d has other bytes", snap.LSN(), i)
		}
		out = append(out, it.Index())
	}
	if err := it.Close(); err != nil {
		t.Fatalf("scan at %d: %v", snap.LSN(), err)
	}
	return out
}

// liveBytes is what the store's live sstables hold plus the values they
// reference in blob files (where Pebble's value separation puts large
// values; a blob file's unreferenced values leave the disk when Pebble
// rewrites it, on its own schedule).
func liveBytes(s *Store) uint64 {
	m := s.db.Metrics()
	return m.Table.Local.LiveSize + m.BlobFiles.ReferencedValueSize
}

// pageKeys counts the page versions of v in Pebble.
func pageKeys(t *testing.T, v *Volume) int {
	t.Helper()
	lo, hi := volumeSpan(kindPage, v.id)
	it, err := v.s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantIndexes(business []uint64, archLo, archHi uint64, reverse bool) []uint64 {
	out := append([]uint64{}, business...)
	for n := archLo; n < archHi; n++ {
		out = append(out, ArchiveBase+n)
	}
	if reverse {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// TestDropArchiveBelow: a drop hides the archive pages below the floor from
// reads at its LSN and after (Get, Scan, ScanReverse, ranges that straddle
// business pages), while a snapshot taken before it still reads them; the
// floor never lowers and no page can be written below it; GC keeps the
// pages while that snapshot is open and, once it is closed, deletes every
// version of them (counted in Pebble keys, the page and byte totals, and the
// tables after compaction).
func TestDropArchiveBelow(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, Options{MemTableSize: 1 << 20})
	defer s.Close()
	v := mustCreate(t, s, "drop")
	const total = 300
	business := []uint64{3, 7}
	for n := uint64(0); n < total; n += 50 { // six folds
		pages := map[uint64][]byte{}
		for k := n; k < n+50; k++ {
			pages[ArchiveBase+k] = archPage(k)
		}
		if n == 0 {
			for _, b := range business {
				pages[b] = []byte(fmt.Sprint("business ", b))
			}
		}
		commitPages(t, v, pages, nil)
	}
	// Rewrite pages 10..19 once, so that dropped pages have two versions.
	re := map[uint64][]byte{}
	for k := uint64(10); k < 20; k++ {
		re[ArchiveBase+k] = archPage(k)
	}
	commitPages(t, v, re, nil)
	infoBefore := v.Info()
	old, err := v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	drop := func(n uint64) (uint64, error) {
		txn := v.Begin()
		defer txn.Discard()
		if err := txn.DropArchiveBelow(n); err != nil {
			return 0, err
		}
		return txn.Commit(ctx, Synced)
	}
	d1, err := drop(120)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drop(250); err != nil {
		t.Fatal(err)
	}
	if _, err := drop(100); !errors.Is(err, ErrPageDropped) {
		t.Fatalf("lowering the floor: %v, want ErrPageDropped", err)
	}
	txn := v.Begin()
	if err := txn.PutArchive(249, archPage(249)); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx, Synced); !errors.Is(err, ErrPageDropped) {
		t.Fatalf("writing below the floor: %v, want ErrPageDropped", err)
	}
	if err := v.Begin().SetMeta(MetaArchiveLow, make([]byte, 8)); !errors.Is(err, ErrReservedMeta) {
		t.Fatalf("SetMeta(%q): %v, want ErrReservedMeta", MetaArchiveLow, err)
	}
	if err := v.Begin().DropArchiveBelow(MaxArchiveOffset + 2); !errors.Is(err, ErrPageRange) {
		t.Fatalf("drop past the archive range: %v", err)
	}

	check := func(snap *Snapshot, low uint64) {
		t.Helper()
		for _, rev := range []bool{false, true} {
			if got, want := scanIndexes(t, snap, 0, ^uint64(0), rev), wantIndexes(business, low, total, rev); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("full scan at %d (reverse %v), floor %d: %d pages, want %d", snap.LSN(), rev, low, len(got), len(want))
			}
			if got, want := scanIndexes(t, snap, ArchiveBase+5, ArchiveBase+260, rev), wantIndexes(nil, max(low, 5), 261, rev); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("archive scan at %d (reverse %v), floor %d: %v", snap.LSN(), rev, low, got)
			}
			if got, want := scanIndexes(t, snap, 5, ArchiveBase+110, rev), wantIndexes(business[1:], min(low, 111), 111, rev); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("straddling scan at %d (reverse %v): %v", snap.LSN(), rev, got)
			}
			if got := scanIndexes(t, snap, ArchiveBase, ArchiveBase+low-1, rev); low > 0 && len(got) != 0 {
				t.Fatalf("scan of the dropped range at %d: %v", snap.LSN(), got)
			}
		}
		for _, n := range []uint64{0, 119, 120, 249, 250, 299} {
			_, err := snap.Get(ctx, ArchiveBase+n)
			if n < low && !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of dropped page %d at %d: %v", n, snap.LSN(), err)
			}
			if n >= low && err != nil {
				t.Fatalf("Get of page %d at %d: %v", n, snap.LSN(), err)
			}
		}
	}
	check(old, 0)
	mid, err := v.SnapshotAt(ctx, d1)
	if err != nil {
		t.Fatal(err)
	}
	check(mid, 120)
	_ = mid.Close()
	head, err := v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(head, 250)
	_ = head.Close()

	// GC with the old snapshot open keeps every page it reads.
	keysBefore := pageKeys(t, v)
	if keysBefore != total+10+len(business) {
		t.Fatalf("%d page versions before GC, want %d", keysBefore, total+10+len(business))
	}
	st, err := v.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Horizon != old.LSN() || st.DroppedPages != 0 || pageKeys(t, v) != keysBefore-10 { // only the rewritten pages' old versions
		t.Fatalf("GC with a snapshot from before the drop: %+v, %d keys", st, pageKeys(t, v))
	}
	check(old, 0)
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	bytesBefore := liveBytes(s)
	_ = old.Close()

	st, err = v.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Horizon != v.Head() || st.DroppedPages != 250 {
		t.Fatalf("GC after the snapshot closed: %+v, want horizon %d and 250 dropped pages", st, v.Head())
	}
	if got := pageKeys(t, v); got != total-250+len(business) {
		t.Fatalf("%d page versions after GC, want %d", got, total-250+len(business))
	}
	info := v.Info()
	if info.Pages != infoBefore.Pages-250 || info.Bytes != infoBefore.Bytes-250*2048 {
		t.Fatalf("Info after GC: %d pages %d bytes; before the drop %d pages %d bytes", info.Pages, info.Bytes, infoBefore.Pages, infoBefore.Bytes)
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	bytesAfter := liveBytes(s)
	t.Logf("page versions %d → %d; live bytes %d → %d; %+v", keysBefore, pageKeys(t, v), bytesBefore, bytesAfter, st)
	if bytesBefore < 300*2048 || bytesAfter+200*2048 > bytesBefore {
		t.Fatalf("%d live bytes after reclaiming 250 pages of 2 KiB, %d before", bytesAfter, bytesBefore)
	}
	head, err = v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer head.Close()
	check(head, 250)
	if st, err = v.GC(ctx); err != nil || st.DroppedPages != 0 { // nothing twice
		t.Fatalf("second GC: %+v, %v", st, err)
	}
	// A drop of everything, then a reopen: the floor is durable.
	if _, err := drop(total); err != nil {
		t.Fatal(err)
	}
	_ = head.Close()
	if _, err := v.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDropReplicates: drops travel as ordinary metadata commits. A follower
// pulling them hides the same pages and reclaims them with its own GC; a
// push whose range writes and drops the same pages sends none of them; a
// fresh follower (from a checkpoint) never receives a dropped page. Against
// file:// and MinIO.
func TestDropReplicates(t *testing.T) {
	for name, mk := range remotes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rs, _ := mk(t)
			ws := openMem(t, nil, Options{Remote: rs})
			defer ws.Close()
			w := mustCreate(t, ws, "archive.q.s")
			fs := openMem(t, nil, Options{Remote: rs})
			defer fs.Close()
			f := mustCreate(t, fs, "archive.q.s")
			fold := func(lo, hi uint64) {
				pages := map[uint64][]byte{}
				for k := lo; k < hi; k++ {
					pages[ArchiveBase+k] = archPage(k)
				}
				commitPages(t, w, pages, nil)
			}
			drop := func(n uint64) {
				txn := w.Begin()
				if err := txn.DropArchiveBelow(n); err != nil {
					t.Fatal(err)
				}
				if _, err := txn.Commit(ctx, Synced); err != nil {
					t.Fatal(err)
				}
			}
			push := func() {
				t.Helper()
				if _, err := w.Push(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := f.Pull(ctx, nil); err != nil {
					t.Fatal(err)
				}
				wp, _ := readVolume(t, w, w.Head())
				fp, _ := readVolume(t, f, f.Head())
				samePages(t, "follower", fp, wp)
			}
			fold(0, 100)
			push()
			drop(40)
			fold(100, 150)
			push()
			// Written and dropped inside one push range: never sent.
			fold(150, 200)
			drop(180)
			push()
			snap, err := f.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := snap.Get(ctx, ArchiveBase+39); !errors.Is(err, ErrNotFound) {
				t.Fatalf("follower Get of a dropped page: %v", err)
			}
			if got := scanIndexes(t, snap, ArchiveBase, ^uint64(0), false); len(got) != 20 || got[0] != ArchiveBase+180 {
				t.Fatalf("follower scan: %d pages from %v", len(got), got[:min(1, len(got))])
			}
			_ = snap.Close()
			before := pageKeys(t, f)
			st, err := f.GC(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pageKeys(t, f) != 20 || st.DroppedPages != 150 || f.Info().Pages != 20 {
				t.Fatalf("follower GC: %d → %d page versions, %+v, info %+v", before, pageKeys(t, f), st, f.Info())
			}
			// A fresh follower restarts from a checkpoint of the writer's
			// state, or applies every commit: either way only the 20 pages.
			gs := openMem(t, nil, Options{Remote: rs})
			defer gs.Close()
			g := mustCreate(t, gs, "archive.q.s")
			if _, err := g.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := g.GC(ctx); err != nil {
				t.Fatal(err)
			}
			gp, _ := readVolume(t, g, g.Head())
			wp, _ := readVolume(t, w, w.Head())
			samePages(t, "fresh follower", gp, wp)
			if n := pageKeys(t, g); n != 20 {
				t.Fatalf("fresh follower keeps %d page versions after GC, want 20", n)
			}
		})
	}
}
