package echostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Enqueue enqueues one job (payload, any JSON value) on queue q through
// the two-tier accept path. Async (the default) acknowledges once the job
// is in the outbox on local disk; Sync once its batch is one commit of the
// queue's accept volume accept.Q.N pushed to the remote (Receipt.LSN is
// the remote LSN that made it durable). The job then goes to the queue's
// job stream; delivery is at least once, keyed by the id. An ID retries an
// earlier enqueue idempotently (the same payload; another one fails
// wrapping accept.ErrIDConflict).
func (n *Node) Enqueue(ctx context.Context, q names.Queue, payload []byte, opts EnqueueOptions) (Receipt, error) {
	if q.IsZero() {
		return Receipt{}, fmt.Errorf("enqueue: no queue: %w", names.ErrInvalid)
	}
	tier, err := n.jobs(ctx)
	if err != nil {
		return Receipt{}, err
	}
	mode := opts.Mode
	if mode == 0 {
		mode = accept.Async
	}
	rc, err := tier.EnqueueAt(ctx, q, opts.ID, payload, mode, opts.RunAt)
	if err != nil {
		return Receipt{}, fmt.Errorf("enqueue on %s: %w", q, err)
	}
	out := Receipt{ID: brand.JOB.Format(rc.ID), Mode: rc.Mode.String(), Volume: rc.Volume}
	if rc.Mode == accept.Sync {
		lsn := rc.LSN
		out.LSN = &lsn
	}
	return out, nil
}

// Claim claims up to opts.Count jobs of queue q for opts.Consumer: first,
// with opts.Stalled, the jobs other consumers claimed and have not
// acknowledged for that long, then new ones. A claim that got some jobs
// before an error returns them without the error.
func (n *Node) Claim(ctx context.Context, q names.Queue, opts ClaimOptions) (ClaimResult, error) {
	live, err := n.live()
	if err != nil {
		return ClaimResult{}, err
	}
	if q.IsZero() {
		return ClaimResult{}, fmt.Errorf("claim: no queue: %w", names.ErrInvalid)
	}
	if opts.Count == 0 {
		opts.Count = 1
	}
	if opts.Count < 1 || opts.Count > MaxBatch {
		return ClaimResult{}, fmt.Errorf("claim count %d: want 1 to %d: %w", opts.Count, MaxBatch, ErrInvalid)
	}
	if opts.Stalled < 0 {
		return ClaimResult{}, fmt.Errorf("claim stalled %v: must not be negative: %w", opts.Stalled, ErrInvalid)
	}
	if opts.Consumer == "" {
		opts.Consumer = "http"
	}
	if err := mq.CheckConsumer(opts.Consumer); err != nil {
		return ClaimResult{}, fmt.Errorf("consumer: %w", err)
	}
	jobs := []Job{}
	var dead int64
	if opts.Stalled > 0 {
		n.declareOutcomes(q)
		rec, err := live.Recover(ctx, q, opts.Consumer, opts.Stalled, opts.Count)
		if err != nil {
			return ClaimResult{}, err
		}
		jobs = append(jobs, rec.Claimed...)
		dead = rec.Dead
	}
	if len(jobs) < opts.Count {
		more, err := live.Claim(ctx, q, opts.Consumer, opts.Count-len(jobs))
		if err != nil && len(jobs)+len(more) == 0 {
			return ClaimResult{}, err
		}
		jobs = append(jobs, more...)
	}
	return ClaimResult{Jobs: jobs, Dead: dead}, nil
}

// Ack acknowledges the job stream entries of queue q (Job.EntryID) and
// returns how many were pending.
func (n *Node) Ack(ctx context.Context, q names.Queue, entries []string) (AckResult, error) {
	live, err := n.live()
	if err != nil {
		return AckResult{}, err
	}
	if q.IsZero() {
		return AckResult{}, fmt.Errorf("ack: no queue: %w", names.ErrInvalid)
	}
	if len(entries) == 0 {
		return AckResult{}, fmt.Errorf("ack: no entries: %w", ErrInvalid)
	}
	n.declareOutcomes(q)
	acked, err := live.Ack(ctx, q, entries...)
	if err != nil {
		return AckResult{}, err
	}
	return AckResult{Acked: acked}, nil
}

