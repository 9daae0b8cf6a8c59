package echostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// BatchJob is api.BatchJob: one job of EnqueueBatch.
type BatchJob = api.BatchJob

// BatchReceipt is api.BatchReceipt: one job's answer in EnqueueBatch.
type BatchReceipt = api.BatchReceipt

// BatchResult is api.BatchResult: EnqueueBatch's answer.
type BatchResult = api.BatchResult

// EnqueueBatch enqueues jobs on queue q, all in mode (zero: Async), at
// once: one caller keeps the whole batch in flight, handed to the queue's
// committer together (accept.Tier.EnqueueBatch), so that a Sync batch
// waits for one commit round (or as few as the committer's batch size
// makes), where one Enqueue after another waits a round each.
//
// Every job is checked first (accept.Tier.CheckEnqueue): a batch holding a
// job Enqueue would refuse for what it is (a payload that is not UTF-8 or
// too large, a bad run-at, an id ahead of the minter) is refused whole,
// naming the job, and nothing is enqueued. An empty batch, or one of more
// than MaxBatch jobs, is ErrInvalid. Then each job is enqueued as Enqueue
// would, and answered in its receipt, in the batch's order: an id
// conflict, a full disk or an outcome not known (a Sync job whose commit
// failed after it was recorded, or ctx ending) is that job's Error, and
// counts in Failed; the receipt still carries the job's id where it has
// one, and a retry of the batch with those ids enqueues each job once.
// The jobs of one batch are not ordered among themselves.
func (n *Node) EnqueueBatch(ctx context.Context, q names.Queue, jobs []BatchJob, mode Mode) (BatchResult, error) {
	if q.IsZero() {
		return BatchResult{}, fmt.Errorf("enqueue batch: no queue: %w", names.ErrInvalid)
	}
	if len(jobs) == 0 || len(jobs) > MaxBatch {
		return BatchResult{}, fmt.Errorf("enqueue batch of %d jobs: want 1 to %d: %w", len(jobs), MaxBatch, ErrInvalid)
	}
	if mode == 0 {
		mode = accept.Async
	}
	tier, err := n.jobs(ctx)
	if err != nil {
		return BatchResult{}, err
	}
	for i, j := range jobs {
		if err := tier.CheckEnqueue(q, j.ID, j.Payload, mode, j.RunAt); err != nil {
			return BatchResult{}, fmt.Errorf("enqueue batch on %s: job %d: %w", q, i, err)
		}
	}
	in := make([]accept.BatchJob, len(jobs))
	for i, j := range jobs {
		in[i] = accept.BatchJob{ID: j.ID, Payload: j.Payload, RunAt: j.RunAt}
	}
	rcs, errs := tier.EnqueueBatch(ctx, q, in, mode)
	res := BatchResult{Receipts: make([]BatchReceipt, len(jobs))}
	for i, rc := range rcs {
		out := BatchReceipt{Receipt: Receipt{Mode: mode.String(), Volume: rc.Volume}}
		if rc.ID != 0 {
			out.ID = brand.JOB.Format(rc.ID)
		}
		if errs[i] == nil && mode == accept.Sync {
			lsn := rc.LSN
			out.LSN = &lsn
		}
		if errs[i] != nil {
			out.Error = batchError(errs[i])
		}
		res.Receipts[i] = out
	}
	for _, r := range res.Receipts {
		if r.Error != "" {
			res.Failed++
		}
	}
	return res, nil
}

// batchError is a job's error as its receipt says it: "code: message",
// the code the HTTP API would answer it with (api.Code…) where a caller
// branches on it.
func batchError(err error) string {
	for _, s := range []struct {
		err  error
		code string
	}{
		{accept.ErrIDConflict, api.CodeIDConflict},
		{accept.ErrDiskFull, api.CodeInsufficientStorage},
		{accept.ErrClosed, api.CodeUnavailable},
		{context.Canceled, api.CodeUnavailable},
		{context.DeadlineExceeded, api.CodeTimeout},
	} {
		if errors.Is(err, s.err) {
			return s.code + ": " + err.Error()
		}
	}
	return err.Error()
}
