package archive

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
)

// remoteEnv is newEnv with rs attached to the store and opts' pusher.
func remoteEnv(t *testing.T, url string, rs remote.Store, opts Options) *env {
	e := newEnv(t, url, opts)
	e.st.AttachRemote(rs)
	return e
}

// mergeIDs is every id a merge-read of the stream returns (forward), or
// its error.
func (e *env) mergeIDs(ctx context.Context) ([]brand.ID, error) {
	var out []brand.ID
	for r, err := range MergeRead(ctx, e.source(ctx), All()) {
		if err != nil {
			return out, err
		}
		out = append(out, brandOf(e.t, r.ID))
	}
	return out, nil
}

// TestResetRefusesTrimmedArchive reproduces the loss of finding 1 at a
// smaller scale: a trim_after local stream pushed once, then cycled 6 more
// times without a push (6 local commits, 60 folded records that the cycles
// trimmed from Redis). A reset to the remote would drop them: it refuses
// with a *graft.DiscardError naming 60 and the override, and every record
// still reads; a wrong count refuses again; the right one resets, lowers
// the seam cache, and the stream stays readable and cycles on. file:// and
// MinIO.
//
//echostore:fault
func TestResetRefusesTrimmedArchive(t *testing.T) {
	for kind, mk := range remotes() {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			e := remoteEnv(t, servers.Redis(t).URL, mk(t), Options{Chunk: 100})
			all := e.append(ctx, 20)
			if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err != nil {
				t.Fatal(err)
			}
			vol := e.volume(ctx)
			if _, err := vol.Push(ctx); err != nil {
				t.Fatal(err)
			}
			for range 6 {
				all = append(all, e.append(ctx, 10)...)
				res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5})
				if err != nil || res.Folded != 10 || res.Trimmed != 10 {
					t.Fatalf("cycle: %+v, %v", res, err)
				}
			}
			for _, given := range []uint64{0, 59, 61} {
				res, err := ResetVolume(ctx, vol, e.live, given)
				var de *graft.DiscardError
				if !errors.Is(err, graft.ErrWouldDiscard) || !errors.As(err, &de) || de.Count != 60 || res.Dropped != 0 {
					t.Fatalf("reset with --discard %d: %+v, %v; want a refusal naming 60", given, res, err)
				}
				if msg := err.Error(); !strings.Contains(msg, "60 "+WhatDiscarded) || !strings.Contains(msg, "--discard 60") {
					t.Fatalf("the refusal does not say how many and what to do: %v", err)
				}
				got, err := e.mergeIDs(ctx)
				if err != nil || !sameIDs(got, all) {
					t.Fatalf("after the refused reset the merge-read returns %d records (%v), want %d", len(got), err, len(all))
				}
			}
			res, err := ResetVolume(ctx, vol, e.live, 60)
			if err != nil || res.Dropped != 6 || res.Discarded != 60 || !res.SeamLowered {
				t.Fatalf("confirmed reset: %+v, %v", res, err)
			}
			// The 60 are gone, as confirmed; the stream reads and cycles.
			want := append(append([]brand.ID{}, all[:15]...), all[len(all)-5:]...)
			got, err := e.mergeIDs(ctx)
			if err != nil || !sameIDs(got, want) {
				t.Fatalf("after the confirmed reset: %d records, %v; want %d", len(got), err, len(want))
			}
			more := e.append(ctx, 10)
			if res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err != nil || res.Folded != 10 || res.Trimmed != 10 {
				t.Fatalf("cycle after the reset: %+v, %v", res, err)
			}
			e.audit(ctx, append(want, more...))
		})
	}
}

// flakyPusher is graft.Replication whose pushes fail while fail is set.
type flakyPusher struct {
	graft.Replication
	fail atomic.Bool
}

func (p *flakyPusher) Push(ctx context.Context, v *graft.Volume) (remote.SyncPoint, error) {
	if p.fail.Load() {
		return remote.SyncPoint{}, errors.New("push refused by the test")
	}
	return p.Replication.Push(ctx, v)
}

