package graft

import (
	"context"
	"fmt"
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

	var entered sync.WaitGroup
	for _, v := range vols {
		entered.Add(1)
		go func() {
			txn := v.Begin()
			_ = txn.Put(1, []byte(v.Name()))
			entered.Done()
			_, err := txn.Commit(ctx, Synced)
			done <- err
		}()
	}
	entered.Wait()
	// Give the committers time to reach Pebble; they cannot finish while the
	// sync is held. (If they are slow, the test can only pass more easily.)
	time.Sleep(200 * time.Millisecond)
	for k := 0; k < others+1; k++ {
		select {
		case err := <-done:
			t.Fatalf("a commit returned while the WAL sync was held: %v", err)
		default:
		}
	}
	close(g.open)
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
