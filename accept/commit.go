package accept

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/echostore/echostore/graft"
)

// item is one intent on its way through the committer: pending in the
// intake, then in a batch.
type item struct {
	in   Intent
	done chan commitResult // nil for async
}

// commitResult is what a sync caller is woken with: the remote LSN of the
// push that made its job durable, or why it was not.
type commitResult struct {
	lsn uint64
	err error
}

// committer is the one goroutine that commits queue q.
func (t *Tier) committer(q *tierQueue) {
	defer t.wg.Done()
	defer close(q.dispatch)
	timer := time.NewTimer(t.opts.AsyncInterval)
	defer timer.Stop()
	for {
		select {
		case <-t.stop:
			t.failWaiters(q, fmt.Errorf("accept: tier closed: %w", ErrClosed))
			return
		case <-q.kick:
		case <-timer.C:
		}
		for t.ctx.Err() == nil {
			q.gather(t.opts.GroupWait, t.stop)
			batch, drains, due := q.take(t.opts)
			if len(batch) > 0 {
				err := t.commit(q, batch)
				if err != nil {
					t.log.Warn("accept: commit", "volume", q.vol.Name(), "jobs", len(batch), "err", err)
				}
				if len(drains) > 0 && err != nil {
					for _, d := range drains {
						d <- err
					}
					drains = nil
				}
				if err != nil {
					break
				}
			}
			for _, d := range drains {
				d <- nil
			}
			if !due {
				break
			}
		}
		q.intake.mu.Lock()
		wait := t.opts.AsyncInterval
		if len(q.intake.pending) > 0 {
			wait = max(time.Millisecond, t.opts.AsyncInterval-time.Since(q.intake.oldest))
		}
		q.intake.mu.Unlock()
		timer.Reset(wait)
	}
}

// gather is the group commit's wait for siblings, before a take. The
// sync callers the last push acknowledged are typically enqueueing again
// right now (on a 2-core machine it takes them a few hundred microseconds
// to be scheduled); a take that comes before them commits a fraction of
// them and leaves the rest to the next push, which halves what one push
// carries. So after a push that found s > 1 sync callers active (those it
// acknowledged and those pending), the committer waits until s sync jobs
// are pending, for at most wait (by default DefaultGroupWait and never
// more than half that push's duration). This is PostgreSQL's commit_delay with
// commit_siblings, bounded by the push it amortises: the wait can add at
// most half a push to a caller's latency, and only while others share the
// push. A lone caller (s = 1) never waits, nor does anyone once s are
// pending. With wait < 0 it only yields (settle).
func (q *tierQueue) gather(wait time.Duration, stop <-chan struct{}) {
	s := q.cs.siblings
	q.cs.siblings = 0
	if wait < 0 || s <= 1 {
		q.settle()
		return
	}
	if wait == 0 {
		wait = min(DefaultGroupWait, q.cs.lastPush/2)
	}
	q.intake.mu.Lock()
	if q.intake.nsync >= s || wait <= 0 {
		q.intake.mu.Unlock()
		return
	}
	q.intake.want = s
	q.intake.waits++
	q.intake.cond.Broadcast()
	q.intake.mu.Unlock()
	timer := time.NewTimer(wait)
	select {
	case <-q.full:
	case <-timer.C:
	case <-stop:
	}
	timer.Stop()
	q.intake.mu.Lock()
	q.intake.want = 0
	q.intake.cond.Broadcast()
	q.intake.mu.Unlock()
	select { // a signal that raced the timer
	case <-q.full:
	default:
	}
}

// settle lets the sync callers just woken (on the other core) record their
// next job before the take: it yields while the pending list still grows
// across a yield, a few times at most. It never waits for a batch to
// fill: a lone caller costs one yield.
func (q *tierQueue) settle() {
	n := q.len()
	for range 8 {
		runtime.Gosched()
		m := q.len()
		if m == n {
			return
		}
		n = m
	}
}

// len returns how many items are pending in q's intake.
func (q *tierQueue) len() int {
	q.intake.mu.Lock()
	defer q.intake.mu.Unlock()
	return len(q.intake.pending)
}

// take returns the next batch to commit (empty if nothing is due), the
// drain requests it satisfies, and whether more is due after it. A batch
// is at most CommitBatch items, or, when those are all async, up to
// AsyncCommitBatch items ending before the next sync one.
func (q *tierQueue) take(o TierOptions) (batch []item, drains []chan error, more bool) {
	q.intake.mu.Lock()
	defer q.intake.mu.Unlock()
	due := q.intake.nsync > 0 || len(q.intake.drains) > 0 || len(q.intake.pending) >= o.AsyncEvery ||
		(len(q.intake.pending) > 0 && time.Since(q.intake.oldest) >= o.AsyncInterval)
	if !due || len(q.intake.pending) == 0 {
		drains, q.intake.drains = q.intake.drains, nil
		return nil, drains, false
	}
	defer q.intake.cond.Broadcast()
	n := min(len(q.intake.pending), o.CommitBatch)
	if n == o.CommitBatch && o.AsyncCommitBatch > n && !anySync(q.intake.pending[:n]) {
		// Async work alone: a larger commit, up to the next sync job.
		for n < len(q.intake.pending) && n < o.AsyncCommitBatch && q.intake.pending[n].done == nil {
			n++
		}
	}
	batch = make([]item, n)
	copy(batch, q.intake.pending[:n])
	q.intake.pending = append(q.intake.pending[:0], q.intake.pending[n:]...)
	for _, it := range batch {
		if it.done != nil {
			q.intake.nsync--
		}
	}
	if len(q.intake.pending) == 0 {
		drains, q.intake.drains = q.intake.drains, nil
	} else {
		q.intake.oldest = time.Now()
	}
	return batch, drains, len(q.intake.pending) > 0
}

