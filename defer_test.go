package echostore_test

import (
	"context"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/internal/faultstore"
	"github.com/echostore/echostore/names"
)

// faultDriver opens fault://…, a file store under dir behind a faultstore
// whose every call is counted and then fails as an outage (or, with ok,
// goes through).
type faultDriver struct {
	dir   string
	calls *atomic.Int64
	ok    bool
}

func (faultDriver) Schemes() []string { return []string{"fault"} }

func (d faultDriver) Open(_ context.Context, _ *url.URL) (remote.Store, error) {
	st, err := file.Open(d.dir)
	if err != nil {
		return nil, err
	}
	fs := faultstore.New(st)
	fs.Set(func(_ context.Context, op faultstore.Op, _ string) error {
		d.calls.Add(1)
		if d.ok {
			return nil
		}
		return faultstore.ErrOutage
	})
	return fs, nil
}

// TestDeferJobsTouchesNoRemote: a node opened with DeferJobs over a data
// dir whose outbox holds a job never pushed appends and reads
// without one call to the remote (starting the accept tier at Open pushes
// the pending job first, and waited on a remote that hangs); the first
// enqueue starts the tier, which then pushes.
func TestDeferJobsTouchesNoRemote(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var calls atomic.Int64
	down := faultDriver{dir: filepath.Join(dir, "remote"), calls: &calls}
	cfg := echostore.Config{Data: data, Redis: redisURL, Remote: "fault://x", Drivers: []remote.Driver{down}}
	q, err := names.ParseQueue("defer-jobs")
	if err != nil {
		t.Fatal(err)
	}
	// A job accepted while the remote is down stays pending in the outbox.
	a, err := echostore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Enqueue(ctx, q, []byte(`{"n":1}`), echostore.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}

	calls.Store(0)
	cfg.DeferJobs = true
	b, err := echostore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	ref, err := names.ParseStreamRef("defer-jobs", "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, ref, [][]echostore.Field{{{Name: "a", Value: "1"}}, {{Name: "a", Value: "2"}}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range b.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("read %d records, want 2", n)
	}
	if got := calls.Load(); got != 0 {
		t.Fatalf("the remote was called %d times by stream operations, want 0", got)
	}
	if _, ok := b.OutboxStats(); ok {
		t.Fatal("the outbox is open before any job operation")
	}
	// The first job operation starts the tier, whose recovery pushes.
	if _, err := b.Enqueue(ctx, q, []byte(`{"n":2}`), echostore.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Drain(ctx); err == nil {
		t.Fatal("drain over a remote that is down succeeded")
	}
	if calls.Load() == 0 {
		t.Fatal("the tier started without calling the remote")
	}
}
