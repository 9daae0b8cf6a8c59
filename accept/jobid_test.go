package accept

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

// steppedMinter returns a Minter for node 0 whose clock reads the returned
// millisecond (Unix), which the test steps by hand.
func steppedMinter(t *testing.T) (*brand.Minter, *atomic.Int64) {
	t.Helper()
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	m, err := brand.NewMinter(0, brand.WithClock(func() time.Time { return time.UnixMilli(now.Load()) }))
	if err != nil {
		t.Fatal(err)
	}
	return m, &now
}

// claimPayloads claims every job of q and returns each id's payload and how
// many times it was delivered.
func claimPayloads(ctx context.Context, t *testing.T, c *mq.Client, q string) (map[brand.ID]string, map[brand.ID]int) {
	t.Helper()
	payloads, count := map[brand.ID]string{}, map[brand.ID]int{}
	for {
		ds, err := c.Claim(ctx, qn(q), "audit", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return payloads, count
		}
		for _, d := range ds {
			count[d.ID]++
			for _, f := range d.Fields {
				if f.Name == PayloadField {
					payloads[d.ID] = f.Value
				}
			}
		}
	}
}

// TestPlantedIDs: explicit ids that this node's minter would mint in the
// next milliseconds are refused with ErrInvalid (a *FutureIDError) before
// anything is recorded, so that jobs enqueued without an id afterwards get
// ids of their own: every acknowledged job is claimed with its payload, and
// none was answered with a planted id.
//
//echostore:fault
func TestPlantedIDs(t *testing.T) {
	ctx := t.Context()
	m, now := steppedMinter(t)
	r, _ := newRig(t, 100, TierOptions{Minter: m})
	q := fmt.Sprintf("planted%d", rand.Uint32())
	const ahead = 20 // milliseconds planted ahead of the clock
	t0 := now.Load() - brand.EpochMillis
	planted := map[brand.ID]bool{} // the plants accepted
	tried := 0
	for k := range int64(ahead) {
		for seq := range 3 {
			id, err := brand.Make(t0+k, 0, seq)
			if err != nil {
				t.Fatal(err)
			}
			if id <= m.Top() {
				continue // not ahead: a past id, which is allowed
			}
			tried++
			n := r.out.Len()
			_, err = r.tier.Enqueue(ctx, qn(q), id, []byte(`"evil"`), Async)
			var fe *FutureIDError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.ID != id {
				// Go on: what follows shows what such a plant does.
				t.Errorf("planted %s ahead of the clock: %v, want a *FutureIDError wrapping ErrInvalid", brand.JOB.Format(id), err)
				if err == nil {
					planted[id] = true
				}
			} else if r.out.Len() != n {
				t.Fatalf("a refused enqueue recorded an intent")
			}
		}
	}
	if tried < ahead*3-3 {
		t.Fatalf("only %d ids planted ahead", tried)
	}
	// What the older code accepted is dispatched before the legit clients
	// come, so that the outbox no longer holds the planted ids.
	r.settle(t, ctx)
	legit := map[brand.ID]bool{}
	for k := range int64(ahead) {
		now.Store(brand.EpochMillis + t0 + k)
		for range 3 {
			rc, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`"legit"`), Async)
			if err != nil {
				t.Fatalf("enqueue without an id: %v", err)
			}
			if planted[rc.ID] {
				t.Errorf("an enqueue without an id was answered with the planted id %s", brand.JOB.Format(rc.ID))
			}
			legit[rc.ID] = true
		}
	}
	r.settle(t, ctx)
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	payloads, count := claimPayloads(ctx, t, r.mqc, q)
	lost := 0
	for id := range legit {
		if payloads[id] != `"legit"` || count[id] != 1 {
			lost++
		}
	}
	if lost > 0 || len(payloads) != len(legit)+len(planted) {
		t.Fatalf("%d of %d acknowledged jobs are not claimed with their payload; claimed %d jobs", lost, len(legit), len(payloads))
	}
}

// TestPoisonID: the last id of the space is refused with ErrInvalid, and
// minting goes on.
func TestPoisonID(t *testing.T) {
	ctx := t.Context()
	r, _ := newRig(t, 100, TierOptions{})
	q := fmt.Sprintf("poison%d", rand.Uint32())
	poison, err := brand.JOB.Parse("JOB_FZZZZZZZZZZZZ")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.tier.Enqueue(ctx, qn(q), poison, []byte(`"evil"`), Sync); !errors.Is(err, ErrInvalid) {
		t.Fatalf("enqueue of %s: %v, want ErrInvalid", brand.JOB.Format(poison), err)
	}
	if _, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`"legit"`), Sync); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonIDRecovery: an outbox that holds the last id of the space
