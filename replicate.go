package echostore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// DefaultReplicateEvery is serve's replicate_every: the most time a local
// commit of a volume waits for the background push that carries it to the
// remote (Config.ReplicateEvery).
const DefaultReplicateEvery = time.Second

// Bounds of the background replication (Config.ReplicateEvery).
const (
	// ReplicateWorkers is how many volumes the background replication
	// pushes at once.
	ReplicateWorkers = 16
	// ReplicateMaxBackoff bounds the wait between the attempts of a
	// volume whose pushes fail, and between the probes of a remote that is
	// unavailable.
	ReplicateMaxBackoff = time.Minute
	// ReplicatePushTimeout bounds one background push.
	ReplicatePushTimeout = time.Minute
	// MaxLagScan is the most unpushed commits ReplicationLag reads to
	// count their records; beyond it Records is unknown (nil).
	MaxLagScan = 10000
)

// ReplicationStats are the counts of the node's background replication
// (Config.ReplicateEvery) since Open.
type ReplicationStats struct {
	// Every is Config.ReplicateEvery (0: off).
	Every time.Duration
	// Pushes are the background pushes that published commits; Failed
	// those that failed (each attempt counted).
	Pushes, Failed int64
	// Outage: the remote failed the last push attempted, and the
	// background replication is backing off until a probe succeeds.
	Outage bool
	// Waiting are the volumes with local commits the background
	// replication has yet to push.
	Waiting int
}

// lagOf returns the replication lag at now of vol, whose Info is in, from
// its sync point and the commit records above it (which GC keeps:
// keep-from never passes the sync point).
func lagOf(ctx context.Context, vol *graft.Volume, in graft.Info, now time.Time) (ReplicationLag, error) {
	var lag ReplicationLag
	if in.LocalLSN <= in.SyncLSN {
		if kind := recordKind(in.Volume); kind != kindNone {
			lag.Records = new(uint64)
		}
		return lag, nil
	}
	lag.Commits = in.LocalLSN - in.SyncLSN
	kind := recordKind(in.Volume)
	to := in.SyncLSN + 1
	if kind != kindNone && lag.Commits <= MaxLagScan {
		to = in.LocalLSN
	}
	commits, err := vol.Commits(ctx, in.SyncLSN+1, to)
	if errors.Is(err, graft.ErrSnapshotGone) {
		// GC collected the commit records above the sync point (a volume
		// never pushed whose GC passed them, or one restarted from a
		// checkpoint): the count alone is known.
		return lag, nil
	}
	if err != nil {
		return lag, fmt.Errorf("replication lag of %s: %w", in.Volume, err)
	}
	if len(commits) > 0 {
		lag.Seconds = max(0, now.Sub(commits[0].Time).Seconds())
	}
	if kind == kindNone || to != in.LocalLSN {
		return lag, nil
	}
	seen := map[uint64]bool{}
	for _, c := range commits {
		for _, p := range c.Pages {
			if (kind == kindArchive) == (p >= graft.ArchiveBase) {
				seen[p] = true
			}
		}
	}
	k := uint64(len(seen))
	lag.Records = &k
	return lag, nil
}

// The kinds of record a volume holds, for ReplicationLag.Records.
const (
	kindNone    = iota
	kindArchive // one archived record per page at ArchiveBase+n
	kindAccept  // one job per page below ArchiveBase
)

func recordKind(v names.Volume) int {
	switch {
	case names.IsArchiveVolume(v):
		return kindArchive
	case strings.HasPrefix(v.String(), "accept."):
		return kindAccept
	}
	return kindNone
}

// replicator is the node's background replication: it pushes every volume
// that has local commits not yet pushed within every of the first of them.
// It learns of commits from the store's own commit events (graft's
// Notifier, wrapped: replicator.notifier), kept in memory, so a quiet
// volume costs nothing, no request to the remote and no timer. It pushes
// through Volume.Push, which holds the volume's push lock: a push of a
// cycle (trim_after: remote), of the accept tier or of `volume push` and
// one of the replicator run one after the other, and the later one finds
// nothing left to push and sends no request. A failed push is retried
// with a backoff; a remote that fails every push is an outage, logged once,
// during which one probe push at a time runs (the backoff doubling up to
// ReplicateMaxBackoff) until it succeeds. Commits are never held up: they
// land locally and wait.
type replicator struct {
	every time.Duration
	log   *slog.Logger
	store *graft.Store

	wake chan struct{} // cap 1: something became due or a push ended

	mu       sync.Mutex
	due      map[names.Volume]time.Time // volumes to push, and when
	inflight map[names.Volume]bool
	fails    map[names.Volume]int    // consecutive failures of the volume's own
	stuck    map[names.Volume]string // the volume's failure, logged once
	outage   outage

	pushes, failed atomic.Int64
	cancel         context.CancelFunc
	done           chan struct{}
}

