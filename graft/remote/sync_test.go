package remote

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// fakeEngine stands in for the local engine: a local log of commits, a
// sync point and a pending remote commit (as a writer), or a folded State
// (as a follower).
type fakeEngine struct {
	mu      sync.Mutex
	commits []localCommit // local LSN i+1
	sp      SyncPoint
	pending []byte
	state   State
}

type localCommit struct {
	pages []Page
	meta  map[string][]byte
}

func (f *fakeEngine) commit(pages []Page, meta map[string][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits = append(f.commits, localCommit{pages, meta})
}

func (f *fakeEngine) SyncPoint(context.Context) (SyncPoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sp, nil
}

func (f *fakeEngine) LocalHead(context.Context) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.commits)), nil
}

// snapshot returns the pages and metadata changed in (from, to] at their
// newest version.
func (f *fakeEngine) snapshot(from, to uint64) (map[uint64][]byte, map[string][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pages, meta := map[uint64][]byte{}, map[string][]byte{}
	for _, c := range f.commits[from:to] {
		for _, p := range c.pages {
			pages[p.Index] = p.Data
		}
		maps.Copy(meta, c.meta)
	}
	return pages, meta
}

func (f *fakeEngine) Changes(_ context.Context, from, to uint64) ([]Page, map[string][]byte, error) {
	pages, meta := f.snapshot(from, to)
	var out []Page
	for _, i := range slices.Sorted(maps.Keys(pages)) {
		out = append(out, Page{Index: i, Data: pages[i]})
	}
	return out, meta, nil
}

func (f *fakeEngine) Pending(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending, nil
}

func (f *fakeEngine) SetPending(_ context.Context, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = b
	return nil
}

func (f *fakeEngine) SetSyncPoint(_ context.Context, sp SyncPoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sp, f.pending = sp, nil
	return nil
}

func (f *fakeEngine) Apply(_ context.Context, e Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.state.Apply(e); err != nil {
		return err
	}
	f.sp = SyncPoint{Remote: f.state.LSN, Hash: f.state.Hash, Local: f.state.LocalTo}
	return nil
}

func (f *fakeEngine) Restart(_ context.Context, cp Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = fromCheckpoint(cp)
	f.sp = SyncPoint{Remote: f.state.LSN, Hash: f.state.Hash, Local: f.state.LocalTo}
	return nil
}

var _ Source = (*fakeEngine)(nil)
var _ Sink = (*fakeEngine)(nil)

// sameAsWriter checks that the follower's state, with every page fetched
// from the remote, equals the writer's local state at the follower's sync
// point.
func sameAsWriter(t *testing.T, l *Log, w, f *fakeEngine) {
	t.Helper()
	wantPages, wantMeta := w.snapshot(0, f.sp.Local)
	if len(f.state.Pages) != len(wantPages) {
		t.Fatalf("follower at %+v has %d pages, writer %d", f.sp, len(f.state.Pages), len(wantPages))
	}
	for idx, ref := range f.state.Pages {
		got, err := l.FetchPage(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantPages[idx]) {
			t.Fatalf("page %d differs from the writer's", idx)
		}
	}
	if len(f.state.Meta) != len(wantMeta) {
		t.Fatalf("metadata %v, writer %v", f.state.Meta, wantMeta)
	}
	for k, v := range wantMeta {
		if !bytes.Equal(f.state.Meta[k], v) {
			t.Fatalf("metadata %q differs", k)
		}
	}
}

// TestPushPull drives Push and Pull through a fake engine: pushes roll up
// local commits, a crash before or after the conditional PUT is recovered
// from the pending commit, followers (fresh, behind the GC horizon, or in
// step) converge on the writer's pages and metadata, a fresh follower
// starts at the checkpoint, and a stale writer is fenced.
func TestPushPull(t *testing.T) {
	for name, open := range map[string]func(testing.TB) (Store, string){"file": fileStore, "mem": memStore} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := open(t)
			hs := &hookStore{Store: s}
			cs := NewCountingStore(hs)
			l := mustLog(t, cs, "vol.s")
			rng := rand.New(rand.NewPCG(3, 4))
			w := &fakeEngine{}
			work := func(n int) {
				for range n {
					lsn := uint64(len(w.commits) + 1)
					size := 200
					if rng.IntN(3) == 0 {
						size = 16 << 10 // a segment
					}
					w.commit(pagesAt(lsn, uint64(rng.IntN(20)), uint64(1+rng.IntN(3)), 1+rng.IntN(8), size),
						map[string][]byte{"w": []byte{byte(lsn)}, string(rune('a' + rng.IntN(5))): {1}})
				}
			}
			push := func() SyncPoint {
				t.Helper()
				sp, err := Push(ctx, l, w)
				if err != nil {
					t.Fatal(err)
				}
				return sp
			}
			work(5)
			if sp := push(); sp.Remote != 1 || sp.Local != 5 {
				t.Fatalf("first push: %+v", sp)
			}
			work(3)
			push()
			// In the steady state a small push is one conditional PUT.
			w.commit(pagesAt(uint64(len(w.commits)+1), 3, 1, 4, 100), map[string][]byte{"w": {9}})
			cs.Reset()
			push()
			if c := cs.Counts(); c.PutIfAbsent != 1 || c.Total() != 1 {
				t.Fatalf("small push cost %+v", c)
			}
			f0 := &fakeEngine{}
			if _, err := Pull(ctx, l, f0); err != nil {
				t.Fatal(err)
			}
			sameAsWriter(t, l, w, f0)

			// A crash before the PUT, then one after it landed.
			for i, hook := range []func(put func() error) error{
				func(func() error) error { return errLostReply },
				func(put func() error) error { _ = put(); return errLostReply },
			} {
				work(2)
				hs.hook = hook
				if _, err := Push(ctx, l, w); !errors.Is(err, errLostReply) {
					t.Fatalf("crash %d: %v", i, err)
				}
				hs.hook = nil
				if w.pending == nil {
					t.Fatalf("crash %d: no pending commit recorded", i)
				}
				if sp := push(); sp.Local != uint64(len(w.commits)) || w.pending != nil {
					t.Fatalf("crash %d: recovered to %+v", i, sp)
				}
			}
			// A crash before the PUT of a commit with a segment, and a GC
			// that removed the segment before the retry: Push prepares the
			// commit again.
			w.commit(pagesAt(uint64(len(w.commits)+1), 500, 1, 8, 16<<10), nil)
			hs.hook = func(func() error) error { return errLostReply }
			if _, err := Push(ctx, l, w); !errors.Is(err, errLostReply) {
				t.Fatal(err)
			}
			hs.hook = nil
			pc, err := DecodeCommit(w.pending)
			if err != nil || len(pc.Segments) != 1 {
				t.Fatalf("pending commit: %v", err)
			}
			if err := s.Delete(ctx, pc.Segments[0].Key); err != nil {
				t.Fatal(err)
			}
			if sp := push(); sp.Local != uint64(len(w.commits)) {
				t.Fatalf("recovered to %+v", sp)
			}
			f1 := &fakeEngine{}
			if _, err := Pull(ctx, l, f1); err != nil {
				t.Fatal(err)
			}
			sameAsWriter(t, l, w, f1)

			cp, err := l.WriteCheckpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w.sp = SyncPoint{Remote: cp.LSN(), Hash: cp.Hash, Local: cp.Commit.LocalTo}
			work(4)
			push()
			if _, err := l.GC(ctx, GCOptions{TrimLog: true}); err != nil {
				t.Fatal(err)
			}
			// A fresh follower starts at the checkpoint: one LIST and one
			// GET for it, one LIST for the head, one GET for the commit
			// after it, none for older ones.
			f2 := &fakeEngine{}
			cs.Reset()
			sp, err := Pull(ctx, l, f2)
			if err != nil {
				t.Fatal(err)
			}
			if c := cs.Counts(); sp.Remote != cp.LSN()+1 || c.Get != 2 || c.List != 2 || c.Total() != 4 {
				t.Fatalf("fresh pull to %+v cost %+v", sp, c)
			}
			sameAsWriter(t, l, w, f2)
			// f0 is behind the horizon: it restarts from the checkpoint.
			// f1 is at the checkpoint's base: it carries on.
			for _, f := range []*fakeEngine{f0, f1} {
				if sp, err := Pull(ctx, l, f); err != nil || sp.Remote != cp.LSN()+1 {
					t.Fatalf("pull: %+v, %v", sp, err)
				}
				sameAsWriter(t, l, w, f)
			}
			// A stale writer (a second node with the old sync point) is
			// fenced and keeps its pending commit.
			stale := &fakeEngine{commits: slices.Clone(w.commits[:2]), sp: SyncPoint{}}
			if _, err := Push(ctx, l, stale); !errors.Is(err, ErrDiverged) || stale.pending == nil {
				t.Fatalf("stale writer: %v", err)
			}
			if _, _, err := l.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
