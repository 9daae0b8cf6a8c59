package graft

import (
	"context"
	"testing"
	"time"

	"github.com/echostore/echostore/graft/remote"
)

// TestCheckpointOmitsDroppedPages: a checkpoint written from the log after a
// retention drop references no archive page below the floor, so the
// segments that held only dropped pages are unreferenced from it on and
// remote GC deletes them; a fresh follower from that checkpoint reads the
// writer's retained pages and nothing below the floor. Against file:// and
// MinIO.
func TestCheckpointOmitsDroppedPages(t *testing.T) {
	for name, mk := range remotes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rs, _ := mk(t)
			ws := openMem(t, nil, Options{Remote: rs})
			defer ws.Close()
			w := mustCreate(t, ws, "archive.q.s")
			fold := func(lo, hi uint64) {
				pages := map[uint64][]byte{}
				for k := lo; k < hi; k++ {
					pages[ArchiveBase+k] = archPage(k)
				}
				commitPages(t, w, pages, nil)
				if _, err := w.Push(ctx); err != nil {
					t.Fatal(err)
				}
			}
			commitPages(t, w, map[uint64][]byte{7: []byte("business")}, nil)
			if _, err := w.Push(ctx); err != nil { // inline, in a commit of its own
				t.Fatal(err)
			}
			fold(0, 100)   // one push: its own segment
			fold(100, 200) // another segment
			txn := w.Begin()
			if err := txn.DropArchiveBelow(150); err != nil {
				t.Fatal(err)
			}
			if _, err := txn.Commit(ctx, Synced); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Push(ctx); err != nil {
				t.Fatal(err)
			}
			l := mustLog(t, rs, "archive.q.s")
			cp, err := l.WriteCheckpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var below, retained int
			for _, r := range cp.Commit.Pages() {
				switch {
				case r.Index >= ArchiveBase && r.Index < ArchiveBase+150:
					below++
				case r.Index >= ArchiveBase:
					retained++
				}
			}
			if below != 0 || retained != 50 {
				t.Fatalf("checkpoint references %d dropped and %d retained archive pages, want 0 and 50", below, retained)
			}
			res, err := l.GC(ctx, remote.GCOptions{MinAge: 0, TrimLog: true, Now: func() time.Time { return time.Now().Add(time.Minute) }})
			if err != nil {
				t.Fatal(err)
			}
			if res.SegmentsDeleted != 1 || res.SegmentsKept != 1 {
				t.Fatalf("GC %+v: want the segment of pages 0..99 deleted, the other kept", res)
			}
			fs := openMem(t, nil, Options{Remote: rs})
			defer fs.Close()
			f := mustCreate(t, fs, "archive.q.s")
			if _, err := f.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if err := f.Hydrate(ctx, nil); err != nil {
				t.Fatalf("hydrate after GC: %v", err)
			}
			wp, _ := readVolume(t, w, w.Head())
			fp, _ := readVolume(t, f, f.Head())
			samePages(t, "follower from the checkpoint", fp, wp)
			if i := f.Info(); i.Pages != 51 {
				t.Fatalf("follower holds %d pages, want 51 (1 business, 50 retained)", i.Pages)
			}
		})
	}
}

// TestArchiveFloorConstants: graft/remote reads the archive floor with its
// own copy of the constants (it cannot import graft); they must agree.
func TestArchiveFloorConstants(t *testing.T) {
	if remote.ArchiveBase != ArchiveBase || remote.MetaArchiveLow != MetaArchiveLow {
		t.Fatalf("remote has ArchiveBase %d and %q, graft %d and %q",
			remote.ArchiveBase, remote.MetaArchiveLow, ArchiveBase, MetaArchiveLow)
	}
}

// TestFollowerReadsWithinGrace: the grace rule. A lazy follower pulls, the
// writer rewrites every page and a checkpoint is written; remote GC within
// the grace deletes nothing the follower's state references, so it faults
// every page in; once the checkpoint is older than the grace, GC deletes
// the old segments and trims the log, and the follower, pulling again,
// restarts from the checkpoint and reads the newest bytes.
func TestFollowerReadsWithinGrace(t *testing.T) {
	for name, mk := range remotes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rs, _ := mk(t)
			ws := openMem(t, nil, Options{Remote: rs})
			defer ws.Close()
			w := mustCreate(t, ws, "grace")
			old := bigVolume(t, w, 64, 1)
			if _, err := w.Push(ctx); err != nil {
				t.Fatal(err)
			}
			fs := openMem(t, nil, Options{Remote: rs})
			defer fs.Close()
			f := mustCreate(t, fs, "grace")
			if _, err := f.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if n, err := f.Unfetched(ctx); err != nil || n == 0 {
				t.Fatalf("follower unfetched %d, %v: want lazy pages", n, err)
			}
			bigVolume(t, w, 64, 2) // every page rewritten: the first segment is unreferenced from here on
			if _, err := w.Push(ctx); err != nil {
				t.Fatal(err)
			}
			l := mustLog(t, rs, "grace")
			if _, err := l.WriteCheckpoint(ctx); err != nil {
				t.Fatal(err)
			}
			const grace = time.Hour
			start := time.Now()
			within := remote.GCOptions{Grace: grace, MinAge: grace, TrimLog: true, Now: func() time.Time { return start.Add(grace / 2) }}
			res, err := l.GC(ctx, within)
			if err != nil {
				t.Fatal(err)
			}
			if res.Horizon != 0 || res.Objects() != 0 {
				t.Fatalf("GC within the grace: %+v, want nothing collected", res)
			}
			fp, _ := readVolume(t, f, f.Head())
			samePages(t, "follower within the grace", fp, old)
			// A second lazy follower that pulled before the GC past the grace.
			gs := openMem(t, nil, Options{Remote: rs})
			defer gs.Close()
			g := mustCreate(t, gs, "grace")
			if _, err := g.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			after := within
			after.Now = func() time.Time { return start.Add(2 * grace) }
			res, err = l.GC(ctx, after)
			if err != nil {
				t.Fatal(err)
			}
			if res.Horizon != 3 || res.SegmentsDeleted != 1 || res.LogTrimmed != 2 || res.SegmentBytes == 0 || res.LogBytes == 0 {
				t.Fatalf("GC past the grace: %+v, want the first segment deleted and LSNs 1, 2 trimmed", res)
			}
			wp, _ := readVolume(t, w, w.Head())
			gp, _ := readVolume(t, g, g.Head()) // g pulled the checkpoint: its segments are kept
			samePages(t, "follower at the checkpoint", gp, wp)
			if _, err := f.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			fp, _ = readVolume(t, f, f.Head())
			samePages(t, "follower after pulling again", fp, wp)
		})
	}
}
