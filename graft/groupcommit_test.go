package graft

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// gateFS counts the syncs of WAL files and, when armed, holds the next one
// until the test opens the gate.
type gateFS struct {
	vfs.FS
	syncs   atomic.Int32
	armed   atomic.Bool
	holding chan struct{} // closed when a sync is being held
	gate    chan struct{} // closed by the test to let it go
}

func (g *gateFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gateFile{File: f, g: g}, nil
}

func (g *gateFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, cat)
	return g.wrap(name, f, err)
}

func (g *gateFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, cat)
	return g.wrap(newname, f, err)
}

type gateFile struct {
	vfs.File
	g *gateFS
}

func (f *gateFile) SyncData() error {
	if f.g.armed.CompareAndSwap(true, false) {
		close(f.g.holding)
		<-f.g.gate
	}
	f.g.syncs.Add(1)
	return f.File.SyncData()
}

func (f *gateFile) Sync() error { return f.SyncData() }

// TestGroupCommit: while one volume's Synced commit is stuck in its WAL
// fsync, Synced commits to other volumes are not held back by any lock of
// ours: they enter Pebble's commit pipeline and, once the stuck fsync
// returns, all of them share the next one. A lock held across the sync (per
// store, or per anything wider than a volume) would serialise them into one
// fsync each.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	g := &gateFS{FS: vfs.NewMem(), holding: make(chan struct{}), gate: make(chan struct{})}
	s := openMem(t, g, Options{})
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
	close(g.gate)
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
