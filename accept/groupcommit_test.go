package accept

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
)

// gatedPusher holds the next push, once armed, until the test releases it.
type gatedPusher struct {
	Replicator
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newGatedPusher(r Replicator) *gatedPusher {
	return &gatedPusher{Replicator: r, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedPusher) Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error) {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Replicator.Push(ctx, vol)
}

// groupRig is a tier whose group commit waits as long as it takes (the
// test decides what arrives), with a gated replicator.
func groupRig(t *testing.T) (*rig, *gatedPusher) {
	t.Helper()
	ctx := t.Context()
	rd := servers.Redis(t)
	dir := t.TempDir()
	r, err := openRig(ctx, dir, fileURL(filepath.Join(dir, "remote")), rd.URL, 1000, TierOptions{GroupWait: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.close(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	g := newGatedPusher(r.tier.rep) // no queue yet: no committer reads rep
	r.tier.rep = g
	return r, g
}

// waitPending waits until q holds n pending sync jobs.
func waitPending(t *testing.T, q *tierQueue, n int) {
	t.Helper()
	waitIntake(t, q, fmt.Sprintf("%d sync jobs pending", n), func(in *intake) bool { return in.nsync == n })
}

// TestGroupCommitSiblings: after a push that acknowledged one caller while
// eight others were pending, the committer waits for the acknowledged
// caller's next job, so that all nine share the next push, instead of
// taking the eight at once and leaving the ninth a push of its own. The
// ninth job is enqueued only once the committer waits for it (or, without
// the wait, once the eight are taken for a push, which fails the test).
//
//echostore:fault
func TestGroupCommitSiblings(t *testing.T) {
	ctx := t.Context()
	r, g := groupRig(t)
	const queue, others = "group", 8
	payload := []byte(`{"n":1}`)

	g.armed.Store(true)
	first := make(chan Receipt, 1)
	go func() {
		rc, err := r.tier.Enqueue(ctx, qn(queue), 0, payload, Sync)
		if err != nil {
			t.Error(err)
		}
		first <- rc
	}()
	<-g.entered // the first push holds; the others pile up behind it
	q, err := r.tier.queue(ctx, qn(queue), false)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make(chan Receipt, others)
	for range others {
		wg.Go(func() {
			rc, err := r.tier.Enqueue(ctx, qn(queue), 0, payload, Sync)
			if err != nil {
				t.Error(err)
			}
			got <- rc
		})
	}
	waitPending(t, q, others)
	close(g.release)
	alone := <-first
	// The committer waits for the ninth job, or (without the wait) took
	// the eight at once, which the receipts below show.
	waitIntake(t, q, "wait for siblings, nor a take of the eight", func(in *intake) bool { return in.want > 0 || in.nsync == 0 })
	again, err := r.tier.Enqueue(ctx, qn(queue), 0, payload, Sync)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(got)
	if again.LSN != alone.LSN+1 {
		t.Fatalf("the acknowledged caller's next job went to remote LSN %d, want %d (the push after its own)", again.LSN, alone.LSN+1)
	}
	for rc := range got {
		if rc.LSN != again.LSN {
			t.Fatalf("a sibling went to remote LSN %d, want %d: the nine jobs did not share one push", rc.LSN, again.LSN)
		}
	}
}

// TestGroupCommitLoneCaller: a lone sync caller never waits for siblings,
// however long the tier would wait for them.
func TestGroupCommitLoneCaller(t *testing.T) {
	ctx := t.Context()
	r, _ := groupRig(t)
	var last uint64
	for i := range 5 {
		rc, err := r.tier.Enqueue(ctx, qn("lone"), 0, []byte(`{"n":2}`), Sync)
		if err != nil {
			t.Fatal(err)
		}
		if rc.LSN <= last {
			t.Fatalf("enqueue %d: remote LSN %d after %d", i, rc.LSN, last)
		}
		last = rc.LSN
	}
	q, err := r.tier.queue(ctx, qn("lone"), false)
	if err != nil {
		t.Fatal(err)
	}
	q.intake.mu.Lock()
	waits := q.intake.waits
	q.intake.mu.Unlock()
	if waits != 0 {
		t.Fatalf("a lone caller made the committer wait %d times", waits)
	}
}

// TestMaxQueues: an enqueue on a queue beyond TierOptions.MaxQueues is
// refused with ErrTooManyQueues before anything is recorded or created;
// the queues already taken keep working; a restarted tier with a lower
// limit still recovers every queue it finds work for, and then refuses new
// ones. A negative limit is ErrInvalid.
func TestMaxQueues(t *testing.T) {
	ctx := t.Context()
	r, _ := newRig(t, 100, TierOptions{MaxQueues: 2, AsyncInterval: time.Hour})
	for _, q := range []string{"qa", "qb"} {
		if _, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`{}`), Async); err != nil {
			t.Fatal(err)
		}
	}
	live := r.out.Stats().Live
	_, err := r.tier.Enqueue(ctx, qn("qc"), 0, []byte(`{}`), Sync)
	if !errors.Is(err, ErrTooManyQueues) {
		t.Fatalf("a third queue with MaxQueues 2: %v", err)
	}
	if got := r.out.Stats().Live; got != live {
		t.Fatalf("the refused enqueue recorded an intent: %d live, want %d", got, live)
	}
	if _, err := r.gs.Volume(ctx, volName("accept.qc.0")); !errors.Is(err, graft.ErrVolumeNotFound) {
		t.Fatalf("the refused queue's volume: %v", err)
	}
	if _, err := r.tier.Enqueue(ctx, qn("qa"), 0, []byte(`{}`), Async); err != nil {
		t.Fatalf("a queue already taken: %v", err)
	}
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTier(ctx, r.out, r.gs, r.rep, r.mqc, TierOptions{MaxQueues: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("MaxQueues -1: %v", err)
	}
	// Both queues have pending work: a tier limited to one takes both.
	if r.tier, err = NewTier(ctx, r.out, r.gs, r.rep, r.mqc, TierOptions{MaxQueues: 1}); err != nil {
		t.Fatal(err)
	}
	r.settle(t, ctx) // every intent of both queues committed and dispatched
	for _, q := range []string{"qa", "qb"} {
		if _, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`{}`), Sync); err != nil {
			t.Fatalf("recovered queue %s: %v", q, err)
		}
	}
	if _, err := r.tier.Enqueue(ctx, qn("qd"), 0, []byte(`{}`), Async); !errors.Is(err, ErrTooManyQueues) {
		t.Fatalf("a new queue after recovery over the limit: %v", err)
	}
}

// TestPayloadBeyondJobStream: a payload that fits an accept page but not a
// job stream entry (mq's Limits) is refused with ErrTooLarge before
// anything is recorded, in both modes; before, it was acknowledged (sync:
// committed and pushed) and then refused by every dispatch, which stopped
// its queue's dispatch for good. A payload at the job stream's limit is
// acknowledged and dispatched.
func TestPayloadBeyondJobStream(t *testing.T) {
	ctx := t.Context()
	r, _ := newRig(t, 100, TierOptions{})
	most := mq.DefaultMaxBytes - len(PayloadField)
	big := []byte(strings.Repeat("x", most+1))
	for _, mode := range []Mode{Sync, Async} {
		live := r.out.Stats().Live
		if _, err := r.tier.Enqueue(ctx, qn("big"), 0, big, mode); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s enqueue of %d bytes: %v, want ErrTooLarge", mode, len(big), err)
		}
		if got := r.out.Stats().Live; got != live {
			t.Fatalf("%s: the refused payload was recorded", mode)
		}
	}
	rc, err := r.tier.Enqueue(ctx, qn("big"), 0, big[:most], Sync)
	if err != nil {
		t.Fatalf("a payload at the job stream's limit: %v", err)
	}
	r.settle(t, ctx)
	ds, err := r.mqc.Claim(ctx, qn("big"), "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].ID != rc.ID || len(ds[0].Fields[0].Value) != most {
		t.Fatalf("claimed %d jobs, want the one of %d bytes", len(ds), most)
	}
}
