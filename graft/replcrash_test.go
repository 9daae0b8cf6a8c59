package graft

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/crashtest"
)

// crashPoints are the named fault points of a push (remote.Hooks).
var crashPoints = []string{"BeforeSegmentUpload", "BetweenUploadAndCommit", "AfterCommitBeforeLocalRecord"}

// TestPushCrashPoints kills a pushing child process with SIGKILL at each
// named point of a push (remote.Hooks), twice per point (the first push of
// the volume and a later one), then recovers in the parent: the retried
// push either finds its commit landed (the same bytes) or publishes it, the
// remote chain verifies with one commit per push and no fork, and a fresh
// follower reads exactly the writer's pages.
//
//echostore:fault
func TestPushCrashPoints(t *testing.T) {
	if arg, ok := crashtest.Child("TestPushCrashPoints"); ok {
		pushCrashChild(t, arg)
		return
	}
	ctx := context.Background()
	for _, point := range crashPoints {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			for round := 1; round <= 2; round++ {
				killPushChild(t, "TestPushCrashPoints", point, dir, round)
				rs := openRemote(t, "file://"+filepath.Join(dir, "remote"))
				s, v := openCrashed(t, dir, rs)
				pend, _ := v.Pending(ctx)
				if (pend != nil) != (point != "BeforeSegmentUpload") {
					t.Fatalf("round %d: pending commit recorded: %v", round, pend != nil)
				}
				if v.Info().RemoteLSN != uint64(round-1) {
					t.Fatalf("round %d: remote LSN %d before recovery", round, v.Info().RemoteLSN)
				}
				sp, err := v.Push(ctx)
				if err != nil || sp.Remote != uint64(round) || sp.Local != v.Head() {
					t.Fatalf("round %d: push after the crash: %+v, %v", round, sp, err)
				}
				if _, head, err := mustLog(t, rs, "crash").Check(ctx); err != nil || head != uint64(round) {
					t.Fatalf("round %d: remote head %d: %v", round, head, err)
				}
				f := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "crash")
				if _, err := f.Pull(ctx, nil); err != nil {
					t.Fatal(err)
				}
				wp, _ := readVolume(t, v, v.Head())
				fp, _ := readVolume(t, f, f.Head())
				samePages(t, fmt.Sprintf("round %d: follower", round), fp, wp)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// killPushChild runs pushCrashChild in a child process started by test,
// waits until it reports reaching point, and kills it with SIGKILL.
func killPushChild(t *testing.T, test, point, dir string, round int) {
	t.Helper()
	p := crashtest.Start(t, test, point+"|"+dir)
	for _, want := range []string{"committed", "at " + point} {
		line, err := p.Next()
		if err != nil || line != want {
			t.Fatalf("round %d: child said %q (%v), want %q", round, line, err, want)
		}
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
}

// openCrashed opens the store pushCrashChild left in dir, and its volume.
func openCrashed(t *testing.T, dir string, rs remote.Store) (*Store, *Volume) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(dir, "graft"), Options{Remote: rs})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Volume(context.Background(), volName("crash"))
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

// pushCrashChild commits a large and a small commit (synced), then pushes
// with a hook that reports reaching the point and waits to be killed (at
// "AfterPush", once the push returned, with a lazy sync point).
func pushCrashChild(t *testing.T, arg string) {
	point, dir, _ := strings.Cut(arg, "|")
	ctx := context.Background()
	stop := func() {
		crashtest.Report("at %s", point)
		time.Sleep(time.Minute) // killed here
		t.Fatal("crash child was never killed")
	}
	var h remote.Hooks
	switch point {
	case "BeforeSegmentUpload":
		h.BeforeSegmentUpload = stop
	case "BetweenUploadAndCommit":
		h.BetweenUploadAndCommit = stop
	case "AfterCommitBeforeLocalRecord":
		h.AfterCommitBeforeLocalRecord = stop
	case "AfterPush": // killed once the push returned: its sync point is not fsynced
	default:
		t.Fatalf("unknown point %q", point)
	}
	rs, err := remote.Open(ctx, "file://"+filepath.Join(dir, "remote"), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, filepath.Join(dir, "graft"), Options{Remote: rs, RemoteHooks: h})
	if err != nil {
		t.Fatal(err)
	}
	s.lazySyncPoint = point == "AfterPush"
	v, err := s.CreateVolume(ctx, volName("crash"))
	if err != nil {
		t.Fatal(err)
	}
	seed := v.Head() + 1
	txn := v.Begin()
	for i := uint64(0); i < 100; i++ {
		if err := txn.Put(seed*1000+i, []byte(strings.Repeat(fmt.Sprint(seed, i), 500))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := txn.Commit(ctx, Synced); err != nil {
		t.Fatal(err)
	}
	txn = v.Begin()
	if err := errors.Join(txn.Put(1, []byte(fmt.Sprint("small ", seed))), txn.SetMeta("n", []byte(fmt.Sprint(seed)))); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx, Synced); err != nil {
		t.Fatal(err)
	}
	crashtest.Report("committed")
	_, err = v.Push(ctx)
	if point == "AfterPush" && err == nil {
		stop()
	}
	t.Fatalf("push returned (%v) without reaching %s", err, point)
}
