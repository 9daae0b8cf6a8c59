package graft

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/internal/bench/walfs"
)

// gate counts the syncs of WAL files and, when armed, holds the next one
// until the test opens the gate.
type gate struct {
	syncs   atomic.Int32
	armed   atomic.Bool
	holding chan struct{} // closed when a sync is being held
	open    chan struct{} // closed by the test to let it go
}

func (g *gate) hook(sync func() error) error {
	if g.armed.CompareAndSwap(true, false) {
		close(g.holding)
		<-g.open
	}
	g.syncs.Add(1)
	return sync()
}

// TestGroupCommit: while one volume's Synced commit is stuck in its WAL
// fsync, Synced commits to other volumes are not held back by any lock of
// ours: they enter Pebble's commit pipeline and, once the stuck fsync
// returns, all of them share the next one. A lock held across the sync (per
// store, or per anything wider than a volume) would serialise them into one
// fsync each.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	g := &gate{holding: make(chan struct{}), open: make(chan struct{})}
	s := openMem(t, walfs.New(vfs.NewMem(), g.hook), Options{})
	defer s.Close()
	const others = 6
	first := mustCreate(t, s, "first")
	vols := make([]*Volume, others)
	for k := range vols {
		vols[k] = mustCreate(t, s, fmt.Sprintf("v%d", k))
	}

	// On a failure the held sync is let go before the store closes.
	release := sync.OnceFunc(func() { close(g.open) })
	defer release()
	// The hook says how many batches are inside Pebble's commit, past every
	// lock of graft's; it is set before any committer starts.
	members := make(chan int64, 64)
	hook := func(n int64) {
		select {
		case members <- n:
		default: // never block a commit; the counts only grow while the sync is held
		}
	}
	s.testHookCommitting.Store(&hook)
	defer s.testHookCommitting.Store(nil)

	g.armed.Store(true)
	done := make(chan error, others+1)
	go func() {
		txn := first.Begin()
		_ = txn.Put(1, []byte("first"))
		_, err := txn.Commit(ctx, Synced)
		done <- err
	}()
	<-g.holding // the first commit's fsync is in progress and held
	before := g.syncs.Load()

	for _, v := range vols {
		go func() {
			txn := v.Begin()
			_ = txn.Put(1, []byte(v.Name().String()))
			_, err := txn.Commit(ctx, Synced)
			done <- err
		}()
	}
	// Every committer gets past graft's locks while the sync is held: a lock
	// held across the sync would keep the count below others+1 and the
	// deadline would fail the test.
	deadline := time.After(time.Minute)
	for n := int64(0); n < others+1; {
		select {
		case n = <-members:
		case err := <-done:
			t.Fatalf("a commit returned while the WAL sync was held: %v", err)
		case <-deadline:
			t.Fatalf("only %d of %d commits entered Pebble while one WAL sync was held: something of graft's holds them back", n, others+1)
		}
	}
	// Then every one of them has written its batch to the WAL and waits for
	// the sync, so the sync after the held one covers them all.
	waitInCommitPublish(t, others+1)
	for k := 0; k < others+1; k++ {
		select {
		case err := <-done:
			t.Fatalf("a commit returned while the WAL sync was held: %v", err)
		default:
		}
	}
	release()
	for k := 0; k < others+1; k++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	syncs := g.syncs.Load() - before
	// The held sync itself, then one for all the others.
	t.Logf("%d commits on %d other volumes finished with %d WAL syncs, the held one included", others, others, syncs)
	if syncs > 2 {
		t.Fatalf("%d commits on different volumes took %d syncs besides the held one; they should share one", others, syncs-1)
	}
	for _, v := range append(vols, first) {
		if v.Head() != 1 {
			t.Fatalf("volume %s head %d", v.Name(), v.Head())
		}
	}
}

// pebblePublish is the frame of Pebble's commit pipeline in which a
// committer that has written its batch to the WAL waits to be published
// (and, for a synced commit, for the WAL sync covering it).
const pebblePublish = "github.com/cockroachdb/pebble/v2.(*commitPipeline).publish("

// waitInCommitPublish waits until at least n goroutines stand in Pebble's
// publish step, up to a deadline. Pebble offers no hook there, so the
// goroutines' stacks are read; if Pebble renames the step the deadline
// fails the test (update pebblePublish) rather than letting it pass.
func waitInCommitPublish(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	var got int
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for {
			k := runtime.Stack(buf, true)
			if k < len(buf) {
				got = strings.Count(string(buf[:k]), pebblePublish)
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		if got >= n {
			return
		}
	}
	t.Fatalf("%d goroutines in %s after a minute, want %d", got, pebblePublish, n)
}
