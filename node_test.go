package echostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, cfg echostore.Config) *echostore.Node {
	t.Helper()
	n, err := echostore.Open(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return n
}

// TestNoRedis: a Node without Redis has its volumes; stream and job
// operations fail with ErrNoRedis and create nothing.
func TestNoRedis(t *testing.T) {
	ctx := testCtx(t)
	n := open(t, echostore.Config{Data: t.TempDir()})
	ref, err := names.ParseStreamRef("q", "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Append(ctx, ref, [][]echostore.Field{{{Name: "a", Value: "b"}}}); !errors.Is(err, echostore.ErrNoRedis) {
		t.Fatalf("append: %v, want ErrNoRedis", err)
	}
	if _, err := n.Enqueue(ctx, ref.Queue(), []byte(`1`), echostore.EnqueueOptions{}); !errors.Is(err, echostore.ErrNoRedis) {
		t.Fatalf("enqueue: %v, want ErrNoRedis", err)
	}
	if _, err := n.Status(ctx, ref); !errors.Is(err, echostore.ErrNoRedis) {
		t.Fatalf("status: %v, want ErrNoRedis", err)
	}
	for _, err := range n.Read(ctx, ref, echostore.ReadOptions{}) {
		if !errors.Is(err, echostore.ErrNoRedis) {
			t.Fatalf("merge-read: %v, want ErrNoRedis", err)
		}
	}
	for _, err := range n.Read(ctx, ref, echostore.ReadOptions{Side: echostore.ReadArchiveOnly}) {
		if !errors.Is(err, graft.ErrVolumeNotFound) {
			t.Fatalf("archive-only read of no volume: %v, want ErrVolumeNotFound", err)
		}
	}
	vols, err := n.Volumes(ctx)
	if err != nil || vols.Volumes == nil || len(vols.Volumes) != 0 {
		t.Fatalf("volumes: %+v, %v; want an empty list", vols, err)
	}
}

// TestOpenRefuses: a mem:// remote needs Dev; a second node on a data dir
// is ErrDataLocked, and one that waits gets it once the first closes.
func TestOpenRefuses(t *testing.T) {
	ctx := testCtx(t)
	if _, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Remote: "mem://"}); !errors.Is(err, echostore.ErrMemRemote) {
		t.Fatalf("mem:// without Dev: %v, want ErrMemRemote", err)
	}
	if _, err := echostore.Open(ctx, echostore.Config{}); !errors.Is(err, echostore.ErrConfig) {
		t.Fatalf("no data dir: %v, want ErrConfig", err)
	}
	dir := t.TempDir()
	first, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: redisURL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: redisURL}); !errors.Is(err, echostore.ErrDataLocked) {
		t.Fatalf("second open: %v, want ErrDataLocked", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- first.Close(ctx) }()
	second, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: redisURL, LockWait: 30 * time.Second})
	if err != nil {
		t.Fatalf("open waiting for the lock: %v", err)
	}
	if err := errors.Join(<-closed, second.Close(ctx)); err != nil {
		t.Fatal(err)
	}
}