// Fail reports that opts.Consumer failed its delivery of the job at
// opts.Entry of queue q: the job leaves the job stream for its next
// attempt after the queue's backoff, or, with its attempts used up, for
// the dead letters with opts.Reason. A job pending no more is no error
// (FailResult.Failed false); one that another consumer has taken over is
// mq.ErrNoJob.
func (n *Node) Fail(ctx context.Context, q names.Queue, opts FailOptions) (FailResult, error) {
	live, err := n.live()
	if err != nil {
		return FailResult{}, err
	}
	switch {
	case q.IsZero():
		return FailResult{}, fmt.Errorf("fail: no queue: %w", names.ErrInvalid)
	case opts.Entry == "":
		return FailResult{}, fmt.Errorf("fail: no entry: %w", ErrInvalid)
	case opts.Attempt < 1:
		return FailResult{}, fmt.Errorf("fail: attempt %d: want the attempt that failed, 1 or more: %w", opts.Attempt, ErrInvalid)
	case len(opts.Reason) > MaxFailReason:
		return FailResult{}, fmt.Errorf("fail: a reason of %d bytes, at most %d: %w", len(opts.Reason), MaxFailReason, ErrInvalid)
	}
	if err := mq.CheckConsumer(opts.Consumer); err != nil {
		return FailResult{}, fmt.Errorf("fail: %w", err)
	}
	if err := mq.CheckEntryID(opts.Entry); err != nil {
		return FailResult{}, fmt.Errorf("fail: %w", err)
	}
	n.declareOutcomes(q)
	fr, err := live.Fail(ctx, q, opts.Consumer, mq.Delivery{EntryID: opts.Entry, Attempt: opts.Attempt}, opts.Reason)
	switch {
	case errors.Is(err, mq.ErrJobNotPending):
		return FailResult{}, nil
	case err != nil:
		return FailResult{}, err
	}
	out := FailResult{Failed: true, Dead: fr.Dead, Attempts: fr.Attempts}
	if !fr.Dead {
		out.RetryAt = &fr.RetryAt
	}
	return out, nil
}

// Dead lists up to opts.Limit (default 100, at most MaxBatch) dead letters
// of queue q after opts.After, oldest first.
func (n *Node) Dead(ctx context.Context, q names.Queue, opts DeadOptions) (DeadResult, error) {
	live, err := n.live()
	if err != nil {
		return DeadResult{}, err
	}
	if q.IsZero() {
		return DeadResult{}, fmt.Errorf("dead: no queue: %w", names.ErrInvalid)
	}
	if opts.Limit == 0 {
		opts.Limit = 100
	}
	if opts.Limit < 1 || opts.Limit > MaxBatch {
		return DeadResult{}, fmt.Errorf("dead limit %d: want 1 to %d: %w", opts.Limit, MaxBatch, ErrInvalid)
	}
	dead, err := live.Dead(ctx, q, opts.After, opts.Limit)
	if err != nil {
		return DeadResult{}, err
	}
	if dead == nil {
		dead = []DeadLetter{}
	}
	return DeadResult{Dead: dead}, nil
}

// Redrive puts dead letters of queue q back on its job stream: the given
// entries, or with All the oldest up to Limit (default and at most
// MaxBatch).
func (n *Node) Redrive(ctx context.Context, q names.Queue, opts RedriveOptions) (RedriveResult, error) {
	live, err := n.live()
	if err != nil {
		return RedriveResult{}, err
	}
	if q.IsZero() {
		return RedriveResult{}, fmt.Errorf("redrive: no queue: %w", names.ErrInvalid)
	}
	if opts.All == (len(opts.Entries) > 0) {
		return RedriveResult{}, fmt.Errorf("redrive: give the entries or All, not both: %w", ErrInvalid)
	}
	if opts.Limit < 0 || opts.Limit > MaxBatch || opts.Limit != 0 && !opts.All {
		return RedriveResult{}, fmt.Errorf("redrive limit %d: want All with 1 to %d (0: %d): %w", opts.Limit, MaxBatch, MaxBatch, ErrInvalid)
	}
	var ids []string
	if opts.All {
		if opts.Limit == 0 {
			opts.Limit = MaxBatch
		}
		ids, err = live.RedriveAll(ctx, q, opts.Limit)
	} else {
		ids, err = live.Redrive(ctx, q, opts.Entries...)
	}
	if err != nil {
		return RedriveResult{}, err
	}
	if ids == nil {
		ids = []string{}
	}
	return RedriveResult{Redriven: len(ids), Entries: ids}, nil
}

// QueueStatus describes queue q: its job stream, pending, delayed and dead
// jobs.
func (n *Node) QueueStatus(ctx context.Context, q names.Queue) (QueueStatus, error) {
	live, err := n.live()
	if err != nil {
		return QueueStatus{}, err
	}
	if q.IsZero() {
		return QueueStatus{}, fmt.Errorf("queue status: no queue: %w", names.ErrInvalid)
	}
	return live.Status(ctx, q)
}

// declareOutcomes declares the outcome stream of q (Config.JobOutcomes)
// with its policy unless it is declared already, before a job of q ends
// a delivery, so that the beat folds and trims what the job scripts
// append to it. A refusal is logged: the job's own operation goes on, and
// the outcome is still appended.
func (n *Node) declareOutcomes(q names.Queue) {
	o := n.cfg.JobOutcomes
	if o.Stream.IsZero() {
		return
	}
	ref, err := names.NewStreamRef(q, o.Stream)
	if err == nil {
		_, err = n.declare(ref, o.policy(), true)
	}
	if err != nil {
		n.log.Warn("echostore: declare the job outcome stream", "queue", q.String(), "stream", o.Stream.String(), "err", err)
	}
}
