package accept

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Receipt is what an enqueue acknowledges.
type Receipt struct {
	ID     brand.ID // the job's id
	Mode   Mode
	LSN    uint64 // the remote LSN that made the job durable (sync only)
	Volume string // the queue's accept volume
}

// Enqueue accepts one job, payload, on queue q. An id of 0 is minted (JOB);
// give the id of an earlier attempt to retry it idempotently: the same id
// with the same payload on the same queue is a success whether the job is
// still pending in the outbox or already dispatched (the job stream dedups
// by id), and is enqueued once; with another payload (or on another queue
// while the job is pending in the outbox: ids are queue-wide in the job
// stream, outbox-wide before) it is refused with ErrIDConflict before
// anything is recorded. With
// Async it returns once the intent is recorded in the outbox; with Sync
// once the batch holding it is one commit of the queue's accept volume and
// pushed, and the receipt carries that push's remote LSN. A Sync call whose
// ctx ends, or that gets an error after Record, leaves the job accepted:
// it is committed and dispatched later, at least once; the Receipt returned
// with such an error carries the job's ID (and no LSN).
func (t *Tier) Enqueue(ctx context.Context, q names.Queue, id brand.ID, payload []byte, mode Mode) (Receipt, error) {
	return t.EnqueueAt(ctx, q, id, payload, mode, time.Time{})
}

// EnqueueAt is Enqueue of a job that is not due before runAt (the zero
// time: at once). The run-at travels with the job through the outbox and
// the accept volume, so that it survives a crash; the job is dispatched
// after its commit is pushed, as any other, and mq keeps it in the queue's
// delayed set until runAt: it is not on the job stream, and not claimed,
// before then (by the clock of the Dispatcher; run-ats are kept to the
// millisecond). A runAt before 1970 is ErrInvalid.
func (t *Tier) EnqueueAt(ctx context.Context, q names.Queue, id brand.ID, payload []byte, mode Mode, runAt time.Time) (Receipt, error) {
	tq, it, r, err := t.admit(ctx, q, id, payload, mode, runAt)
	if err != nil || it == nil {
		return r, err
	}
	if err := t.submit(tq, []item{*it}, mode); err != nil {
		return r, fmt.Errorf("accept: enqueue of %s: %w", brand.JOB.Format(r.ID), err)
	}
	return t.await(ctx, *it, r)
}

// BatchJob is one job of EnqueueBatch: its id (0: minted), payload and
// run-at (the zero time: at once), as EnqueueAt takes them.
type BatchJob struct {
	ID      brand.ID
	Payload []byte
	RunAt   time.Time
}

// EnqueueBatch is EnqueueAt of each of jobs on q, in mode, handed to the
// queue's committer together: a Sync batch is one commit round, or as few
// as the committer's batch size makes it, where one EnqueueAt after
// another would wait a round each. It answers a receipt and an error a
// job, in order, as EnqueueAt would answer each (a job refused is its own
// error; the others go on). The caller checks the jobs first
// (CheckEnqueue) to refuse a bad batch whole.
func (t *Tier) EnqueueBatch(ctx context.Context, q names.Queue, jobs []BatchJob, mode Mode) ([]Receipt, []error) {
	rs := make([]Receipt, len(jobs))
	errs := make([]error, len(jobs))
	its := make([]*item, len(jobs))
	var tq *tierQueue
	var batch []item
	for i, j := range jobs {
		var err error
		var qq *tierQueue
		qq, its[i], rs[i], err = t.admit(ctx, q, j.ID, j.Payload, mode, j.RunAt)
		if err != nil {
			errs[i] = err
			continue
		}
		if its[i] != nil {
			tq = qq
			batch = append(batch, *its[i])
		}
	}
	if len(batch) == 0 {
		return rs, errs
	}
	if err := t.submit(tq, batch, mode); err != nil {
		for i, it := range its {
			if it != nil {
				errs[i] = fmt.Errorf("accept: enqueue of %s: %w", brand.JOB.Format(rs[i].ID), err)
			}
		}
		return rs, errs
	}
	for i, it := range its {
		if it != nil {
			rs[i], errs[i] = t.await(ctx, *it, rs[i])
		}
	}
	return rs, errs
}

