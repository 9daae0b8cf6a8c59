package accept

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
)

func open(t testing.TB, dir string, opts Options) *Outbox {
	t.Helper()
	o, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return o
}

func closeOK(t testing.TB, o *Outbox) {
	t.Helper()
	if err := o.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func intent(id uint64) Intent {
	return Intent{ID: brand.ID(id), Queue: qn("q" + fmt.Sprint(id%3)), Payload: []byte(fmt.Sprintf(`{"n":%d}`, id))}
}

func ids(ins []Intent) []uint64 {
	out := make([]uint64, len(ins))
	for i, in := range ins {
		out[i] = uint64(in.ID)
	}
	return out
}

func pending(t testing.TB, o *Outbox) []Intent {
	t.Helper()
	p, err := o.Pending(context.Background())
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	return p
}

func TestRecordReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := open(t, dir, Options{K: 10})
	for i := uint64(1); i <= 95; i++ {
		if err := o.Record(ctx, intent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := o.MarkCommitted(ctx, 5, 6, 7, 1000); err != nil || n != 3 {
		t.Fatalf("MarkCommitted = %d, %v; want 3", n, err)
	}
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := o.Stats(); s.Durable != s.Appended || s.Appended != 98 {
		t.Fatalf("after Flush: %+v", s)
	}
	closeOK(t, o)
	o = open(t, dir, Options{K: 10})
	defer closeOK(t, o)
	got := pending(t, o)
	if len(got) != 92 {
		t.Fatalf("recovered %d intents, want 92", len(got))
	}
	for _, in := range got {
		if in.ID >= 5 && in.ID <= 7 {
			t.Fatalf("committed intent %d came back", in.ID)
		}
		want := intent(uint64(in.ID))
		if in.Queue != want.Queue || string(in.Payload) != string(want.Payload) {
			t.Fatalf("intent %d recovered as %+v", in.ID, in)
		}
	}
	if s := o.Stats(); s.Replayed != 98 {
		t.Fatalf("replayed %d records, want 98", s.Replayed)
	}
}

func TestRejectsBeforeSideEffect(t *testing.T) {
	ctx := context.Background()
	o := open(t, t.TempDir(), Options{K: 4, MaxPayload: 8})
	defer closeOK(t, o)
	if err := o.Record(ctx, Intent{ID: 1, Queue: qn("q"), Payload: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in   Intent
		want error
	}{
		{Intent{ID: 0, Queue: qn("q")}, ErrInvalid},
		{Intent{ID: 2}, ErrInvalid}, // no queue
		{Intent{ID: 2, Queue: qn("q"), Payload: make([]byte, 9)}, ErrTooLarge},
		{Intent{ID: 1, Queue: qn("q")}, ErrDuplicate},
	}
	for _, c := range cases {
		if err := o.Record(ctx, c.in); !errors.Is(err, c.want) {
			t.Errorf("Record(%d, %q, %d bytes) = %v, want %v", c.in.ID, c.in.Queue, len(c.in.Payload), err, c.want)
		}
	}
	if s := o.Stats(); s.Appended != 1 || s.Live != 1 {
		t.Fatalf("rejected records had side effects: %+v", s)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := o.Record(cctx, intent(3)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Record with a done context = %v", err)
	}
	if _, err := Open(ctx, t.TempDir(), Options{K: 2, BlockMax: 3}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with BlockMax > K = %v", err)
	}
}

func TestBusy(t *testing.T) {
	dir := t.TempDir()
	o := open(t, dir, Options{})
	defer closeOK(t, o)
	if _, err := Open(context.Background(), dir, Options{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Open = %v, want ErrBusy", err)
	}
}

func TestClosed(t *testing.T) {
	o := open(t, t.TempDir(), Options{})
	closeOK(t, o)
	if err := o.Record(context.Background(), intent(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Record after Close = %v", err)
	}
	if err := o.Close(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}

// TestFlushInterval: a partial block becomes durable on its own once the
// time bound passes. The test waits on the durable count, not on a clock.
func TestFlushInterval(t *testing.T) {
	o := open(t, t.TempDir(), Options{K: 1000, FlushInterval: time.Millisecond})
	defer closeOK(t, o)
	if err := o.Record(context.Background(), intent(1)); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	for o.durable < 1 {
		if err := o.await(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	o.mu.Unlock()
}

// spyCtx reports, by closing waiting, the first time a caller asks for
// its Done channel: that is, the moment Record starts to wait.
type spyCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *spyCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// TestLossWindowBound: while the flusher is stuck before writing a block
// of K records, Record does not return: it waits, and gives up only when
// its context ends. Released, the flusher makes room again.
func TestLossWindowBound(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	o := open(t, t.TempDir(), Options{K: 5, FlushInterval: -1, testHookWrite: func(seq uint64) {
		if seq == 1 {
			<-release
		}
	}})
	defer closeOK(t, o)
	for i := uint64(1); i <= 5; i++ {
		if err := o.Record(ctx, intent(i)); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	spy := &spyCtx{Context: cctx, waiting: make(chan struct{})}
	go func() {
		<-spy.waiting
		cancel()
	}()
	if err := o.Record(spy, intent(6)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Record of the (K+1)th non-durable record = %v, want it to wait until cancelled", err)
	}
	if s := o.Stats(); s.Appended != 5 || s.Durable != 0 {
		t.Fatalf("stats while stuck: %+v", s)
	}
	close(release)
	if err := o.Record(ctx, intent(6)); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := o.Stats(); s.Durable != 6 {
		t.Fatalf("stats after release: %+v", s)
	}
}

// TestCompactionFallback: a corrupt newest snapshot falls back to the
// previous one plus the log kept since it.
func TestCompactionFallback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := open(t, dir, Options{K: 8})
	next := uint64(1)
	for round := 0; round < 3; round++ {
		for i := 0; i < 20; i++ {
			if err := o.Record(ctx, intent(next)); err != nil {
				t.Fatal(err)
			}
			next++
		}
		if _, err := o.MarkCommitted(ctx, brand.ID(next-3)); err != nil {
			t.Fatal(err)
		}
		if err := o.Compact(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		if err := o.Record(ctx, intent(next)); err != nil {
			t.Fatal(err)
		}
		next++
	}
	want := ids(pending(t, o))
	closeOK(t, o)
	snaps, _ := filepath.Glob(filepath.Join(dir, "snap-*.snap"))
	segs, _ := filepath.Glob(filepath.Join(dir, "log-*.log"))
	if len(snaps) != 2 || len(segs) != 2 {
		t.Fatalf("after 3 compactions: snapshots %v, segments %v; want 2 of each", snaps, segs)
	}
	// Intact: recovery uses the newest snapshot.
	o = open(t, dir, Options{K: 8})
	if got := ids(pending(t, o)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recovered %v, want %v", got, want)
	}
	base := o.Stats().BaseSnapshot
	closeOK(t, o)
	// Corrupt the newest snapshot: recovery falls back to the older one.
	newest := snaps[len(snaps)-1]
	data, _ := os.ReadFile(newest)
	data[len(data)/2] ^= 0x40
	os.WriteFile(newest, data, 0o644)
	o = open(t, dir, Options{K: 8})
	if got := ids(pending(t, o)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recovered from the older snapshot %v, want %v", got, want)
	}
	if s := o.Stats(); s.BaseSnapshot >= base || s.BaseSnapshot == 0 {
		t.Fatalf("base snapshot %d, want one older than %d", s.BaseSnapshot, base)
	}
	if _, err := os.Stat(newest + ".corrupt"); err != nil {
		t.Fatalf("the corrupt snapshot was not set aside: %v", err)
	}
	closeOK(t, o)
	// Corrupt both: the log no longer reaches back, a typed error.
	data, _ = os.ReadFile(snaps[0])
	data[len(data)/2] ^= 0x40
	os.WriteFile(snaps[0], data, 0o644)
	if _, err := Open(ctx, dir, Options{K: 8}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with every snapshot corrupt = %v, want ErrCorrupt", err)
	}
}

func brandID(i int) brand.ID { return brand.ID(i) }

// TestBlockBytes: however large K and BlockMax, a block is cut once its
// records reach blockBytes, so every block stays decodable.
func TestBlockBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := open(t, dir, Options{K: 1 << 20, BlockMax: 1 << 20, FlushInterval: -1, MaxPayload: 1 << 20})
	big := make([]byte, 1<<20)
	n := blockBytes>>20 + 4
	for i := 1; i <= n; i++ {
		if err := o.Record(ctx, Intent{ID: brand.ID(i), Queue: qn("q"), Payload: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := o.Stats(); s.Blocks < 2 {
		t.Fatalf("%d MiB of records went into %d block(s)", n, s.Blocks)
	}
	closeOK(t, o)
	o = open(t, dir, Options{})
	defer closeOK(t, o)
	if o.Len() != n {
		t.Fatalf("recovered %d intents, want %d", o.Len(), n)
	}
}

// TestCorruptOnlySnapshot: after one compaction the whole log is still
// kept, so a corrupt snapshot costs nothing; without any log it is
// ErrCorrupt, never an empty outbox.
//
//echostore:fault
func TestCorruptOnlySnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := open(t, dir, Options{K: 4})
	for i := uint64(1); i <= 10; i++ {
		if err := o.Record(ctx, intent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.Record(ctx, intent(11)); err != nil {
		t.Fatal(err)
	}
	want := ids(pending(t, o))
	closeOK(t, o)
	snaps, _ := filepath.Glob(filepath.Join(dir, "snap-*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v, want one", snaps)
	}
	data, _ := os.ReadFile(snaps[0])
	data[snapHeaderLen] ^= 1
	os.WriteFile(snaps[0], data, 0o644)
	o = open(t, dir, Options{K: 4})
	if got := ids(pending(t, o)); fmt.Sprint(got) != fmt.Sprint(want) || o.Stats().BaseSnapshot != 0 {
		t.Fatalf("recovered %v from base %d, want %v from the log alone", got, o.Stats().BaseSnapshot, want)
	}
	closeOK(t, o)
	if _, err := os.Stat(snaps[0] + ".corrupt"); err != nil {
		t.Fatalf("the corrupt snapshot was not set aside: %v", err)
	}
	// A corrupt snapshot and no log at all.
	os.Rename(snaps[0]+".corrupt", snaps[0])
	segs, _ := filepath.Glob(filepath.Join(dir, "log-*.log"))
	for _, s := range segs {
		os.Remove(s)
	}
	if _, err := Open(ctx, dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a corrupt snapshot and no log = %v, want ErrCorrupt", err)
	}
}
