package accept

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Mode is the durability an enqueue asks for.
type Mode uint8

const (
	// Async acknowledges once the intent is recorded in the outbox: a crash
	// loses at most the outbox's K acknowledged records.
	Async Mode = iota + 1
	// Sync acknowledges only after the intent's batch is one Graft commit on
	// the queue's accept volume and that commit is pushed to the remote.
	Sync
)

// String returns "async" or "sync".
func (m Mode) String() string {
	switch m {
	case Async:
		return "async"
	case Sync:
		return "sync"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses "async" or "sync".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "async":
		return Async, nil
	case "sync":
		return Sync, nil
	}
	return 0, fmt.Errorf("%w: mode %q: want async or sync", ErrInvalid, s)
}

// Dispatcher puts a committed job on its queue's job stream. *mq.Client
// implements it; the job's id is the idempotency key, so dispatching a job
// twice enqueues it once.
type Dispatcher interface {
	// EnqueueBatch puts jobs on queue q's job stream, each once: a job
	// whose id it has seen is a duplicate and a no-op, so a batch may be
	// sent again after an error. *mq.Client implements it, one script call
	// per chunk of jobs.
	EnqueueBatch(ctx context.Context, q string, jobs []mq.Job) ([]mq.EnqueueResult, error)
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
	CheckJobID(ctx context.Context, q string, job mq.Job) (known bool, err error)
}

// Page layout of the accept volume (docs/ACCEPT.md, "The accept volume"):
// one page per job at business index n, the n-th job committed to the
// volume; metadata metaNext holds the count of jobs, metaSafe the index below
// which every job is known to be marked committed durably in the outbox.
const (
	pageVersion        = 1 // a job due at once
	pageVersionDelayed = 2 // a job with a run-at
	pageOverhead       = 1 + 8 + 4 + 4
	metaNext           = "accept.next"
	metaSafe           = "accept.safe"
	// PayloadField is the field name under which a dispatched job carries
	// its payload in the job stream.
	PayloadField = "payload"
	// DefaultCommitBatch is the most jobs one commit takes: mq's default
	// claim batch, so that one commit is one consumer's claim.
	DefaultCommitBatch = 64
	// DefaultAsyncEvery is how many async intents wait before the
	// background loop commits them (unless AsyncInterval passes first).
	DefaultAsyncEvery = 1000
	// DefaultAsyncInterval is the time bound of async commits.
	DefaultAsyncInterval = 100 * time.Millisecond
	// DefaultMaxQueues is the default of TierOptions.MaxQueues.
	DefaultMaxQueues = 1000
	// DefaultGroupWait is the default bound of the group commit's wait for
	// siblings (TierOptions.GroupWait); by default the wait is also never
	// longer than half the duration of the push before it.
	DefaultGroupWait = 2 * time.Millisecond
)

// Job is one job on a page of the accept volume.
type Job struct {
	ID      brand.ID // the job's branded id (JOB), never 0
	Payload []byte   // the payload, UTF-8, as enqueued
	RunAt   int64    // Unix milliseconds before which it is not dispatched; 0: at once
}

// EncodeJobPage returns the page bytes of one job due at once (version 1).
func EncodeJobPage(id brand.ID, payload []byte) []byte {
	return EncodeJob(Job{ID: id, Payload: payload})
}