// TestStatusPullsBehind: a node whose data dir lacks the archive volume
// that another node folded and pushed pulls it for Status (the seam cache
// says the stream is archived), and reports the archive as it is.
func TestStatusPullsBehind(t *testing.T) {
	ctx := testCtx(t)
	remote := "file://" + t.TempDir()
	a := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remote})
	ref, err := names.ParseStreamRef("TestStatusPullsBehind", "s")
	if err != nil {
		t.Fatal(err)
	}
	recs := [][]echostore.Field{{{Name: "n", Value: "1"}}, {{Name: "n", Value: "2"}}, {{Name: "n", Value: "3"}}}
	if _, err := a.Append(ctx, ref, recs); err != nil {
		t.Fatal(err)
	}
	res, err := a.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}, TrimAfter: echostore.TrimAfterRemote})
	if err != nil || res.Folded != 2 {
		t.Fatalf("cycle: %+v, %v", res, err)
	}
	want, err := a.Status(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remote, NodeNumber: 1})
	got, err := b.Status(ctx, ref)
	if err != nil {
		t.Fatalf("status on the node without the volume: %v", err)
	}
	if gj, wj := mustJSON(t, got), mustJSON(t, want); gj != wj {
		t.Fatalf("status after the pull: %s, want %s", gj, wj)
	}
	// Without the volume on the remote, the status fails and says so.
	c := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir(), NodeNumber: 2})
	if _, err := c.Status(ctx, ref); err == nil {
		t.Fatal("status with a remote that lacks the volume: no error")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJSONKeyOrder: a result's field order is its JSON key order.
func TestJSONKeyOrder(t *testing.T) {
	w, lsn, low := "EVT_x", uint64(7), uint64(2)
	for _, c := range []struct {
		v    any
		want string
	}{
		{echostore.CycleResult{Folded: 1, Trimmed: 2, Watermark: &w, Dropped: 3}, `{"folded":1,"trimmed":2,"watermark":"EVT_x","dropped":3}`},
		{echostore.CycleResult{}, `{"folded":0,"trimmed":0,"watermark":null}`},
		{echostore.ArchiveStatus{Volume: "archive.q.s", Low: &low, Retained: &low}, `{"watermark":null,"archived":0,"live":0,"volume":"archive.q.s","lsn":0,"low":2,"retained":2}`},
		{echostore.Receipt{ID: "JOB_x", Mode: "sync", LSN: &lsn, Volume: "accept.q.0"}, `{"id":"JOB_x","mode":"sync","lsn":7,"volume":"accept.q.0"}`},
		{echostore.Receipt{ID: "JOB_x", Mode: "async", Volume: "accept.q.0"}, `{"id":"JOB_x","mode":"async","lsn":null,"volume":"accept.q.0"}`},
		{echostore.RedriveResult{Entries: []string{}}, `{"entries":[],"redriven":0}`},
		{echostore.ResetResult{VolumeInfo: echostore.VolumeInfo{GraftInfo: graft.Info{Volume: mustVolume(t, "v"), Created: time.Unix(0, 0).UTC()}}, Dropped: 1},
			`{"volume":"v","local_lsn":0,"remote_lsn":0,"sync_lsn":0,"pages":0,"bytes":0,"gc_horizon":0,"created":"1970-01-01T00:00:00Z","unfetched_frames":0,"replication_lag":{"commits":0,"seconds":0},"dropped":1,"discarded":0}`},
	} {
		if got := mustJSON(t, c.v); got != c.want {
			t.Errorf("%T: %s, want %s", c.v, got, c.want)
		}
	}
}

func mustVolume(t *testing.T, s string) names.Volume {
	t.Helper()
	v, err := names.ParseVolume(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCacheSize: Config.CacheSize reaches the graft store (0: graft's
// default), and a size below graft.MinCacheSize, or negative, is ErrConfig
// before the data dir is created.
func TestCacheSize(t *testing.T) {
	ctx := testCtx(t)
	for _, c := range []struct{ set, want int64 }{{0, graft.DefaultCacheSize}, {1 << 30, 1 << 30}, {graft.MinCacheSize, graft.MinCacheSize}} {
		n := open(t, echostore.Config{Data: t.TempDir(), CacheSize: c.set})
		if got := n.Store().CacheSize(); got != c.want {
			t.Errorf("CacheSize %d: the store's cache is %d bytes, want %d", c.set, got, c.want)
		}
	}
	for _, bad := range []int64{-1, 1, graft.MinCacheSize - 1} {
		dir := t.TempDir() + "/data"
		if _, err := echostore.Open(ctx, echostore.Config{Data: dir, CacheSize: bad}); !errors.Is(err, echostore.ErrConfig) {
			t.Fatalf("CacheSize %d: %v, want ErrConfig", bad, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("CacheSize %d: the refused open left %s (%v)", bad, dir, err)
		}
	}
}
