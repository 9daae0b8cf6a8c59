package graft

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/internal/crashtest"
)

// With Store.lazySyncPoint the sync point a push records after its PUT is
// not fsynced (SetSyncPoint commits with pebble.NoSync); the synced pending
// record is the truth until a later synced write. These tests lose that
// batch on purpose (or crash before it, which leaves the same state) and
// check that the volume recovers: Push publishes the pending commit again,
// Pull and Reset settle it against the remote, and a real divergence is
// still one.

// takeover is another writer of volume name: a fresh store that pulls the
// remote log, commits one page and one metadata entry, and pushes. It
// returns its store's volume.
func takeover(t *testing.T, rs remote.Store, name, tag string) *Volume {
	t.Helper()
	ctx := context.Background()
	v := mustCreate(t, openMem(t, nil, Options{Remote: rs}), name)
	if _, err := v.Pull(ctx, nil); err != nil {
		t.Fatalf("takeover: pull: %v", err)
	}
	commitPages(t, v, map[uint64][]byte{1: []byte("takeover " + tag), 7: []byte(tag)}, map[string]string{"n": tag})
	if _, err := v.Push(ctx); err != nil {
		t.Fatalf("takeover: push: %v", err)
	}
	return v
}

// sameVolume checks that a and b read the same pages and metadata at
// their heads.
func sameVolume(t *testing.T, what string, a, b *Volume) {
	t.Helper()
	ap, am := readVolume(t, a, a.Head())
	bp, bm := readVolume(t, b, b.Head())
	samePages(t, what, ap, bp)
	if am != bm {
		t.Fatalf("%s: metadata n %q, want %q", what, am, bm)
	}
}

// refusingStore fails every conditional create once refuse is set: a
// push that stops before its PUT.
type refusingStore struct {
	remote.Store
	refuse atomic.Bool
}

