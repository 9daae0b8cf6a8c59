package accept

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/echostore/echostore/names"
)

// TestAsyncCommitBatch: a backlog of async intents is committed in commits
// of up to AsyncCommitBatch jobs while the first CommitBatch of them are
// async (a larger commit ends before the next sync job); a commit that holds
// a sync job takes at most CommitBatch. Every job reaches
// the job stream once, in order.
func TestAsyncCommitBatch(t *testing.T) {
	ctx := t.Context()
	r, _ := newRig(t, 1000, TierOptions{AsyncInterval: time.Hour, CommitBatch: 64, AsyncCommitBatch: 200})
	br := &blockingReplicator{Replicator: r.rep, started: make(chan struct{}, 16), release: make(chan struct{})}
	r.tier.rep = br
	q := qn("asyncbatch")
	first := make(chan error, 1)
	go func() {
		_, err := r.tier.Enqueue(ctx, q, 0, []byte("first"), Sync)
		first <- err
	}()
	<-br.started // the first commit is held in its push
	var want []string
	enqueue := func(n int) {
		for range n {
			p := "job " + strconv.Itoa(len(want))
			if _, err := r.tier.Enqueue(ctx, q, 0, []byte(p), Async); err != nil {
				t.Fatal(err)
			}
			want = append(want, p)
		}
	}
	enqueue(450)
	synced := make(chan error, 1)
	go func() {
		_, err := r.tier.Enqueue(ctx, q, 0, []byte("job 450"), Sync)
		synced <- err
	}()
	tq, _ := r.tier.queue(ctx, q, false)
	waitIntake(t, tq, "the sync job pending", func(in *intake) bool { return in.nsync == 1 })
	want = append(want, "job 450")
	enqueue(99)
	go func() {
		for range br.started {
		}
	}()
	close(br.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	r.settle(t, ctx)
	close(br.started)
	// 450 async: 200, 200; then the 50 left, the sync job and 13 async
	// behind it (a commit holding a sync job: CommitBatch); then the 86
	// left.
	st := r.tier.Stats()
	if len(st) != 1 || !slices.Equal(st[0].Batches, []int{1, 200, 200, 64, 86}) {
		t.Fatalf("Stats() = %+v, want commits of [1 200 200 64 86]", st)
	}
	got := streamPayloads(t, r, q)
	if !slices.Equal(got, append([]string{"first"}, want...)) {
		t.Fatalf("the job stream holds %d jobs %q…, want %d in order", len(got), got[:min(len(got), 5)], len(want)+1)
	}
}

// streamPayloads claims every job of q's job stream, in stream order, and
// returns their payloads.
func streamPayloads(t *testing.T, r *rig, q names.Queue) []string {
	t.Helper()
	var got []string
	for {
		ds, err := r.mqc.Claim(t.Context(), q, "audit", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return got
		}
		for _, d := range ds {
			if len(d.Fields) != 1 || d.Fields[0].Name != PayloadField {
				t.Fatalf("job %v: fields %v", d.ID, d.Fields)
			}
			got = append(got, d.Fields[0].Value)
		}
	}
}
