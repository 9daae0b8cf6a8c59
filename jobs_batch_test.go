package echostore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// claimAll claims jobs of q until it has want of them or a deadline
// passes (dispatch follows the push that acknowledged them), acks them,
// and returns their payloads by job id.
func claimAll(t *testing.T, node *echostore.Node, q names.Queue, want int) map[string]string {
	t.Helper()
	got := map[string]string{}
	for deadline := time.Now().Add(30 * time.Second); len(got) < want; {
		if time.Now().After(deadline) {
			t.Fatalf("claimed %d of %d jobs within 30 s", len(got), want)
		}
		res, err := node.Claim(t.Context(), q, echostore.ClaimOptions{Consumer: "w", Count: min(echostore.MaxBatch, want-len(got))})
		if err != nil {
			t.Fatal(err)
		}
		var entries []string
		for _, j := range res.Jobs {
			p, _ := mq.Record{Fields: j.Fields}.Get("payload")
			got[brand.JOB.Format(j.ID)] = p
			entries = append(entries, j.EntryID)
		}
		if len(entries) == 0 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if _, err := node.Ack(t.Context(), q, entries); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestEnqueueBatch: a sync batch is acknowledged job by job with the LSNs
// that made each durable, and every job reaches the job stream once; the
// batch sent again with its receipts' ids enqueues nothing twice; a job
// refused for what it is refuses the whole batch before anything is
// enqueued; an id taken by another payload is that job's error alone.
func TestEnqueueBatch(t *testing.T) {
	ctx := t.Context()
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	q := streamRef(t, "x").Queue()
	const n = 200
	jobs := make([]echostore.BatchJob, n)
	for i := range jobs {
		jobs[i] = echostore.BatchJob{Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	res, err := node.EnqueueBatch(ctx, q, jobs, echostore.Sync)
	if err != nil || res.Failed != 0 || len(res.Receipts) != n {
		t.Fatalf("sync batch: %d receipts, %d failed, %v", len(res.Receipts), res.Failed, err)
	}
	want := map[string]string{}
	for i, r := range res.Receipts {
		if r.Error != "" || r.Mode != "sync" || r.LSN == nil || *r.LSN == 0 || !strings.HasPrefix(r.ID, "JOB_") {
			t.Fatalf("receipt %d: %+v", i, r)
		}
		want[r.ID] = string(jobs[i].Payload)
		bid, err := brand.Parse(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		jobs[i].ID = bid.ID // the retry below gives each job's id again
	}
	if len(want) != n {
		t.Fatalf("%d distinct ids in %d receipts", len(want), n)
	}
	// Handed to the committer together, the batch is as few commits as
	// its batch size makes (accept.DefaultCommitBatch jobs a commit), not
	// one a job.
	lsns := map[uint64]bool{}
	for _, r := range res.Receipts {
		lsns[*r.LSN] = true
	}
	if most := (n + accept.DefaultCommitBatch - 1) / accept.DefaultCommitBatch; len(lsns) > most {
		t.Fatalf("the sync batch of %d took %d commits, want at most %d", n, len(lsns), most)
	}

	// Sent again with the ids: every job a retry, none enqueued twice.
	again, err := node.EnqueueBatch(ctx, q, jobs, echostore.Sync)
	if err != nil || again.Failed != 0 {
		t.Fatalf("the batch again: %+v, %v", again.Failed, err)
	}
	for i, r := range again.Receipts {
		if r.ID != res.Receipts[i].ID {
			t.Fatalf("receipt %d of the retry names %s, the first %s", i, r.ID, res.Receipts[i].ID)
		}
	}
	got := claimAll(t, node, q, n)
	for id, p := range want {
		if got[id] != p {
			t.Fatalf("job %s: claimed payload %q, enqueued %q", id, got[id], p)
		}
	}
	if err := node.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := node.QueueStatus(ctx, q); err != nil || st.Length != 0 || st.Pending != 0 {
		t.Fatalf("after the %d jobs were acked, the retry left %+v, %v", n, st, err)
	}

	// A job refused for what it is refuses the batch whole.
	other := streamRef(t, "y").Queue()
	bad := []echostore.BatchJob{{Payload: []byte(`1`)}, {Payload: []byte("\xff")}, {Payload: []byte(`3`)}}
	if _, err := node.EnqueueBatch(ctx, other, bad, echostore.Async); !errors.Is(err, accept.ErrInvalid) || !strings.Contains(err.Error(), "job 1") {
		t.Fatalf("a batch with a payload that is not UTF-8: %v, want accept.ErrInvalid naming job 1", err)
	}
	if err := node.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range node.AcceptQueues() {
		if q.Queue == other {
			t.Fatalf("the refused batch made the queue in the accept tier: %+v", q)
		}
	}
	for _, c := range []int{0, echostore.MaxBatch + 1} {
		if _, err := node.EnqueueBatch(ctx, other, make([]echostore.BatchJob, c), echostore.Async); !errors.Is(err, echostore.ErrInvalid) {
			t.Fatalf("a batch of %d: %v, want ErrInvalid", c, err)
		}
	}

	// An id taken by another payload is that job's error alone.
	mixed := []echostore.BatchJob{{Payload: []byte(`"new"`)}, {Payload: []byte(`"other"`), ID: jobs[0].ID}}
	mr, err := node.EnqueueBatch(ctx, q, mixed, echostore.Async)
	if err != nil || mr.Failed != 1 || mr.Receipts[0].Error != "" || !strings.HasPrefix(mr.Receipts[1].Error, "id_conflict: ") {
		t.Fatalf("a batch with a conflicting id: %+v, %v", mr, err)
	}
}