// outage is the state of a remote that fails pushes.
type outage struct {
	on      bool
	since   time.Time
	fails   int
	retryAt time.Time
	probing bool // a probe push is in flight
}

func newReplicator(every time.Duration, log *slog.Logger) *replicator {
	return &replicator{every: every, log: log, wake: make(chan struct{}, 1),
		due: map[names.Volume]time.Time{}, inflight: map[names.Volume]bool{},
		fails: map[names.Volume]int{}, stuck: map[names.Volume]string{}}
}

// notifier wraps the store's Notifier (nil: none) so that every local
// commit also marks its volume for the replicator.
func (r *replicator) notifier(inner graft.Notifier) graft.Notifier {
	return &replNotifier{r: r, inner: inner}
}

// replNotifier is the Notifier the store sees with background replication
// on.
type replNotifier struct {
	r     *replicator
	inner graft.Notifier
}

// Notify marks a committed volume, without blocking, then passes e on.
func (n *replNotifier) Notify(ctx context.Context, e graft.Event) error {
	if e.Kind == graft.EventCommit {
		if v, err := names.ParseVolume(e.Volume); err == nil {
			n.r.mark(v, time.Now())
		}
	}
	if n.inner == nil {
		return nil
	}
	return n.inner.Notify(ctx, e)
}

// Watch is the inner Notifier's; without one it yields an error wrapping
// graft.ErrNoRemote (there is no lane to follow).
func (n *replNotifier) Watch(ctx context.Context, volume string) iter.Seq2[graft.Event, error] {
	if n.inner != nil {
		return n.inner.Watch(ctx, volume)
	}
	return func(yield func(graft.Event, error) bool) {
		yield(graft.Event{}, fmt.Errorf("volume %s: no lane to watch (the node has no Redis): %w", volume, graft.ErrNoRemote))
	}
}

// mark makes v due within every of now, unless it is due sooner.
func (r *replicator) mark(v names.Volume, now time.Time) {
	r.mu.Lock()
	_, ok := r.due[v]
	if !ok {
		r.due[v] = now.Add(r.every)
	}
	r.mu.Unlock()
	if !ok {
		r.poke()
	}
}

func (r *replicator) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// start marks the volumes that already have unpushed commits (a restart,
// commits made while replication was off) and runs the loop until stop.
// It reads the data dir alone.
func (r *replicator) start(ctx context.Context, s *graft.Store) error {
	r.store = s
	infos, err := s.Volumes(ctx)
	if err != nil {
		return fmt.Errorf("echostore: background replication: list volumes: %w", err)
	}
	now := time.Now()
	for _, in := range infos {
		if in.LocalLSN > in.SyncLSN {
			r.mark(in.Volume, now)
		}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel, r.done = cancel, make(chan struct{})
	go r.run(rctx)
	return nil
}

// stop ends the loop and waits for the pushes in flight (canceled).
func (r *replicator) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

func (r *replicator) stats() ReplicationStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReplicationStats{Every: r.every, Pushes: r.pushes.Load(), Failed: r.failed.Load(),
		Outage: r.outage.on, Waiting: len(r.due) + len(r.inflight)}
}

// run pushes the volumes as they fall due, ReplicateWorkers at a time.
func (r *replicator) run(ctx context.Context) {
	defer close(r.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, ReplicateWorkers)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		batch, next := r.take(time.Now())
		for _, v := range batch {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				r.release(batch)
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				r.push(ctx, v)
				r.poke()
			}()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(max(0, time.Until(next)))
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// release gives back volumes taken but not started (the loop is ending).
func (r *replicator) release(batch []names.Volume) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range batch {
		delete(r.inflight, v)
	}
}