// admit checks and records one job of EnqueueAt and returns its queue,
// the item to hand to the committer (nil when there is none: an Async
// retry of a job still pending) and its receipt so far.
func (t *Tier) admit(ctx context.Context, q names.Queue, id brand.ID, payload []byte, mode Mode, runAt time.Time) (*tierQueue, *item, Receipt, error) {
	if err := t.CheckEnqueue(q, id, payload, mode, runAt); err != nil {
		return nil, nil, Receipt{}, err
	}
	var at int64
	if !runAt.IsZero() {
		at = runAt.UnixMilli()
	}
	// An explicit id is checked before anything is made for the queue: it
	// may not lie ahead of this node's minter (CheckEnqueue), and is a
	// retry or a conflict if a job has it.
	explicit := id != 0
	retry := false
	if explicit {
		var err error
		if retry, err = t.checkID(ctx, Intent{ID: id, Queue: q, Payload: payload, RunAt: at}); err != nil {
			return nil, nil, Receipt{}, err
		}
	}
	tq, err := t.queue(ctx, q, false)
	if err != nil {
		return nil, nil, Receipt{}, err
	}
	in := Intent{ID: id, Queue: q, Payload: payload, RunAt: at}
	if !retry {
		if err := t.gs.CheckRoom(); err != nil { // ErrDiskFull before anything is recorded
			if explicit {
				return nil, nil, Receipt{}, fmt.Errorf("accept: enqueue of %s: %w", brand.JOB.Format(id), err)
			}
			return nil, nil, Receipt{}, fmt.Errorf("accept: enqueue on %s: %w", q, err)
		}
		if explicit {
			var kept Intent
			kept, err = t.out.record(ctx, in)
			if err == nil {
				in = kept // the outbox's copy: the caller may reuse payload
			}
			if errors.Is(err, ErrDuplicate) {
				// Recorded meanwhile by a concurrent enqueue of the id.
				retry, err = t.checkID(ctx, in)
				if err == nil && !retry {
					err = fmt.Errorf("accept: record %s: %w", brand.JOB.Format(id), ErrDuplicate)
				}
			}
		} else {
			in, err = t.recordMinted(ctx, in)
			id = in.ID
		}
		if err != nil {
			return nil, nil, Receipt{}, err
		}
	}
	if retry {
		if got, ok := t.out.Get(id); ok {
			in = got // the outbox's copy: the caller may reuse payload
		}
	}
	r := Receipt{ID: id, Mode: mode, Volume: tq.vol.Name().String()}
	if retry && mode == Async {
		return tq, nil, r, nil // pending already: it is committed and dispatched once
	}
	it := &item{in: in}
	if mode == Sync {
		it.done = make(chan commitResult, 1)
	}
	return tq, it, r, nil
}

// submit hands items, admitted on tq, to its committer, and kicks it
// when mode or the intake's size asks for a commit now. Once the tier is
// stopped it fails with ErrClosed: the items are recorded, and the next
// NewTier commits them.
func (t *Tier) submit(tq *tierQueue, items []item, mode Mode) error {
	qi := &tq.intake
	qi.mu.Lock()
	if qi.stopped {
		qi.mu.Unlock()
		return ErrClosed
	}
	if len(qi.pending) == 0 {
		qi.oldest = time.Now()
	}
	qi.pending = append(qi.pending, items...)
	kick := mode == Sync || len(qi.pending) >= t.opts.AsyncEvery
	if mode == Sync {
		qi.nsync += len(items)
		if qi.want > 0 && qi.nsync >= qi.want {
			qi.want = 0
			select {
			case tq.full <- struct{}{}:
			default:
			}
		}
	}
	qi.cond.Broadcast()
	qi.mu.Unlock()
	if kick {
		tq.poke()
	}
	return nil
}

// await answers a submitted item's receipt r: at once for Async, once
// its commit is pushed for Sync (with the push's LSN).
func (t *Tier) await(ctx context.Context, it item, r Receipt) (Receipt, error) {
	if it.done == nil {
		return r, nil
	}
	select {
	case res := <-it.done:
		if res.err != nil {
			return r, res.err
		}
		r.LSN = res.lsn
		return r, nil
	case <-ctx.Done():
		return r, fmt.Errorf("accept: sync enqueue of %s: %w", brand.JOB.Format(r.ID), ctx.Err())
	}
}