// anySync reports whether a sync caller waits for an item of items.
func anySync(items []item) bool {
	for _, it := range items {
		if it.done != nil {
			return true
		}
	}
	return false
}

// commit writes batch as one commit of q's volume, pushes it, wakes the
// sync callers with the remote LSN and hands the batch to the dispatcher.
func (t *Tier) commit(q *tierQueue, batch []item) error {
	ctx := t.ctx
	safe := q.safeIndex(t.out)
	txn := q.vol.Begin()
	var err error
	for i, it := range batch {
		if err = txn.Put(q.cs.next+uint64(i), EncodeJob(Job{ID: it.in.ID, Payload: it.in.Payload, RunAt: it.in.RunAt})); err != nil {
			break
		}
	}
	next := q.cs.next + uint64(len(batch))
	if err == nil {
		err = txn.SetMeta(metaNext, binary.LittleEndian.AppendUint64(nil, next))
	}
	if err == nil {
		err = txn.SetMeta(metaSafe, binary.LittleEndian.AppendUint64(nil, safe))
	}
	if err != nil {
		txn.Discard()
	} else {
		// Unsynced: the push that follows records its pending remote commit
		// with a synced write, which makes this commit durable before the
		// remote sees it (one write-ahead log, in order). A crash before
		// that loses a commit nobody was told about: its intents are still
		// in the outbox (or were never acknowledged) and are committed again.
		_, err = txn.Commit(ctx, graft.Unsynced)
	}
	if err != nil {
		// Nothing landed: the intents go back to the front, as async.
		err = fmt.Errorf("accept: commit to %s: %w", q.vol.Name(), err)
		q.intake.mu.Lock()
		back := make([]item, 0, len(batch)+len(q.intake.pending))
		for _, it := range batch {
			back = append(back, item{in: it.in})
		}
		q.intake.pending = append(back, q.intake.pending...)
		q.intake.oldest = time.Now()
		q.intake.cond.Broadcast()
		q.intake.mu.Unlock()
		wake(batch, commitResult{err: err})
		return err
	}
	q.cs.next, q.cs.safe = next, safe
	pushStart := time.Now()
	lsn, err := t.push(ctx, q.vol)
	q.cs.lastPush = time.Since(pushStart)
	if err != nil {
		// The commit is local; the next push publishes it, and only then is
		// it dispatched (a restart finds it on the volume).
		for _, it := range batch {
			q.cs.unpushed = append(q.cs.unpushed, item{in: it.in})
		}
		wake(batch, commitResult{err: err})
		return err
	}
	// The siblings to wait for: the callers woken now and those already
	// waiting (counted before the wake, so a woken caller that enqueues
	// again at once is not counted twice).
	q.intake.mu.Lock()
	waiting := q.intake.nsync
	carry := q.intake.carry
	q.intake.carry = nil
	q.intake.recent.add(len(batch), q.cs.lastPush)
	q.intake.mu.Unlock()
	woken := wake(batch, commitResult{lsn: lsn})
	q.cs.siblings = min(woken+waiting, t.opts.CommitBatch)
	if len(carry)+len(q.cs.unpushed) > 0 {
		batch = append(append(carry, q.cs.unpushed...), batch...)
		q.cs.unpushed = nil
	}
	q.hand(next)
	select {
	case q.dispatch <- batch:
	case <-ctx.Done():
	}
	return nil
}

// wake sends r to the sync callers of batch and returns how many it woke.
func wake(batch []item, r commitResult) int {
	n := 0
	for _, it := range batch {
		if it.done != nil {
			it.done <- r
			n++
		}
	}
	return n
}

// failWaiters stops q's intake for good: every sync caller still pending
// and every drain gets err.
func (t *Tier) failWaiters(q *tierQueue, err error) {
	q.intake.mu.Lock()
	defer q.intake.mu.Unlock()
	for i, it := range q.intake.pending {
		if it.done != nil {
			it.done <- commitResult{err: err}
			q.intake.pending[i].done = nil
		}
	}
	for _, d := range q.intake.drains {
		d <- err
	}
	q.intake.drains, q.intake.nsync, q.intake.stopped = nil, 0, true
	q.intake.cond.Broadcast()
}