// take returns the volumes due at now, marked in flight, and the time the
// next one falls due (zero: none waits). During an outage it returns at
// most one volume, the probe, once the backoff has passed.
func (r *replicator) take(now time.Time) ([]names.Volume, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var batch []names.Volume
	var next time.Time
	for v, at := range r.due {
		if r.inflight[v] {
			continue
		}
		if r.outage.on {
			if at.After(now) {
				next = earliest(next, at)
				continue
			}
			if r.outage.probing || len(batch) > 0 {
				continue // woken when the probe ends
			}
			if r.outage.retryAt.After(now) {
				next = earliest(next, r.outage.retryAt)
				continue
			}
			r.outage.probing = true
		} else if at.After(now) {
			next = earliest(next, at)
			continue
		}
		delete(r.due, v)
		r.inflight[v] = true
		batch = append(batch, v)
	}
	return batch, next
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// push pushes v if it has local commits above its sync point, and records
// the outcome.
func (r *replicator) push(ctx context.Context, v names.Volume) {
	defer func() {
		r.mu.Lock()
		delete(r.inflight, v)
		r.outage.probing = false
		r.mu.Unlock()
	}()
	vol, err := r.store.Volume(ctx, v)
	if err != nil {
		if !errors.Is(err, graft.ErrVolumeNotFound) && ctx.Err() == nil {
			r.log.Warn("background replication: open the volume", "volume", v.String(), "err", err)
		}
		return // dropped (a deleted stream), or closing
	}
	if in := vol.Info(); in.LocalLSN <= in.SyncLSN {
		r.succeeded(v, false) // another push published them: nothing to send
		return
	}
	pctx, cancel := context.WithTimeout(ctx, ReplicatePushTimeout)
	_, err = vol.Push(pctx)
	cancel()
	switch {
	case err == nil:
		r.pushes.Add(1)
		r.succeeded(v, true)
	case ctx.Err() != nil, errors.Is(err, graft.ErrVolumeDropped), errors.Is(err, graft.ErrVolumeNotFound), errors.Is(err, graft.ErrClosed):
		// Closing, or the volume went with its stream.
	default:
		r.failed.Add(1)
		r.failedPush(v, err, time.Now())
	}
}

// own reports whether err is the volume's own (only an operator's action
// on it helps) rather than the remote's.
func own(err error) bool {
	var de *graft.DivergedError
	return errors.As(err, &de) || errors.Is(err, graft.ErrRemoteMismatch) || errors.Is(err, graft.ErrCorrupt) ||
		errors.Is(err, graft.ErrReadOnly)
}

// succeeded records a push of v that left nothing to push (pushed: it
// published commits), ending an outage and v's own failures.
func (r *replicator) succeeded(v names.Volume, pushed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.fails, v)
	if msg, ok := r.stuck[v]; ok {
		delete(r.stuck, v)
		r.log.Info("background replication: the volume pushes again", "volume", v.String(), "after", msg)
	}
	if pushed && r.outage.on {
		r.log.Info("background replication: the remote is back; pushing the volumes that waited",
			"outage", time.Since(r.outage.since).Round(time.Millisecond).String(), "failed_attempts", r.outage.fails, "waiting", len(r.due))
		r.outage = outage{}
	}
}

// failedPush records a failed push of v at now and makes it due again
// after a backoff: v's own (a diverged volume) or, for a remote error,
// the outage's.
func (r *replicator) failedPush(v names.Volume, err error, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if own(err) {
		r.fails[v]++
		r.due[v] = now.Add(backoff(r.every, r.fails[v]))
		if _, ok := r.stuck[v]; !ok {
			r.stuck[v] = err.Error()
			r.log.Error("background replication: the volume cannot be pushed; its local commits wait (retried with a backoff)",
				"volume", v.String(), "err", err)
		}
		return
	}
	r.due[v] = now // first in line when the remote is back
	if !r.outage.on {
		r.outage = outage{on: true, since: now}
		r.log.Warn("background replication: the remote failed a push; local commits wait, and one push at a time probes the remote with a backoff until it succeeds",
			"volume", v.String(), "err", err)
	}
	r.outage.fails++
	r.outage.retryAt = now.Add(backoff(r.every, r.outage.fails))
}

// backoff is every doubled per failure after the first, at most
// ReplicateMaxBackoff.
func backoff(every time.Duration, fails int) time.Duration {
	d := every
	for i := 1; i < fails && d < ReplicateMaxBackoff; i++ {
		d *= 2
	}
	return min(d, ReplicateMaxBackoff)
}

// every calls f every d until ctx ends; a call that has begun runs to its
// end. The node's periodic loops use it: Run's beats, heartbeats and
// checkpoints (schedule.go), the remote GC's passes (gcloop.go).
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