// CheckEnqueue reports the error EnqueueAt would refuse the job with for
// what it is alone, without recording or sending anything: a bad mode or
// run-at, a payload that is not UTF-8 or too large for a page or the job
// stream (ErrInvalid, ErrTooLarge), no queue, an explicit id ahead of the
// node's minter (*FutureIDError). A batch checks every job with it before
// it enqueues any. Whether an explicit id is a retry or a conflict needs
// the outbox and the job stream: EnqueueAt tells.
func (t *Tier) CheckEnqueue(q names.Queue, id brand.ID, payload []byte, mode Mode, runAt time.Time) error {
	if mode != Async && mode != Sync {
		return fmt.Errorf("%w: mode %d", ErrInvalid, mode)
	}
	var at int64
	if !runAt.IsZero() {
		if at = runAt.UnixMilli(); at <= 0 {
			return fmt.Errorf("%w: run-at %s is not after 1970", ErrInvalid, runAt.Format(time.RFC3339Nano))
		}
	}
	if !utf8.Valid(payload) {
		return fmt.Errorf("%w: payload is not valid UTF-8", ErrInvalid)
	}
	if len(EncodeJob(Job{ID: 1, RunAt: at}))+len(payload) > graft.DefaultMaxPageSize {
		return fmt.Errorf("%w: payload of %d bytes", ErrTooLarge, len(payload))
	}
	if err := t.disp.CheckJob(streamJob(Intent{Payload: payload})); err != nil {
		if errors.Is(err, mq.ErrTooLarge) {
			return fmt.Errorf("%w: payload of %d bytes, more than the job stream takes: %w", ErrTooLarge, len(payload), err)
		}
		return fmt.Errorf("%w: the job stream would refuse it: %w", ErrInvalid, err)
	}
	if q.IsZero() {
		return fmt.Errorf("%w: no queue: %w", ErrInvalid, names.ErrInvalid)
	}
	if id != 0 {
		if err := t.opts.Minter.Admit(id); err != nil {
			return &FutureIDError{ID: id, Queue: q, Top: t.opts.Minter.Top(), Err: err}
		}
	}
	return nil
}

// mintAttempts bounds recordMinted's loop. With explicit ids admitted only
// at or below the minter's top, a minted id is in the outbox already only if
// an older version accepted a client's id ahead of the clock; each attempt
// moves past one such id.
const mintAttempts = 16

// recordMinted mints an id for in and records it in the outbox. A minted id
// never takes over another job: if the outbox holds the id already (an
// intent recorded under an explicit id by an older version, or one that
// recovery did not observe), it mints again, a bounded number of times.
func (t *Tier) recordMinted(ctx context.Context, in Intent) (Intent, error) {
	var last error
	for range mintAttempts {
		id, err := t.opts.Minter.Mint()
		if err != nil {
			return in, fmt.Errorf("accept: mint: %w", err)
		}
		in.ID = id
		kept, err := t.out.record(ctx, in)
		if err == nil {
			return kept, nil // the outbox's copy: the caller may reuse payload
		}
		if !errors.Is(err, ErrDuplicate) {
			return in, err
		}
		last = err
		t.log.Warn("accept: a freshly minted job id is taken in the outbox; minting another", "queue", in.Queue, "id", brand.JOB.Format(id))
	}
	return in, fmt.Errorf("accept: enqueue on %s: %d minted ids in a row were taken: %w", in.Queue, mintAttempts, last)
}

// checkID reports whether in, enqueued under an explicit id, is a retry of
// a job the tier has: pending in the outbox with the same queue and
// payload (retry; the intent is not recorded again), or remembered by the
// job stream with the same payload (not a retry: the intent is recorded,
// committed and pushed again, and its dispatch is a duplicate). An
// earlier job under the id with another payload, or on another queue, is
// ErrIDConflict.
func (t *Tier) checkID(ctx context.Context, in Intent) (retry bool, err error) {
	name := brand.JOB.Format(in.ID)
	if got, ok := t.out.Get(in.ID); ok {
		if got.Queue != in.Queue {
			return false, fmt.Errorf("accept: enqueue of %s on %s: %w: the id is a job of queue %s; give the job another id",
				name, in.Queue, ErrIDConflict, got.Queue)
		}
		if !bytes.Equal(got.Payload, in.Payload) {
			return false, fmt.Errorf("accept: enqueue of %s on %s: %w: the id is a job with another payload; give the job another id, or retry it with its own payload",
				name, in.Queue, ErrIDConflict)
		}
		return true, nil
	}
	if _, err := t.disp.CheckJobID(ctx, in.Queue, streamJob(in)); err != nil {
		if errors.Is(err, mq.ErrIDConflict) {
			return false, fmt.Errorf("accept: enqueue of %s on %s: %w: %w", name, in.Queue, ErrIDConflict, err)
		}
		return false, fmt.Errorf("accept: enqueue of %s on %s: check the id: %w", name, in.Queue, err)
	}
	return false, nil
}
