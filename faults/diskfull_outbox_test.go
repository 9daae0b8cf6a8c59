package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/internal/testserver"
)

// TestOutboxDiskFull fills the tmpfs under an accept outbox from outside
// while it holds records not yet written: the block write meets ENOSPC. The
// outbox must not fail for good: Flush and Record answer ErrDiskFull (and
// ENOSPC); it keeps the block, writes it once the disk has room, and takes
// records again by itself. Reopened, every record it took is there.
func TestOutboxDiskFull(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, 8)
	ctx := t.Context()
	obDir := filepath.Join(dir, "outbox")
	opts := accept.Options{K: 1 << 16, FlushInterval: -1, DiskReserve: 1 << 20}
	o, err := accept.Open(ctx, obDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[brand.ID]bool{}
	next := brand.ID(1)
	record := func() error {
		id := next
		err := o.Record(ctx, accept.Intent{ID: id, Queue: mustQueue(t, "q"), Payload: []byte(strings.Repeat("j", 512))})
		if err == nil {
			want[id] = true
			next++
		}
		return err
	}
	for range 1000 {
		if err := record(); err != nil {
			t.Fatal(err)
		}
	}
	// The disk fills while these records wait for their block.
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	// The flush cannot finish: it says so (ErrDiskFull) instead of failing
	// the outbox, and new records are refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := o.Flush(ctx)
		if errors.Is(err, accept.ErrDiskFull) {
			t.Logf("flush: %v", err)
			break
		}
		if err == nil {
			t.Fatal("flush succeeded on a full disk")
		}
		if time.Now().After(deadline) {
			t.Fatalf("flush on a full disk: %v, want ErrDiskFull", err)
		}
	}
	err = record()
	if !errors.Is(err, accept.ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("record on a full disk: %v, want ErrDiskFull wrapping ENOSPC", err)
	}
	t.Logf("refused: %v", err)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		err := o.Flush(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, accept.ErrDiskFull) || time.Now().After(deadline) {
			t.Fatalf("flush once the disk has room: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if st := o.Stats(); st.Durable != st.Appended {
		t.Fatalf("after the flush: %d of %d records durable", st.Durable, st.Appended)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := record()
		if err == nil {
			break
		}
		if !errors.Is(err, accept.ErrDiskFull) || time.Now().After(deadline) {
			t.Fatalf("record once the disk has room: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	o, err = accept.Open(ctx, obDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	got, err := o.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("reopened: %d intents, want %d", len(got), len(want))
	}
	for _, in := range got {
		if !want[in.ID] {
			t.Fatalf("reopened: intent %d never taken", in.ID)
		}
	}
}

// TestServeRemoteFull runs a real serve whose data dir has room and whose
// remote is full (a file:// store on a tmpfs of its own, or a MinIO whose
// drive is a tmpfs, filled): a sync enqueue answers 507
// insufficient_storage, not 500; an async one is taken; once the remote has
// room, sync enqueues succeed without a restart and every acknowledged job
// reaches the job stream.
func TestServeRemoteFull(t *testing.T) {
	if _, ok := crashtest.Child("TestServeDiskFullChild"); ok {
		return
	}
	t.Run("file", func(t *testing.T) {
		rdir := filepath.Join(t.TempDir(), "remote")
		if err := os.Mkdir(rdir, 0o700); err != nil {
			t.Fatal(err)
		}
		mountTmpfs(t, rdir, 8)
		serveRemoteFull(t, fileURL(rdir), rdir)
	})
	t.Run("minio", func(t *testing.T) {
		mi, err := testserver.StartMinIO(t.Context())
		if err != nil {
			testserver.Unavailable(t, err)
		}
		t.Cleanup(func() { mi.Stop() })
		for _, kv := range mi.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		if err := mi.Kill(); err != nil {
			t.Fatal(err)
		}
		mountTmpfs(t, mi.Dir, 64)
		if err := mi.Restart(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A MinIO on a new drive answers 503 until it has initialised it.
		deadline := time.Now().Add(time.Minute)
		for {
			err := mi.CreateBucket(t.Context(), "full")
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), "XMinioServerNotInitialized") || time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		serveRemoteFull(t, mi.URL("full"), mi.Dir)
	})
}

// serveRemoteFull is TestServeRemoteFull on the remote rurl, whose
// filesystem is the one of fillDir.
func serveRemoteFull(t *testing.T, rurl, fillDir string) {
	data := filepath.Join(t.TempDir(), "data")
	redis := servers.Redis(t).URL
	q := queueName(t)
	p := crashtest.Start(t, "TestServeDiskFullChild", data+"|"+redis+"|"+rurl)
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(line, "A ")
	if !ok {
		t.Fatalf("child: %q", line)
	}
	c := &serveClient{t: t, base: "http://" + addr, p: p, http: &http.Client{Timeout: time.Minute}}
	acked := map[string]bool{}
	enqueue := func(mode, payload string) apiAnswer {
		a := c.do("POST", "/v1/queues/"+q+"/jobs?mode="+mode, map[string]any{"payload": payload})
		if a.code == http.StatusOK {
			acked[a.body["id"].(string)] = true
		}
		return a
	}
	if a := enqueue("sync", "with room"); a.code != http.StatusOK {
		t.Fatalf("sync enqueue with room: %d %s", a.code, a.raw)
	}
	filler := filepath.Join(fillDir, "filler")
	fill(t, filler)
	refused := enqueue("sync", "remote full")
	want507(t, "sync enqueue on a full remote", refused)
	t.Logf("refused: %s", refused.raw)
	if a := enqueue("async", "remote full"); a.code != http.StatusOK {
		t.Fatalf("async enqueue on a full remote (the data dir has room): %d %s", a.code, a.raw)
	}
	if a := c.do("GET", "/healthz", nil); a.code != http.StatusOK {
		t.Fatalf("healthz: %d %s", a.code, a.raw)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		a := enqueue("sync", fmt.Sprint("room again ", i))
		if a.code == http.StatusOK {
			break
		}
		if a.code != http.StatusInsufficientStorage || time.Now().After(deadline) {
			t.Fatalf("sync enqueue once the remote has room: %d %s", a.code, a.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitDispatched(t, connect(t, redis), q, acked)
}

// TestOutboxDiskFullAtK fills the tmpfs under an outbox at K = 1,000 just
// before its Kth record, so that the block of K meets ENOSPC, written by
// the flusher or by the next Record itself (which writes a full block when
// it finds no room). That Record answers on its context, whatever writes:
// it never waits for free space beyond it. Once there is room the block is
// written, and reopened every record taken is there.
func TestOutboxDiskFullAtK(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, 8)
	ctx := t.Context()
	obDir := filepath.Join(dir, "outbox")
	opts := accept.Options{K: 1000, FlushInterval: -1, DiskReserve: 1 << 20}
	o, err := accept.Open(ctx, obDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	next := brand.ID(1)
	record := func(ctx context.Context) error {
		err := o.Record(ctx, accept.Intent{ID: next, Queue: mustQueue(t, "q"), Payload: []byte(strings.Repeat("j", 512))})
		if err == nil {
			taken++
			next++
		}
		return err
	}
	for range 999 {
		if err := record(ctx); err != nil {
			t.Fatal(err)
		}
	}
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	if err := record(ctx); err != nil {
		t.Fatal(err) // the guard measures every 64th record only
	}
	// The K+1th: no room in the window, and the block of K cannot be written.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = record(cctx)
	cancel()
	if err == nil {
		t.Fatal("a record beyond K with the block of K unwritable was taken")
	}
	if !errors.Is(err, accept.ErrDiskFull) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("record beyond K on a full disk: %v, want ErrDiskFull or its context's end", err)
	}
	t.Logf("refused: %v", err)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := o.Flush(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, accept.ErrDiskFull) || time.Now().After(deadline) {
			t.Fatalf("flush once the disk has room: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		err := record(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, accept.ErrDiskFull) || time.Now().After(deadline) {
			t.Fatalf("record once the disk has room: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	o, err = accept.Open(ctx, obDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	if o.Len() != taken {
		t.Fatalf("reopened: %d intents, want %d", o.Len(), taken)
	}
}
