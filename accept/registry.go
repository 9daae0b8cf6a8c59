package accept

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// registry is the tier's set of queues, one lock domain of Tier.
type registry struct {
	mu     sync.Mutex
	queues map[names.Queue]*tierQueue // by queue name; a queue, once in, stays
	// closed is set once by Close: no queue is added after it.
	closed bool
}

// all returns the queues of r.
func (r *registry) all() []*tierQueue {
	r.mu.Lock()
	defer r.mu.Unlock()
	qs := make([]*tierQueue, 0, len(r.queues))
	for _, q := range r.queues {
		qs = append(qs, q)
	}
	return qs
}

// tierQueue is one queue of the tier: its accept volume, its committer and
// its dispatcher. Its state falls into three parts by who may touch it.
type tierQueue struct {
	// Set by queue, read-only after.
	name     names.Queue
	vol      *graft.Volume
	kick     chan struct{} // wakes the committer (poke); capacity 1
	full     chan struct{} // intake.want reached (group commit); capacity 1
	dispatch chan []item   // committed and pushed batches, committer to dispatcher

	intake intake         // callers, Drain and recovery to the committer
	cs     committerState // the committer's own
	marks  marks          // the dispatcher back to the committer
}

// intake is what the callers of a queue (Enqueue, Drain, recovery) hand its
// committer, guarded by mu. cond (on mu) is broadcast whenever pending,
// nsync, want or waits change, for whoever waits for a state of the intake
// (the tests).
type intake struct {
	mu   sync.Mutex
	cond sync.Cond

	pending []item // accepted, not yet taken by the committer, in order
	nsync   int    // the items of pending with a sync caller waiting (done != nil)
	// Group commit: want is how many sync jobs the committer waits for
	// before its next take (0: none); Enqueue signals full when nsync
	// reaches it.
	want    int
	waits   int       // how many times the committer waited for siblings
	oldest  time.Time // when the oldest pending async item arrived (valid while pending is not empty)
	drains  []chan error
	stopped bool   // the committer has stopped: no more waiters; never unset
	carry   []item // found on the volume by recovery, not pushed yet: dispatched after the next push
	recent  recent // the latest commits (Tier.Stats)
}

// committerState belongs to the queue's committer goroutine. Recovery
// reads next and safe (committedJobs) before it hands the committer any
// work, which it does before NewTier returns; nothing else touches it.
type committerState struct {
	siblings int           // sync callers active at the last push's end, to wait for
	lastPush time.Duration // how long the last push took
	next     uint64        // the next page index: the volume's count of jobs (metaNext)
	safe     uint64        // page index below which marks are durable (metaSafe of the last commit)
	unpushed []item        // committed locally, push failed: dispatched after the next push
}

// marks is what the queue's dispatcher hands back to its committer: how far
// the outbox marks of dispatched batches reach, for the safe index of the
// next commit (safeIndex). Guarded by mu.
type marks struct {
	mu sync.Mutex
	// cond (on mu) is broadcast whenever finished grows, for whoever waits
	// for the dispatcher to catch up (the tests).
	cond sync.Cond

	newSafe uint64     // safe index for the next commit; never decreases
	ends    []uint64   // page index after each batch handed to the dispatcher and not yet taken by it, in order
	marked  []safeMark // dispatched and marked, waiting for the marks to be durable; ends ascending
	// handed counts the batches handed to the dispatcher (each with its
	// entry in ends), finished those it is done with (marked, or given up
	// after an error): handed − finished are on their way.
	handed, finished uint64
}

// hand records that a batch ending before page index end goes to the
// dispatcher; the caller sends it on q.dispatch next.
func (q *tierQueue) hand(end uint64) {
	q.marks.mu.Lock()
	q.marks.ends = append(q.marks.ends, end)
	q.marks.handed++
	q.marks.mu.Unlock()
}

// queue returns the state of queue qn, opening its volume and starting its
// committer and dispatcher on first use.
func (t *Tier) queue(ctx context.Context, qn names.Queue, recovering bool) (*tierQueue, error) {
	t.reg.mu.Lock()
	defer t.reg.mu.Unlock()
	if t.reg.closed {
		return nil, ErrClosed
	}
	if q, ok := t.reg.queues[qn]; ok {
		return q, nil
	}
	vn, err := names.AcceptVolumeOf(qn, t.opts.Node)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !recovering && len(t.reg.queues) >= t.opts.MaxQueues {
		return nil, fmt.Errorf("%w: queue %q would be queue %d, and the tier takes at most %d; raise the limit (TierOptions.MaxQueues; serve: max_queues in its config) or use fewer queues",
			ErrTooManyQueues, qn, len(t.reg.queues)+1, t.opts.MaxQueues)
	}
	vol, err := t.gs.CreateVolume(ctx, vn)
	if err != nil {
		return nil, fmt.Errorf("accept: volume %s: %w", vn, err)
	}
	q := &tierQueue{name: qn, vol: vol, kick: make(chan struct{}, 1), full: make(chan struct{}, 1), dispatch: make(chan []item, 64)}
	if vol.Head() > 0 {
		snap, err := vol.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		q.cs.next, err = metaUint(ctx, snap, metaNext)
		if err == nil {
			q.cs.safe, err = metaUint(ctx, snap, metaSafe)
		}
		snap.Close()
		if err != nil {
			return nil, fmt.Errorf("accept: volume %s: %w", vn, err)
		}
	}
	q.intake.cond.L = &q.intake.mu
	q.marks.cond.L = &q.marks.mu
	q.marks.newSafe = q.cs.safe
	t.reg.queues[qn] = q
	t.wg.Add(2)
	go t.committer(q)
	go t.dispatcher(q)
	return q, nil
}

// metaUint reads the 8-byte little-endian metadata key of snap (0 if it is
// not set).
func metaUint(ctx context.Context, snap *graft.Snapshot, key string) (uint64, error) {
	b, err := snap.Meta(ctx, key)
	if errors.Is(err, graft.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: metadata %s of %d bytes", ErrCorrupt, key, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// poke wakes q's committer, if it is not awake already.
func (q *tierQueue) poke() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}
