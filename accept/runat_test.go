package accept

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// TestRecordRunAt: an intent's run-at survives recovery from the log and
// from a snapshot; a negative one is refused before any side effect.
func TestRecordRunAt(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	o, err := Open(ctx, dir, Options{K: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := map[brand.ID]int64{1: 0, 2: 1_900_000_000_000, 3: 1, 4: 0}
	for id := brand.ID(1); id <= 4; id++ {
		if err := o.Record(ctx, Intent{ID: id, Queue: qn("q"), Payload: []byte("p"), RunAt: want[id]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Record(ctx, Intent{ID: 5, Queue: qn("q"), RunAt: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative run-at: %v", err)
	}
	check := func(o *Outbox, how string) {
		t.Helper()
		if o.Len() != 4 {
			t.Fatalf("%s: %d intents, want 4", how, o.Len())
		}
		for id, at := range want {
			in, ok := o.Get(id)
			if !ok || in.RunAt != at || string(in.Payload) != "p" {
				t.Fatalf("%s: intent %d = %+v, want run-at %d", how, id, in, at)
			}
		}
	}
	for _, compact := range []bool{false, true} {
		if compact {
			if err := o.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if o, err = Open(ctx, dir, Options{K: 4}); err != nil {
			t.Fatal(err)
		}
		check(o, map[bool]string{false: "from the log", true: "from a snapshot"}[compact])
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestJobPageRunAt: a page with a run-at is version 2 and round-trips; every
// bit flip and every truncation of it is an error; a page due at once stays
// version 1.
func TestJobPageRunAt(t *testing.T) {
	b := EncodeJob(Job{ID: 42, Payload: []byte("hello"), RunAt: 1_900_000_000_123})
	j, err := DecodeJob(b)
	if err != nil || j.ID != 42 || string(j.Payload) != "hello" || j.RunAt != 1_900_000_000_123 || b[0] != 2 {
		t.Fatalf("%+v %v (version %d)", j, err, b[0])
	}
	for i := range b {
		for bit := range 8 {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			if _, err := DecodeJob(c); err == nil {
				t.Fatalf("flip at %d.%d decoded", i, bit)
			}
		}
		if _, err := DecodeJob(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", i, err)
		}
	}
	if v1 := EncodeJob(Job{ID: 42, Payload: []byte("hello")}); v1[0] != 1 || string(v1) != string(EncodeJobPage(42, []byte("hello"))) {
		t.Fatalf("a job due at once is not the version 1 page")
	}
}

// stuckDispatcher fails every dispatch: the jobs stay undispatched on the
// volume, for the next tier to dispatch.
type stuckDispatcher struct{}

func (stuckDispatcher) EnqueueBatch(context.Context, names.Queue, []mq.Job) ([]mq.EnqueueResult, error) {
	return nil, errors.New("job stream down")
}

func (stuckDispatcher) CheckJob(mq.Job) error { return nil }

func (stuckDispatcher) CheckJobID(context.Context, names.Queue, mq.Job) (bool, error) {
	return false, nil
}

// TestDispatchRunAt: a job with a future run-at is dispatched (after its
// push) but not put on the job stream, nor claimable, before its run-at,
// by the injected clock of the job queue; at its run-at it is claimed once,
// with its payload. The run-at survives a restart between the push and the
// dispatch: the next tier dispatches the job from the volume's page and the
// outbox's log. No timed assertion: the clock only moves when the test
// moves it.
func TestDispatchRunAt(t *testing.T) {
	ctx := t.Context()
	// A queue of this run's own: the package's redis-server outlives a run
	// (go test -count=N).
	queue := fmt.Sprintf("timed%d", rand.Uint32())
	rd := servers.Redis(t)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	mqc, err := mq.Connect(ctx, mq.Options{URL: rd.URL, Jobs: mq.JobOptions{Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	defer mqc.Close()
	dir := t.TempDir()
	url := fileURL(filepath.Join(dir, "remote"))
	open := func(disp Dispatcher) (*rig, error) { return openRigOn(ctx, dir, url, disp, 100, TierOptions{}) }
	claim := func() map[brand.ID]string {
		t.Helper()
		got := map[brand.ID]string{}
		ds, err := mqc.Claim(ctx, qn(queue), "w", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if _, twice := got[d.ID]; twice || len(d.Fields) != 1 || d.Fields[0].Name != PayloadField || d.Attempt != 1 {
				t.Fatalf("delivery %+v", d)
			}
			got[d.ID] = d.Fields[0].Value
		}
		return got
	}

	// A restart between the push and the dispatch.
	r, err := open(stuckDispatcher{})
	if err != nil {
		t.Fatal(err)
	}
	late, err := r.tier.EnqueueAt(ctx, qn(queue), 0, []byte(`{"n":"late"}`), Sync, t0.Add(2*time.Hour))
	if err != nil || late.LSN != 1 {
		t.Fatalf("%+v %v", late, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel() // the stuck dispatcher gives up at once
	r.tier.Close(cctx)
	if err := errors.Join(r.out.Close(ctx), r.gs.Close()); err != nil {
		t.Fatal(err)
	}

	r, err = open(mqc)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close(context.WithoutCancel(ctx))
	soon, err := r.tier.EnqueueAt(ctx, qn(queue), 0, []byte(`{"n":"soon"}`), Sync, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	now1, err := r.tier.Enqueue(ctx, qn(queue), 0, []byte(`{"n":"now"}`), Async)
	if err != nil {
		t.Fatal(err)
	}
	r.settle(t, ctx) // all three dispatched and marked

	if got := claim(); len(got) != 1 || got[now1.ID] != `{"n":"now"}` {
		t.Fatalf("at t0 claimed %v, want only the job due at once", got)
	}
	st, err := mqc.Status(ctx, qn(queue))
	if err != nil {
		t.Fatal(err)
	}
	if st.Delayed != 2 || st.Length != 1 {
		t.Fatalf("status %+v: want 2 delayed, 1 on the job stream (claimed)", st)
	}
	now.Store(t0.Add(time.Hour).UnixMilli() - 1)
	if got := claim(); len(got) != 0 {
		t.Fatalf("a millisecond before its run-at, claimed %v", got)
	}
	now.Store(t0.Add(time.Hour).UnixMilli())
	if got := claim(); len(got) != 1 || got[soon.ID] != `{"n":"soon"}` {
		t.Fatalf("at the first run-at claimed %v", got)
	}
	now.Store(t0.Add(2*time.Hour).UnixMilli() - 1)
	if got := claim(); len(got) != 0 {
		t.Fatalf("before the second run-at, claimed %v", got)
	}
	now.Store(t0.Add(2 * time.Hour).UnixMilli())
	if got := claim(); len(got) != 1 || got[late.ID] != `{"n":"late"}` {
		t.Fatalf("at the second run-at claimed %v (the job enqueued before the restart)", got)
	}
	if _, err := r.tier.EnqueueAt(ctx, qn(queue), 0, nil, Async, time.Unix(-5, 0)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("run-at before 1970: %v", err)
	}
}
