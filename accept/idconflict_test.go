package accept

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestEnqueueIDConflict: an explicit id retried with the same payload on
// the same queue is a success, pending or dispatched, and the job is
// claimed once; with another payload (or, while the job is pending in the
// outbox, on another queue) it is ErrIDConflict before anything is
// recorded (no intent, no accept volume for the other queue).
func TestEnqueueIDConflict(t *testing.T) {
	ctx := t.Context()
	r, _ := newRig(t, 100, TierOptions{})
	q := fmt.Sprintf("ids%d", rand.Uint32())
	id, err := r.tier.opts.Minter.Mint()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.tier.Enqueue(ctx, qn(q), id, []byte(`1`), Async); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		n := r.out.Len()
		if _, err := r.tier.Enqueue(ctx, qn(q), id, []byte(`2`), Async); !errors.Is(err, ErrIDConflict) {
			t.Fatalf("%s: another payload: %v", when, err)
		}
		if _, err := r.tier.Enqueue(ctx, qn(q), id, []byte(`2`), Sync); !errors.Is(err, ErrIDConflict) {
			t.Fatalf("%s: another payload, sync: %v", when, err)
		}
		if when == "pending" { // once dispatched, ids are per queue
			if _, err := r.tier.Enqueue(ctx, qn(q+"x"), id, []byte(`1`), Async); !errors.Is(err, ErrIDConflict) {
				t.Fatalf("%s: another queue: %v", when, err)
			}
		}
		if got := r.out.Len(); got != n {
			t.Fatalf("%s: refused enqueues changed the outbox: %d intents, had %d", when, got, n)
		}
		if _, err := r.tier.Enqueue(ctx, qn(q), id, []byte(`1`), Async); err != nil {
			t.Fatalf("%s: retry: %v", when, err)
		}
		if rc, err := r.tier.Enqueue(ctx, qn(q), id, []byte(`1`), Sync); err != nil || rc.LSN == 0 || rc.ID != id {
			t.Fatalf("%s: sync retry: %+v %v", when, rc, err)
		}
	}
	check("pending")
	if err := r.tier.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.tier.Close(ctx); err != nil { // lets the dispatch finish
		t.Fatal(err)
	}
	if r.out.Len() != 0 {
		t.Fatalf("%d intents after the dispatch", r.out.Len())
	}
	if _, err := r.gs.Volume(ctx, volName("accept."+q+"x.0")); err == nil { // refused while pending
		t.Fatal("a refused enqueue made an accept volume for its queue")
	}
	r.tier, err = NewTier(ctx, r.out, r.gs, r.rep, r.mqc, TierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("dispatched")
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ds, err := r.mqc.Claim(ctx, qn(q), "w", 10)
	if err != nil || len(ds) != 1 || ds[0].ID != id || ds[0].Fields[0].Value != "1" {
		t.Fatalf("claimed %+v %v, want the one job", ds, err)
	}
}