// (recorded directly, as an older version could have) does not stop
// minting after recovery: the far-future intent is committed and
// dispatched, and enqueues without an id go on.
//
//echostore:fault
func TestPoisonIDRecovery(t *testing.T) {
	ctx := t.Context()
	r, _ := newRig(t, 100, TierOptions{})
	q := fmt.Sprintf("poison%d", rand.Uint32())
	poison := brand.Max
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// An older version's outbox: the poison id pending.
	if err := r.out.Record(ctx, Intent{ID: poison, Queue: qn(q), Payload: []byte(`"evil"`)}); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.tier, err = NewTier(ctx, r.out, r.gs, r.rep, r.mqc, TierOptions{}); err != nil {
		t.Fatal(err)
	}
	if last := r.tier.opts.Minter.Last(); last.Time().After(time.Now().Add(RecoverLead)) {
		t.Fatalf("recovery raised the minter's floor to %s", brand.JOB.Format(last))
	}
	after := map[brand.ID]bool{}
	for _, mode := range []Mode{Async, Sync} {
		rc, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`"after"`), mode)
		if err != nil {
			t.Fatalf("%s enqueue without an id after recovering a far-future id: %v", mode, err)
		}
		after[rc.ID] = true
	}
	r.settle(t, ctx)
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	payloads, _ := claimPayloads(ctx, t, r.mqc, q)
	if payloads[poison] != `"evil"` {
		t.Fatalf("the recovered intent under %s was not dispatched: %v", brand.JOB.Format(poison), payloads)
	}
	for id := range after {
		if payloads[id] != `"after"` {
			t.Fatalf("job %s enqueued after the recovery is not claimed: %v", brand.JOB.Format(id), payloads)
		}
	}
}

// TestMintedIDTaken: when the outbox holds an intent under the id the
// minter mints next (recorded by an older version under a client's id), an
// enqueue without an id mints another instead of answering with the
// other job's id (as a retry) or failing (as a conflict); both jobs are
// dispatched.
func TestMintedIDTaken(t *testing.T) {
	ctx := t.Context()
	m, now := steppedMinter(t)
	r, _ := newRig(t, 100, TierOptions{Minter: m})
	q := fmt.Sprintf("taken%d", rand.Uint32())
	next, err := brand.Make(now.Load()-brand.EpochMillis+5, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, payload := range []string{`"same"`, `"other"`} {
		taken := next + brand.ID(i)
		if err := r.out.Record(ctx, Intent{ID: taken, Queue: qn(q), Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	now.Add(5)
	var mine []brand.ID
	for range 2 {
		rc, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`"same"`), Async)
		if err != nil {
			t.Fatalf("enqueue without an id whose minted id is taken: %v", err)
		}
		if rc.ID == next || rc.ID == next+1 {
			t.Fatalf("an enqueue without an id was answered with the taken id %s", brand.JOB.Format(rc.ID))
		}
		mine = append(mine, rc.ID)
	}
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The next process commits the intents recorded behind the tier's back.
	if r.tier, err = NewTier(ctx, r.out, r.gs, r.rep, r.mqc, TierOptions{Minter: m}); err != nil {
		t.Fatal(err)
	}
	r.settle(t, ctx)
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	payloads, _ := claimPayloads(ctx, t, r.mqc, q)
	if payloads[next] != `"same"` || payloads[next+1] != `"other"` || payloads[mine[0]] != `"same"` || payloads[mine[1]] != `"same"` || len(payloads) != 4 {
		t.Fatalf("claimed %v, want the two taken ids and the two minted", payloads)
	}
}

// TestExplicitPastAndRetry: an explicit id from the past, and the retry of
// a minted id, are accepted as before (idempotent with the same payload,
// ErrIDConflict with another), and the minter never mints them again.
func TestExplicitPastAndRetry(t *testing.T) {
	ctx := t.Context()
	m, now := steppedMinter(t)
	r, _ := newRig(t, 100, TierOptions{Minter: m})
	q := fmt.Sprintf("past%d", rand.Uint32())
	past, err := brand.Make(now.Load()-brand.EpochMillis-60_000, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	minted, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`"m"`), Async)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id      brand.ID
		payload string
	}{{past, `"p"`}, {minted.ID, `"m"`}} {
		for _, mode := range []Mode{Async, Sync, Async} {
			if rc, err := r.tier.Enqueue(ctx, qn(q), c.id, []byte(c.payload), mode); err != nil || rc.ID != c.id {
				t.Fatalf("%s enqueue of %s: %+v %v", mode, brand.JOB.Format(c.id), rc, err)
			}
		}
		if _, err := r.tier.Enqueue(ctx, qn(q), c.id, []byte(`"x"`), Async); !errors.Is(err, ErrIDConflict) {
			t.Fatalf("%s with another payload: %v, want ErrIDConflict", brand.JOB.Format(c.id), err)
		}
	}
	// The clock steps back a minute: the minter still mints above both.
	now.Add(-120_000)
	for range 3 {
		rc, err := r.tier.Enqueue(ctx, qn(q), 0, []byte(`"n"`), Async)
		if err != nil || rc.ID <= minted.ID || rc.ID <= past {
			t.Fatalf("mint after a clock step back: %+v %v", rc, err)
		}
	}
}