// TestNoWedgeAfterFailedPush reproduces finding 3: on a trim_after remote
// stream, a cycle whose push fails has folded records it did not trim; the
// seam cache must not name them (it did: after the reset to the remote
// every merge-read and cycle answered ErrVolumeBehind, "pull the volume
// first", and a pull changed nothing). The reset needs no --discard (the
// records are still live), every record reads, and the next cycle folds,
// pushes and trims them again. file:// and MinIO.
//
//echostore:fault
func TestNoWedgeAfterFailedPush(t *testing.T) {
	for kind, mk := range remotes() {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			p := &flakyPusher{}
			e := remoteEnv(t, servers.Redis(t).URL, mk(t), Options{TrimAfter: TrimAfterRemote, Pusher: p, Chunk: 4})
			all := e.append(ctx, 20)
			if res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err != nil || res.Trimmed != 15 {
				t.Fatalf("cycle: %+v, %v", res, err)
			}
			p.fail.Store(true)
			all = append(all, e.append(ctx, 10)...)
			if res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err == nil || res.Folded != 10 || res.Trimmed != 0 {
				t.Fatalf("cycle with a failing push: %+v, %v", res, err)
			}
			seam, ok, err := GetArchived(ctx, e.live, e.ref())
			if err != nil || !ok || seam.W != all[14].XID() {
				t.Errorf("seam cache %+v (%v, %v) after the failed push, want W %s (what the remote holds)",
					seam, ok, err, brand.EVT.Format(all[14]))
			}
			vol := e.volume(ctx)
			res, err := ResetVolume(ctx, vol, e.live, 0)
			if err != nil || res.Dropped == 0 || res.Discarded != 0 {
				t.Fatalf("reset after the failed push: %+v, %v", res, err)
			}
			got, err := e.mergeIDs(ctx)
			if err != nil || !sameIDs(got, all) {
				t.Fatalf("merge-read after the reset: %d records, %v; want %d", len(got), err, len(all))
			}
			if _, err := vol.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			p.fail.Store(false)
			if res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err != nil || res.Folded != 10 || res.Trimmed != 10 {
				t.Fatalf("cycle after the reset: %+v, %v", res, err)
			}
			e.audit(ctx, all)
		})
	}
}

func sameIDs(a, b []brand.ID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNoWedgeAfterResetToEmpty: a trim_after local stream never pushed,
// cycled so that its only commits hold records trimmed from Redis. The
// confirmed reset (--discard N) empties the volume; the seam cache that
// named the dropped folds is removed with it, so the stream reads its live
// tail and the next cycle folds and trims again, instead of every read and
// cycle answering ErrVolumeBehind ("pull the volume first") while a pull
// has nothing to bring.
//
//echostore:fault
func TestNoWedgeAfterResetToEmpty(t *testing.T) {
	for kind, mk := range remotes() {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			e := remoteEnv(t, servers.Redis(t).URL, mk(t), Options{Chunk: 100})
			all := e.append(ctx, 20)
			if res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 2}); err != nil || res.Trimmed != 18 {
				t.Fatalf("cycle: %+v, %v", res, err)
			}
			vol := e.volume(ctx)
			if _, err := ResetVolume(ctx, vol, e.live, 0); !errors.Is(err, graft.ErrWouldDiscard) {
				t.Fatalf("unconfirmed reset: %v, want ErrWouldDiscard", err)
			}
			res, err := ResetVolume(ctx, vol, e.live, 18)
			if err != nil || res.Discarded != 18 || !res.SeamLowered {
				t.Fatalf("confirmed reset: %+v, %v; want 18 discarded and the seam cache lowered", res, err)
			}
			got, err := e.mergeIDs(ctx)
			if err != nil || !sameIDs(got, all[18:]) {
				t.Fatalf("after the reset to empty: %d records, %v; want the %d live ones", len(got), err, 2)
			}
			more := e.append(ctx, 10)
			if res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 2}); err != nil || res.Folded != 10 || res.Trimmed != 10 {
				t.Fatalf("cycle after the reset: %+v, %v", res, err)
			}
			e.audit(ctx, append(all[18:], more...))
		})
	}
}