func (s *refusingStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if s.refuse.Load() {
		return errors.New("refused by the test")
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

// lazyPushClone pushes twice from a store (lazy sync points) on Pebble's
// crashable in-memory filesystem and returns a crash clone of it that keeps
// only synced data,
// taken after the second push returned ("after push": its PUT landed, its
// sync point is lost) or before that push's PUT ("before put": the PUT
// never happens). Either way the clone is at remote LSN 1 with the second
// push pending (remote LSN 2, local LSN 2).
func lazyPushClone(t *testing.T, rs remote.Store, point string, seed uint64) *vfs.MemFS {
	t.Helper()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	var clone *vfs.MemFS
	take := func() {
		clone = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand.New(rand.NewPCG(seed, 1))})
	}
	gate := &refusingStore{Store: rs}
	var armed atomic.Bool
	s := openMem(t, fs, Options{Remote: gate, RemoteHooks: remote.Hooks{BetweenUploadAndCommit: func() {
		if armed.Load() && point == "before put" {
			take()
			gate.refuse.Store(true)
		}
	}}})
	s.lazySyncPoint = true
	v := mustCreate(t, s, "lazy")
	commitPages(t, v, replPages(seed, 1), map[string]string{"n": "1"})
	if sp, err := v.Push(ctx); err != nil || sp.Remote != 1 {
		t.Fatalf("first push: %+v, %v", sp, err)
	}
	commitPages(t, v, replPages(seed, 3), map[string]string{"n": "3"}) // with a segment
	armed.Store(true)
	sp, err := v.Push(ctx)
	switch point {
	case "after push":
		if err != nil || sp.Remote != 2 {
			t.Fatalf("second push: %+v, %v", sp, err)
		}
		take() // no synced write since the push: its sync point is not durable
	case "before put":
		if err == nil {
			t.Fatal("the refused push succeeded")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return clone
}

// TestLazySyncPointStrictFS loses a push's sync point, or the push itself
// before its PUT, on Pebble's crashable in-memory filesystem (a crash clone
// with synced data only: lazyPushClone), then recovers in the clone:
//
//   - the PUT landed and the remote moved on (another node pulled and
//     pushed above it): Pull settles the pending commit (no *DivergedError)
//     and follows; Push goes on above.
//   - the PUT landed and the remote is quiet: Push publishes the pending
//     commit again (the same bytes: landed) without a second copy; or Pull
//     settles it and is then quiet.
//   - the same, and Reset: it drops nothing (the landed push is settled)
//     and applies only the other writer's commit.
//   - the PUT never happened: Pull is quiet and keeps the pending commit;
//     Push publishes it.
//   - the PUT never happened and another writer took the LSN: Pull fails
//     with *DivergedError naming the other commit; Reset drops the pending
//     push and follows.
//
// Each case ends with the remote log verified and a fresh follower reading
// exactly the writer's pages.
//
//echostore:fault
func TestLazySyncPointStrictFS(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		point  string // lazyPushClone's
		other  bool   // another writer pushes before the clone recovers
		first  string // "pull", "push" or "reset"
		remote uint64 // the clone's remote LSN after its first call
	}{
		{"landed, remote moved, pull", "after push", true, "pull", 3},
		{"landed, remote moved, push", "after push", true, "push", 2},
		{"landed, remote quiet, push", "after push", false, "push", 2},
		{"landed, remote quiet, pull", "after push", false, "pull", 2},
		{"landed, remote moved, reset", "after push", true, "reset", 3},
		{"never landed, pull then push", "before put", false, "pull", 1},
		{"another writer holds the LSN", "before put", true, "pull", 0},
	}
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := openRemote(t, "file://"+t.TempDir())
			clone := lazyPushClone(t, rs, tc.point, uint64(k))
			var other *Volume
			if tc.other {
				other = takeover(t, rs, "lazy", "other")
			}
			c := openMem(t, clone, Options{Remote: rs})
			v, err := c.Volume(ctx, volName("lazy"))
			if err != nil {
				t.Fatal(err)
			}
			if pend, _ := v.Pending(ctx); pend == nil || v.Info().RemoteLSN != 1 || v.Head() != 2 {
				t.Fatalf("after the crash: pending %v, info %+v; want remote LSN 1, local head 2, a pending push",
					pend != nil, v.Info())
			}
			switch {
			case tc.name == "landed, remote moved, push":
				// The pending commit is published again (landed); nothing
				// local is above it, so the push ends there, and a pull
				// then follows the other writer.
				sp, err := v.Push(ctx)
				if err != nil || sp.Remote != 2 || sp.Local != 2 {
					t.Fatalf("push after the crash: %+v, %v", sp, err)
				}
				if sp, err = v.Pull(ctx, nil); err != nil || sp.Remote != 3 {
					t.Fatalf("pull after the push: %+v, %v", sp, err)
				}
			case tc.name == "another writer holds the LSN":
				_, err := v.Pull(ctx, nil)
				var de *DivergedError
				var rde *remote.DivergedError
				if !errors.As(err, &de) || !errors.As(err, &rde) || rde.LSN != 2 ||
					!strings.Contains(err.Error(), "another commit holds the lsn of the pending push") {
					t.Fatalf("pull: %v; want a *DivergedError at remote LSN 2", err)
				}
				if _, err := v.Push(ctx); !errors.As(err, &de) {
					t.Fatalf("push: %v; want a *DivergedError", err)
				}
				dropped, err := v.Reset(ctx, true)
				if err != nil || dropped != 1 {
					t.Fatalf("reset: dropped %d, %v", dropped, err)
				}
				sameVolume(t, "after the reset", v, other)
			case tc.first == "reset":
				// The landed push is not unpushed: nothing is dropped, and
				// the pull that follows applies only the other writer's.
				dropped, err := v.Reset(ctx, true)
				if err != nil || dropped != 0 || v.Info().RemoteLSN != tc.remote || v.Head() != 3 {
					t.Fatalf("reset: dropped %d, %v; info %+v", dropped, err, v.Info())
				}
			case tc.first == "pull":
				sp, err := v.Pull(ctx, nil)
				if err != nil || sp.Remote != tc.remote {
					t.Fatalf("pull after the crash: %+v, %v; want remote LSN %d", sp, err, tc.remote)
				}
				if pend, _ := v.Pending(ctx); (pend != nil) != (tc.point == "before put") {
					t.Fatalf("pending push after the pull: %v", pend != nil)
				}
			default:
				sp, err := v.Push(ctx)
				if err != nil || sp.Remote != tc.remote || sp.Local != v.Head() {
					t.Fatalf("push after the crash: %+v, %v; want remote LSN %d", sp, err, tc.remote)
				}
			}
			if other != nil {
				sameVolume(t, "the recovered writer and the other writer", v, other)
			}
			// The recovered writer pushes on.
			commitPages(t, v, map[uint64][]byte{9: []byte("after recovery")}, map[string]string{"n": "9"})
			sp, err := v.Push(ctx)
			if err != nil || sp.Local != v.Head() {
				t.Fatalf("push after recovery: %+v, %v", sp, err)
			}
			want := uint64(3) // the two pushes of lazyPushClone, this one
			if tc.other && tc.point == "after push" {
				want = 4 // and the other writer's, above the landed one
			}
			if _, head, err := mustLog(t, rs, "lazy").Check(ctx); err != nil || head != want || sp.Remote != want {
				t.Fatalf("remote log head %d (push at %d): %v; want %d", head, sp.Remote, err, want)
			}
			f := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "lazy")
			if _, err := f.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			sameVolume(t, "a fresh follower", f, v)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSyncPointDurability: after a push, a crash clone that keeps only
// synced data holds the new sync point when SetSyncPoint is synced, and the
// old one with the push pending when it is lazy (one fsync fewer).
//
//echostore:fault
func TestSyncPointDurability(t *testing.T) {
	ctx := context.Background()
	for _, lazy := range []bool{false, true} {
		rs := openRemote(t, "file://"+t.TempDir())
		fs := vfs.NewCrashableMem()
		s := openMem(t, fs, Options{Remote: rs})
		s.lazySyncPoint = lazy
		v := mustCreate(t, s, "sp")
		commitPages(t, v, map[uint64][]byte{1: []byte("one")}, nil)
		if sp, err := v.Push(ctx); err != nil || sp.Remote != 1 {
			t.Fatalf("push: %+v, %v", sp, err)
		}
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand.New(rand.NewPCG(1, 2))})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		c := openMem(t, clone, Options{Remote: rs})
		cv, err := c.Volume(ctx, volName("sp"))
		if err != nil {
			t.Fatal(err)
		}
		pend, _ := cv.Pending(ctx)
		if got := cv.Info().RemoteLSN; (got == 0) != lazy || (pend != nil) != lazy {
			t.Fatalf("lazy %v: after the crash, remote LSN %d, pending %v", lazy, got, pend != nil)
		}
		if sp, err := cv.Push(ctx); err != nil || sp.Remote != 1 {
			t.Fatalf("lazy %v: push after the crash: %+v, %v", lazy, sp, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLazySyncPointKill9 kills a pushing child process with SIGKILL right
// after its PUT: at AfterCommitBeforeLocalRecord (the sync point is never
// written) and once Push returned with a lazy sync point (written unsynced,
// so it is usually lost with the process: Pebble keeps an unsynced record
// of a partly filled WAL block in memory). Then another node takes the volume
// over (pulls, commits, pushes above the landed commit), and the crashed
// data dir, reopened in the parent as a fresh process would: Pull succeeds
// (no *DivergedError: the pending commit is its own landed push) and lands
// at the other node's head with every page of both; Push goes on above it,
// the remote log verifies, and a fresh follower reads the writer's pages.
// Two rounds over the same data dir.
//
//echostore:fault
func TestLazySyncPointKill9(t *testing.T) {
	if arg, ok := crashtest.Child("TestLazySyncPointKill9"); ok {
		pushCrashChild(t, arg)
		return
	}
	ctx := context.Background()
	for _, point := range []string{"AfterCommitBeforeLocalRecord", "AfterPush"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			rs := openRemote(t, "file://"+filepath.Join(dir, "remote"))
			for round := uint64(1); round <= 2; round++ {
				killPushChild(t, "TestLazySyncPointKill9", point, dir, int(round))
				landed := 3*round - 2 // the child's push; the other node's is next, then the recovered writer's
				other := takeover(t, rs, "crash", fmt.Sprint("other ", round))
				s, v := openCrashed(t, dir, rs)
				pend, _ := v.Pending(ctx)
				lost := v.Info().RemoteLSN != landed
				if lost != (pend != nil) || (point == "AfterCommitBeforeLocalRecord" && !lost) {
					t.Fatalf("round %d: remote LSN %d, pending %v after the crash", round, v.Info().RemoteLSN, pend != nil)
				}
				t.Logf("round %d: sync point lost with the process: %v", round, lost)
				sp, err := v.Pull(ctx, nil)
				if err != nil || sp.Remote != 3*round-1 || sp.Local != v.Head() {
					t.Fatalf("round %d: pull after the crash: %+v, %v; want remote LSN %d", round, sp, err, 3*round-1)
				}
				sameVolume(t, fmt.Sprintf("round %d: the crashed writer after its pull", round), v, other)
				commitPages(t, v, map[uint64][]byte{3: []byte(fmt.Sprint("recovered ", round))}, nil)
				if sp, err = v.Push(ctx); err != nil || sp.Remote != 3*round {
					t.Fatalf("round %d: push after the pull: %+v, %v", round, sp, err)
				}
				if _, head, err := mustLog(t, rs, "crash").Check(ctx); err != nil || head != 3*round {
					t.Fatalf("round %d: remote head %d: %v", round, head, err)
				}
				f := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "crash")
				if _, err := f.Pull(ctx, nil); err != nil {
					t.Fatal(err)
				}
				sameVolume(t, fmt.Sprintf("round %d: a fresh follower", round), f, v)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
