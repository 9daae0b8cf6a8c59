package accept

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// PayloadField is the field name under which a dispatched job carries its
// payload in the job stream.
const PayloadField = "payload"

// Dispatcher puts a committed job on its queue's job stream. *mq.Client
// implements it; the job's id is the idempotency key, so dispatching a job
// twice enqueues it once.
type Dispatcher interface {
	// EnqueueBatch puts jobs on queue q's job stream, each once: a job
	// whose id it has seen is a duplicate and a no-op, so a batch may be
	// sent again after an error. *mq.Client implements it, one script call
	// per chunk of jobs.
	EnqueueBatch(ctx context.Context, q names.Queue, jobs []mq.Job) ([]mq.EnqueueResult, error)
	// CheckJob reports whether EnqueueBatch would refuse job for its
	// fields (*mq.RecordError) without sending anything. Enqueue checks
	// every job with it before recording: a job acknowledged and then
	// refused by the job stream would stop its queue's dispatch.
	CheckJob(job mq.Job) error
	// CheckJobID reports what EnqueueBatch would make of job's id on queue
	// q, without changing anything: known if the id is remembered with the
	// same fields (a retry: a duplicate), an error wrapping
	// mq.ErrIDConflict if with other fields. Enqueue asks it about every
	// explicit id that the outbox does not hold.
	CheckJobID(ctx context.Context, q names.Queue, job mq.Job) (known bool, err error)
}

// safeMark is a safe index the dispatcher reached: every job below end is
// dispatched and marked committed in the outbox, durably once the outbox's
// durable count reaches durable.
type safeMark struct {
	durable uint64 // the outbox's appended count after the marks
	end     uint64
}

// safeIndex returns the safe index for the next commit: the end of the
// newest dispatched batch whose marks the outbox has made durable. The
// dispatcher does not force a flush for this: the outbox's own flushes (K
// records, FlushInterval, or any Flush) make the marks durable, and the
// safe index follows at the next commit.
func (q *tierQueue) safeIndex(out *Outbox) uint64 {
	q.marks.mu.Lock()
	defer q.marks.mu.Unlock()
	if len(q.marks.marked) > 0 {
		durable := out.Stats().Durable
		i := 0
		for ; i < len(q.marks.marked) && q.marks.marked[i].durable <= durable; i++ {
			q.marks.newSafe = max(q.marks.newSafe, q.marks.marked[i].end)
		}
		q.marks.marked = q.marks.marked[i:]
	}
	return q.marks.newSafe
}

// finish records that the dispatcher is done with n batches: dispatched
// and marked up to m, or (m nil) given up.
func (q *tierQueue) finish(n int, m *safeMark) {
	q.marks.mu.Lock()
	if m != nil {
		q.marks.marked = append(q.marks.marked, *m)
	}
	q.marks.finished += uint64(n)
	q.marks.cond.Broadcast()
	q.marks.mu.Unlock()
}

// streamJob is the job stream's job for intent in: its id, its payload as
// the field PayloadField, and its run-at.
func streamJob(in Intent) mq.Job {
	j := mq.Job{ID: in.ID, Fields: []mq.Field{{Name: PayloadField, Value: string(in.Payload)}}}
	if in.RunAt != 0 {
		j.RunAt = time.UnixMilli(in.RunAt)
	}
	return j
}

// dispatcher puts committed batches on the job stream and hands them to
// the queue's marker (marker), which marks them committed in the outbox
// while the dispatcher puts the next batches on the job stream; once those
// marks are durable (by the outbox's own flushes: neither forces one) the
// safe index may move to the batches' end (safeIndex). Batches that queued
// up while it worked go together. After a batch it could not finish (put
// on the job stream, or marked) neither goroutine advances the safe index
// again, so that a restart looks at every page since.
func (t *Tier) dispatcher(q *tierQueue) {
	defer t.wg.Done()
	var stuck atomic.Bool
	marks := make(chan markJob, markAhead)
	t.wg.Add(1)
	go t.marker(q, marks, &stuck)
	defer close(marks)
	for batch := range q.dispatch {
		n := 1
	more:
		for {
			select {
			case b, ok := <-q.dispatch:
				if !ok {
					break more
				}
				batch = append(batch, b...)
				n++
			default:
				break more
			}
		}
		q.marks.mu.Lock()
		end := q.marks.ends[n-1]
		q.marks.ends = q.marks.ends[n:]
		q.marks.mu.Unlock()
		if stuck.Load() || !t.dispatch(t.ctx, q, batch) {
			stuck.Store(true)
			marks <- markJob{n: n}
			continue
		}
		ids := make([]brand.ID, len(batch))
		for i, it := range batch {
			ids[i] = it.in.ID
		}
		marks <- markJob{ids: ids, n: n, end: end}
	}
}

// markAhead is how many dispatched batches may wait for the marker: the
// dispatcher puts the next batch on the job stream while the marker marks
// the ones before it.
const markAhead = 4

// markJob is what the dispatcher hands its marker: n batches ending before
// page index end, whose jobs (ids) are on the job stream; ids nil: given up.
type markJob struct {
	ids []brand.ID
	n   int
	end uint64
}

// marker marks the jobs of the batches the dispatcher put on the job
// stream committed in the outbox, in order, and records how far they reach
// (finish). A failed mark stops it, and the dispatcher after it (stuck):
// every batch after is given up.
func (t *Tier) marker(q *tierQueue, marks <-chan markJob, stuck *atomic.Bool) {
	defer t.wg.Done()
	for m := range marks {
		if m.ids == nil || stuck.Load() {
			q.finish(m.n, nil)
			continue
		}
		if _, err := t.out.MarkCommitted(t.ctx, m.ids...); err != nil {
			t.log.Warn("accept: mark committed", "queue", q.name, "err", err)
			stuck.Store(true)
			q.finish(m.n, nil)
			continue
		}
		q.finish(m.n, &safeMark{durable: t.out.Stats().Appended, end: m.end})
	}
}

// dispatch enqueues every job of batch on the job stream, in one
// EnqueueBatch, retrying the whole batch until it succeeds or ctx ends (the
// jobs that landed come back as duplicates). It reports whether it did.
func (t *Tier) dispatch(ctx context.Context, q *tierQueue, batch []item) bool {
	jobs := make([]mq.Job, len(batch))
	for i, it := range batch {
		jobs[i] = streamJob(it.in)
	}
	backoff := 10 * time.Millisecond
	for {
		res, err := t.disp.EnqueueBatch(ctx, q.name, jobs)
		if err == nil {
			for i, r := range res {
				if r.Conflict {
					// Enqueue checks ids first; only a race with a direct
					// producer of the job stream gets here.
					t.log.Warn("accept: dispatch: the job stream has this job id with another payload; this job is not dispatched",
						"queue", q.name, "job", brand.JOB.Format(jobs[i].ID))
				}
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		t.log.Warn("accept: dispatch", "queue", q.name, "jobs", len(jobs), "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return false
		}
		backoff = min(2*backoff, time.Second)
	}
}