// EncodeJob returns the page bytes of one job: version 1 if it is due at
// once, version 2 (with its run-at) otherwise.
func EncodeJob(j Job) []byte {
	b := make([]byte, 0, pageOverhead+8+len(j.Payload))
	if j.RunAt != 0 {
		b = append(b, pageVersionDelayed)
		b = binary.LittleEndian.AppendUint64(b, uint64(j.ID))
		b = binary.LittleEndian.AppendUint64(b, uint64(j.RunAt))
	} else {
		b = append(b, pageVersion)
		b = binary.LittleEndian.AppendUint64(b, uint64(j.ID))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(j.Payload)))
	b = append(b, j.Payload...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeJobPage decodes a page of the accept volume into its job's id and
// payload (see DecodeJob for the run-at); any other bytes give an error
// wrapping ErrCorrupt (or ErrVersion).
func DecodeJobPage(b []byte) (brand.ID, []byte, error) {
	j, err := DecodeJob(b)
	return j.ID, j.Payload, err
}

// DecodeJob decodes a page of the accept volume, version 1 or 2; any other
// bytes give an error wrapping ErrCorrupt (or ErrVersion). The payload is
// a copy.
func DecodeJob(b []byte) (Job, error) {
	if len(b) < pageOverhead {
		return Job{}, fmt.Errorf("%w: job page of %d bytes", ErrCorrupt, len(b))
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return Job{}, fmt.Errorf("%w: job page checksum", ErrCorrupt)
	}
	j := Job{ID: brand.ID(binary.LittleEndian.Uint64(b[1:]))}
	body := b[9 : len(b)-4]
	switch b[0] {
	case pageVersion:
	case pageVersionDelayed:
		if len(body) < 8+4 {
			return Job{}, fmt.Errorf("%w: job page structure", ErrCorrupt)
		}
		if j.RunAt = int64(binary.LittleEndian.Uint64(body)); j.RunAt <= 0 {
			return Job{}, fmt.Errorf("%w: job page run-at %d", ErrCorrupt, j.RunAt)
		}
		body = body[8:]
	default:
		return Job{}, fmt.Errorf("%w: job page version %d", ErrVersion, b[0])
	}
	n := binary.LittleEndian.Uint32(body)
	if uint64(n) != uint64(len(body)-4) || j.ID == 0 {
		return Job{}, fmt.Errorf("%w: job page structure", ErrCorrupt)
	}
	j.Payload = bytes.Clone(body[4 : 4+n])
	return j, nil
}

// TierOptions configure a Tier. Zero fields take their defaults.
type TierOptions struct {
	// Node is this node's number: the accept volume of queue Q is accept.Q.Node.
	Node uint16
	// Minter mints job ids (JOB); default a Minter for Node.
	Minter *brand.Minter
	// CommitBatch is the most jobs one Graft commit takes (default
	// DefaultCommitBatch, mq's claim batch). A committer that finds more
	// pending commits them in several commits, each pushed alone.
	CommitBatch int
	// AsyncEvery and AsyncInterval trigger the commit of async intents:
	// every AsyncEvery intents or AsyncInterval after the oldest, whichever
	// comes first. Sync intents are committed at once.
	AsyncEvery    int
	AsyncInterval time.Duration
	// GroupWait bounds the group commit's wait for siblings: after a push
	// that acknowledged several sync callers, the committer waits up to
	// this long for as many sync jobs as were waiting then (the callers
	// just acknowledged, enqueueing again, and those already pending) before
	// it takes the next batch, so that they share one push instead of
	// splitting over two. A lone sync caller never waits, nor does a batch
	// once that many jobs are pending. Zero means DefaultGroupWait or half
	// the last push's duration, whichever is shorter; negative, never wait
	// (take what is pending at once).
	GroupWait time.Duration
	// MaxQueues bounds the queues the tier commits for: each has an accept
	// volume, a committer and a dispatcher. An enqueue on a queue new to the
	// tier beyond it is refused with ErrTooManyQueues before anything is
	// recorded. Queues that recovery finds work for are always taken, and
	// count. Zero means DefaultMaxQueues; negative is ErrInvalid.
	MaxQueues int
	// Logger receives warnings (a failed commit, push or dispatch). Default:
	// discard.
	Logger *slog.Logger
}

// Receipt is what an enqueue acknowledges.
type Receipt struct {
	ID     brand.ID // the job's id
	Mode   Mode
	LSN    uint64 // the remote LSN that made the job durable (sync only)
	Volume string // the queue's accept volume
}

// Tier is the two-tier enqueue: the outbox accepts, the queue's accept
// volume commits and the remote replicates, then the job is dispatched to
// its queue's job stream and marked committed in the outbox. One committer
// goroutine per queue takes everything pending (up to CommitBatch) whenever
// it is free, so concurrent sync callers share one commit and one push.
// Safe for concurrent use.
type Tier struct {
	out  *Outbox
	gs   *graft.Store
	rep  Replicator
	disp Dispatcher
	opts TierOptions
	log  *slog.Logger

	ctx    context.Context // ends when Close ends
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: committers stop
	wg     sync.WaitGroup

	mu     sync.Mutex
	queues map[string]*tierQueue
	closed bool
}

type item struct {
	in   Intent
	done chan commitResult // nil for async
}

type commitResult struct {
	lsn uint64
	err error
}

type tierQueue struct {
	name string
	vol  *graft.Volume
	kick chan struct{}

	mu      sync.Mutex
	pending []item
	nsync   int
	// Group commit: want is how many sync jobs the committer waits for
	// before its next take (0: none); Enqueue signals full when nsync
	// reaches it.
	want    int
	full    chan struct{}
	waits   int       // how many times the committer waited for siblings
	oldest  time.Time // when the oldest pending async item arrived
	drains  []chan error
	stopped bool // the committer has stopped: no more waiters

	// committer-only state
	siblings int           // sync callers active at the last push's end, to wait for
	lastPush time.Duration // how long the last push took
	next     uint64        // the next page index
	safe     uint64        // page index below which marks are durable
	dispatch chan []item
	unpushed []item // committed locally, push failed: dispatched after the next push
	carry    []item // (under mu) found on the volume by recovery, not pushed yet

	safeMu  sync.Mutex
	newSafe uint64     // safe index for the next commit
	ends    []uint64   // page index after each batch sent to the dispatcher
	marked  []safeMark // dispatched and marked, waiting for the marks to be durable
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
	q.safeMu.Lock()
	defer q.safeMu.Unlock()
	if len(q.marked) > 0 {
		durable := out.Stats().Durable
		i := 0
		for ; i < len(q.marked) && q.marked[i].durable <= durable; i++ {
			q.newSafe = max(q.newSafe, q.marked[i].end)
		}
		q.marked = q.marked[i:]
	}
	return q.newSafe
}

// NewTier starts the tier over an open outbox, a graft store, a replicator
// and a dispatcher, and recovers: for each queue with intents pending in the
// outbox it pushes the accept volume's unpushed commits, dispatches and marks
// the intents already committed to the volume, and queues the rest for the
// background commit.
func NewTier(ctx context.Context, out *Outbox, gs *graft.Store, rep Replicator, disp Dispatcher, opts TierOptions) (*Tier, error) {
	if out == nil || gs == nil || rep == nil || disp == nil {
		return nil, fmt.Errorf("%w: NewTier needs an outbox, a store, a replicator and a dispatcher", ErrInvalid)
	}
	if opts.CommitBatch <= 0 {
		opts.CommitBatch = DefaultCommitBatch
	}
	if opts.AsyncEvery <= 0 {
		opts.AsyncEvery = DefaultAsyncEvery
	}
	if opts.AsyncInterval <= 0 {
		opts.AsyncInterval = DefaultAsyncInterval
	}
	if opts.MaxQueues < 0 {
		return nil, fmt.Errorf("%w: MaxQueues %d (0 means the default, %d)", ErrInvalid, opts.MaxQueues, DefaultMaxQueues)
	}
	if opts.MaxQueues == 0 {
		opts.MaxQueues = DefaultMaxQueues
	}
	if opts.Minter == nil {
		m, err := brand.NewMinter(int(opts.Node))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		opts.Minter = m
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &Tier{out: out, gs: gs, rep: rep, disp: disp, opts: opts, log: lg,
		ctx: tctx, cancel: cancel, stop: make(chan struct{}), queues: map[string]*tierQueue{}}
	if err := t.recover(ctx); err != nil {
		t.Close(ctx)
		return nil, err
	}
	return t, nil
}

// recover finishes what a previous process left. The accept volume is the
// truth about what was committed: every job on its pages at or above the
// safe index is pushed and dispatched again (the job stream dedups by id)
// and marked in the outbox, whether or not the outbox still holds its
// intent (a sync job is acknowledged before its record is durable in the
// outbox). Intents pending in the outbox that the volume does not hold are
// queued for commit. Dispatch runs in the background.
func (t *Tier) recover(ctx context.Context) error {
	pend, err := t.out.Pending(ctx)
	if err != nil {
		return err
	}
	byQueue := map[string][]Intent{}
	for _, in := range pend {
		t.observeRecovered(in.ID, in.Queue)
		byQueue[in.Queue] = append(byQueue[in.Queue], in)
	}
	vols, err := t.gs.Volumes(ctx)
	if err != nil {
		return fmt.Errorf("accept: recover: %w", err)
	}
	suffix := "." + strconv.Itoa(int(t.opts.Node))
	for _, v := range vols {
		qn, ok := strings.CutPrefix(v.Volume, "accept.")
		if qn, ok = strings.CutSuffix(qn, suffix); ok {
			if _, seen := byQueue[qn]; !seen && names.Check(names.KindQueue, qn) == nil {
				byQueue[qn] = nil
			}
		}
	}
	for qn, ins := range byQueue {
		q, err := t.queue(ctx, qn, true)
		if err != nil {
			return err
		}
		inVol, err := q.committedJobs(ctx)
		if err != nil {
			return err
		}
		seen := make(map[brand.ID]bool, len(inVol))
		for _, it := range inVol {
			seen[it.in.ID] = true
			t.observeRecovered(it.in.ID, qn)
		}
		// What the volume holds is dispatched once it is pushed: now, or
		// after the committer's next successful push. Async enqueues go on
		// meanwhile: a remote that is down does not stop them.
		if _, err := t.rep.Push(ctx, q.vol); err != nil {
			t.log.Warn("accept: recover: push failed; the next commit retries it", "volume", q.vol.Name(), "err", err)
			q.mu.Lock()
			q.carry = inVol
			q.mu.Unlock()
		} else if len(inVol) > 0 {
			q.safeMu.Lock()
			q.ends = append(q.ends, q.next)
			q.safeMu.Unlock()
			q.dispatch <- inVol
		}
		q.mu.Lock()
		for _, in := range ins {
			if seen[in.ID] {
				continue
			}
			if len(q.pending) == 0 {
				q.oldest = time.Now()
			}
			q.pending = append(q.pending, item{in: in})
		}
		q.mu.Unlock()
		q.poke()
	}
	return nil
}

// RecoverLead bounds how far ahead of the clock a job id read back by
// recovery may be and still raise the minter's floor. Ids this node minted
// are not ahead of its clock (but for a clock stepped back between runs);
// explicit ids are admitted only at or below the minter's top; an id far
// ahead can only be a client's, recorded by an older version, and must not
// push the minter there: at the end of the id space, every later mint would
// fail.
const RecoverLead = time.Hour

// observeRecovered raises the minter's floor to id, a job id recovery found,
// unless it lies more than RecoverLead ahead of the clock.
func (t *Tier) observeRecovered(id brand.ID, q string) {
	if !t.opts.Minter.ObserveWithin(id, RecoverLead) {
		t.log.Warn("accept: recover: a job id lies far ahead of the clock; the minter's floor is not raised to it",
			"queue", q, "id", brand.JOB.Format(id), "time", id.Time().Format(time.RFC3339))
	}
}

// committedJobs returns the jobs on the pages at or above the safe index.
func (q *tierQueue) committedJobs(ctx context.Context) ([]item, error) {
	if q.next == q.safe {
		return nil, nil
	}
	snap, err := q.vol.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	var jobs []item
	it := snap.Scan(ctx, q.safe, q.next-1)
	for it.Next() {
		j, err := DecodeJob(it.Value())
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("accept: volume %s page %d: %w", q.vol.Name(), it.Index(), err)
		}
		jobs = append(jobs, item{in: Intent{ID: j.ID, Queue: q.name, Payload: j.Payload, RunAt: j.RunAt}})
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return jobs, nil
}

// queue returns the state of queue qn, opening its volume and starting its
// committer and dispatcher on first use.
func (t *Tier) queue(ctx context.Context, qn string, recovering bool) (*tierQueue, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if q, ok := t.queues[qn]; ok {
		return q, nil
	}
	vn, err := names.AcceptVolume(qn, t.opts.Node)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !recovering && len(t.queues) >= t.opts.MaxQueues {
		return nil, fmt.Errorf("%w: queue %q would be queue %d, and the tier takes at most %d; raise the limit (TierOptions.MaxQueues; serve: max_queues in its config) or use fewer queues",
			ErrTooManyQueues, qn, len(t.queues)+1, t.opts.MaxQueues)
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
		q.next, err = metaUint(ctx, snap, metaNext)
		if err == nil {
			q.safe, err = metaUint(ctx, snap, metaSafe)
		}
		snap.Close()
		if err != nil {
			return nil, fmt.Errorf("accept: volume %s: %w", vn, err)
		}
	}
	q.newSafe = q.safe
	t.queues[qn] = q
	t.wg.Add(2)
	go t.committer(q)
	go t.dispatcher(q)
	return q, nil
}

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

func (q *tierQueue) poke() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
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
func (t *Tier) Enqueue(ctx context.Context, q string, id brand.ID, payload []byte, mode Mode) (Receipt, error) {
	return t.EnqueueAt(ctx, q, id, payload, mode, time.Time{})
}

// EnqueueAt is Enqueue of a job that is not due before runAt (the zero
// time: at once). The run-at travels with the job through the outbox and
// the accept volume, so that it survives a crash; the job is dispatched
// after its commit is pushed, as any other, and mq keeps it in the queue's
// delayed set until runAt: it is not on the job stream, and not claimed,
// before then (by the clock of the Dispatcher; run-ats are kept to the
// millisecond). A runAt before 1970 is ErrInvalid.
func (t *Tier) EnqueueAt(ctx context.Context, q string, id brand.ID, payload []byte, mode Mode, runAt time.Time) (Receipt, error) {
	if mode != Async && mode != Sync {
		return Receipt{}, fmt.Errorf("%w: mode %d", ErrInvalid, mode)
	}
	var at int64
	if !runAt.IsZero() {
		if at = runAt.UnixMilli(); at <= 0 {
			return Receipt{}, fmt.Errorf("%w: run-at %s is not after 1970", ErrInvalid, runAt.Format(time.RFC3339Nano))
		}
	}
	if !utf8.Valid(payload) {
		return Receipt{}, fmt.Errorf("%w: payload is not valid UTF-8", ErrInvalid)
	}
	if len(EncodeJob(Job{ID: 1, RunAt: at}))+len(payload) > graft.DefaultMaxPageSize {
		return Receipt{}, fmt.Errorf("%w: payload of %d bytes", ErrTooLarge, len(payload))
	}
	if err := t.disp.CheckJob(streamJob(Intent{Payload: payload})); err != nil {
		if errors.Is(err, mq.ErrTooLarge) {
			return Receipt{}, fmt.Errorf("%w: payload of %d bytes, more than the job stream takes: %w", ErrTooLarge, len(payload), err)
		}
		return Receipt{}, fmt.Errorf("%w: the job stream would refuse it: %w", ErrInvalid, err)
	}
	if err := names.Check(names.KindQueue, q); err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// An explicit id is checked before anything is made for the queue: it
	// may not lie ahead of this node's minter (which could mint it later,
	// for another job), and is a retry or a conflict if a job has it.
	explicit := id != 0
	retry := false
	if explicit {
		if err := t.opts.Minter.Admit(id); err != nil {
			return Receipt{}, &FutureIDError{ID: id, Queue: q, Top: t.opts.Minter.Top(), Err: err}
		}
		var err error
		if retry, err = t.checkID(ctx, Intent{ID: id, Queue: q, Payload: payload, RunAt: at}); err != nil {
			return Receipt{}, err
		}
	}
	tq, err := t.queue(ctx, q, false)
	if err != nil {
		return Receipt{}, err
	}
	in := Intent{ID: id, Queue: q, Payload: payload, RunAt: at}
	if !retry {
		if err := t.gs.CheckRoom(); err != nil { // ErrDiskFull before anything is recorded
			if explicit {
				return Receipt{}, fmt.Errorf("accept: enqueue of %s: %w", brand.JOB.Format(id), err)
			}
			return Receipt{}, fmt.Errorf("accept: enqueue on %s: %w", q, err)
		}
		if explicit {
			err = t.out.Record(ctx, in)
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
			return Receipt{}, err
		}
	}
	if got, ok := t.out.Get(id); ok {
		in = got // the outbox's copy: the caller may reuse payload
	}
	r := Receipt{ID: id, Mode: mode, Volume: tq.vol.Name()}
	if retry && mode == Async {
		return r, nil // pending already: it is committed and dispatched once
	}
	it := item{in: in}
	if mode == Sync {
		it.done = make(chan commitResult, 1)
	}
	tq.mu.Lock()
	if tq.stopped {
		tq.mu.Unlock()
		// Recorded: the next NewTier commits it.
		return r, fmt.Errorf("accept: enqueue of %s: %w", brand.JOB.Format(id), ErrClosed)
	}
	if len(tq.pending) == 0 {
		tq.oldest = time.Now()
	}
	tq.pending = append(tq.pending, it)
	kick := mode == Sync || len(tq.pending) >= t.opts.AsyncEvery
	if mode == Sync {
		tq.nsync++
		if tq.want > 0 && tq.nsync >= tq.want {
			tq.want = 0
			select {
			case tq.full <- struct{}{}:
			default:
			}
		}
	}
	tq.mu.Unlock()
	if kick {
		tq.poke()
	}
	if mode == Async {
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
		return r, fmt.Errorf("accept: sync enqueue of %s: %w", brand.JOB.Format(id), ctx.Err())
	}
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
		err = t.out.Record(ctx, in)
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

// Drain commits and pushes everything pending on every queue now and
// returns once it is pushed (dispatch follows in the background).
func (t *Tier) Drain(ctx context.Context) error {
	t.mu.Lock()
	qs := make([]*tierQueue, 0, len(t.queues))
	for _, q := range t.queues {
		qs = append(qs, q)
	}
	t.mu.Unlock()
	var errs []error
	for _, q := range qs {
		ch := make(chan error, 1)
		q.mu.Lock()
		if q.stopped {
			q.mu.Unlock()
			return ErrClosed
		}
		q.drains = append(q.drains, ch)
		q.mu.Unlock()
		q.poke()
		select {
		case err := <-ch:
			errs = append(errs, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// Close stops the committers, lets the dispatchers finish the batches
// already committed and pushed, and returns. Intents not yet committed stay
// pending in the outbox for the next NewTier (Drain first to commit them).
// If ctx ends before the dispatchers finish, they are cancelled (what they
// had not marked is re-dispatched by the next NewTier). It does not close
// the outbox, the store or the dispatcher.
func (t *Tier) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	close(t.stop)
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		t.cancel()
		return nil
	case <-ctx.Done():
		t.cancel()
		<-done
		return fmt.Errorf("accept: tier close: %w", ctx.Err())
	}
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
		q.mu.Lock()
		wait := t.opts.AsyncInterval
		if len(q.pending) > 0 {
			wait = max(time.Millisecond, t.opts.AsyncInterval-time.Since(q.oldest))
		}
		q.mu.Unlock()
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
	s := q.siblings
	q.siblings = 0
	if wait < 0 || s <= 1 {
		q.settle()
		return
	}
	if wait == 0 {
		wait = min(DefaultGroupWait, q.lastPush/2)
	}
	q.mu.Lock()
	if q.nsync >= s || wait <= 0 {
		q.mu.Unlock()
		return
	}
	q.want = s
	q.waits++
	q.mu.Unlock()
	timer := time.NewTimer(wait)
	select {
	case <-q.full:
	case <-timer.C:
	case <-stop:
	}
	timer.Stop()
	q.mu.Lock()
	q.want = 0
	q.mu.Unlock()
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

func (q *tierQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// take returns the next batch to commit (empty if nothing is due), the
// drain requests it satisfies, and whether more is due after it.
func (q *tierQueue) take(o TierOptions) (batch []item, drains []chan error, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	due := q.nsync > 0 || len(q.drains) > 0 || len(q.pending) >= o.AsyncEvery ||
		(len(q.pending) > 0 && time.Since(q.oldest) >= o.AsyncInterval)
	if !due || len(q.pending) == 0 {
		drains, q.drains = q.drains, nil
		return nil, drains, false
	}
	n := min(len(q.pending), o.CommitBatch)
	batch = make([]item, n)
	copy(batch, q.pending[:n])
	q.pending = append(q.pending[:0], q.pending[n:]...)
	for _, it := range batch {
		if it.done != nil {
			q.nsync--
		}
	}
	if len(q.pending) == 0 {
		drains, q.drains = q.drains, nil
	} else {
		q.oldest = time.Now()
	}
	return batch, drains, len(q.pending) > 0
}

// commit writes batch as one commit of q's volume, pushes it, wakes the
// sync callers with the remote LSN and hands the batch to the dispatcher.
func (t *Tier) commit(q *tierQueue, batch []item) error {
	ctx := t.ctx
	safe := q.safeIndex(t.out)
	txn := q.vol.Begin()
	var err error
	for i, it := range batch {
		if err = txn.Put(q.next+uint64(i), EncodeJob(Job{ID: it.in.ID, Payload: it.in.Payload, RunAt: it.in.RunAt})); err != nil {
			break
		}
	}
	next := q.next + uint64(len(batch))
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
		q.mu.Lock()
		back := make([]item, 0, len(batch)+len(q.pending))
		for _, it := range batch {
			back = append(back, item{in: it.in})
		}
		q.pending = append(back, q.pending...)
		q.oldest = time.Now()
		q.mu.Unlock()
		wake(batch, commitResult{err: err})
		return err
	}
	q.next, q.safe = next, safe
	pushStart := time.Now()
	lsn, err := t.rep.Push(ctx, q.vol)
	q.lastPush = time.Since(pushStart)
	if err != nil {
		// The commit is local; the next push publishes it, and only then is
		// it dispatched (a restart finds it on the volume).
		for _, it := range batch {
			q.unpushed = append(q.unpushed, item{in: it.in})
		}
		wake(batch, commitResult{err: err})
		return err
	}
	// The siblings to wait for: the callers woken now and those already
	// waiting (counted before the wake, so a woken caller that enqueues
	// again at once is not counted twice).
	q.mu.Lock()
	waiting := q.nsync
	carry := q.carry
	q.carry = nil
	q.mu.Unlock()
	woken := wake(batch, commitResult{lsn: lsn})
	q.siblings = min(woken+waiting, t.opts.CommitBatch)
	if len(carry)+len(q.unpushed) > 0 {
		batch = append(append(carry, q.unpushed...), batch...)
		q.unpushed = nil
	}
	q.safeMu.Lock()
	q.ends = append(q.ends, next)
	q.safeMu.Unlock()
	select {
	case q.dispatch <- batch:
	case <-ctx.Done():
	}
	return nil
}

// wake sends r to the sync callers of batch and returns how many it woke.
// streamJob is the job stream's job for intent in: its id, its payload as
// the field PayloadField, and its run-at.
func streamJob(in Intent) mq.Job {
	j := mq.Job{ID: in.ID, Fields: []mq.Field{{Name: PayloadField, Value: string(in.Payload)}}}
	if in.RunAt != 0 {
		j.RunAt = time.UnixMilli(in.RunAt)
	}
	return j
}

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

func (t *Tier) failWaiters(q *tierQueue, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, it := range q.pending {
		if it.done != nil {
			it.done <- commitResult{err: err}
			q.pending[i].done = nil
		}
	}
	for _, d := range q.drains {
		d <- err
	}
	q.drains, q.nsync, q.stopped = nil, 0, true
}

// dispatcher puts committed batches on the job stream and marks them
// committed in the outbox; once those marks are durable (by the outbox's
// own flushes: the dispatcher forces none) the safe index may move to the
// batches' end (safeIndex). Batches that queued up while it worked go
// together. After a batch it could not finish it stops advancing the safe
// index, so that a restart looks at every page since.
func (t *Tier) dispatcher(q *tierQueue) {
	defer t.wg.Done()
	stuck := false
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
		q.safeMu.Lock()
		end := q.ends[n-1]
		q.ends = q.ends[n:]
		q.safeMu.Unlock()
		if stuck || !t.dispatch(t.ctx, q, batch) {
			stuck = true
			continue
		}
		durable := t.out.Stats().Appended
		q.safeMu.Lock()
		q.marked = append(q.marked, safeMark{durable: durable, end: end})
		q.safeMu.Unlock()
	}
}

// dispatch enqueues every job of batch on the job stream, in one
// EnqueueBatch, retrying the whole batch until it succeeds or ctx ends (the
// jobs that landed come back as duplicates), and marks the jobs committed
// in the outbox. It reports whether all of it was done.
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
			break
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
	ids := make([]brand.ID, len(batch))
	for i, it := range batch {
		ids[i] = it.in.ID
	}
	if _, err := t.out.MarkCommitted(ctx, ids...); err != nil {
		t.log.Warn("accept: mark committed", "queue", q.name, "err", err)
		return false
	}
	return true
}
