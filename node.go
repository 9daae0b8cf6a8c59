package echostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/lane"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Sentinel errors of Open and of Node's methods (ErrConfig, beside Config,
// is the other).
var (
	// ErrDataLocked: another process holds the data directory.
	ErrDataLocked = errors.New("echostore: the data directory is in use by another echostore process")
	// ErrMemRemote: a mem:// remote without Config.Dev: sync
	// acknowledgements against process memory would be a lie.
	ErrMemRemote = errors.New("echostore: a mem:// remote keeps nothing across a restart; it needs --dev (config dev: true)")
	// ErrNoRedis: a stream or job operation on a Node opened without
	// Config.Redis.
	ErrNoRedis = errors.New("echostore: this node has no Redis (Config.Redis is empty): streams and jobs need it")
	// ErrInvalid: a request's options are out of range (a window with
	// neither Keep nor MaxAge, a claim of more than MaxBatch jobs, an ack
	// of no entries).
	ErrInvalid = errors.New("echostore: invalid request")
	// ErrClosed: a job operation on a Node that Close has begun closing.
	ErrClosed = errors.New("echostore: node closed")
	// ErrLiveOnly: an operation that needs the data directory (the
	// archive, volumes, the accept tier) on a Node opened with
	// Config.LiveOnly.
	ErrLiveOnly = errors.New("echostore: this node is live-only (Config.LiveOnly): it has no data directory")
)

// MaxBatch bounds the jobs or entries one claim, dead-letter listing or
// redrive handles, so that no single call takes a queue's every job in one
// Redis script.
const MaxBatch = 1000

// Node is an open echostore node: the data directory (locked), Redis, the
// remote, the accept outbox and tier, and the archivers. Get one with Open;
// its methods are safe for concurrent use. Close it once.
type Node struct {
	cfg Config
	// exportMu makes the node's exports one at a time: two exports of a
	// stream into one place would each take the other's placed file for
	// a crash's leftover (parquet.go).
	exportMu sync.Mutex
	log      *slog.Logger
	rurl     string // the remote's URL (secrets in it: never shown unredacted)
	rs       remote.Store
	// meter counts the requests and bytes of the driver's store, directly
	// around it (rs wraps it, or is it).
	meter *remote.MeteredStore
	// repl is the background replication (Config.ReplicateEvery), nil
	// when off.
	repl  *replicator
	mq    *mq.Client     // nil without Redis
	lsn   *lane.Notifier // the store's notifier: nil without Redis
	store *graft.Store
	gc    *gcLoop // the background remote GC (gcloop.go)
	// jobsMu guards out and tier, which are set once: at Open, or at the
	// first job operation with Config.DeferJobs; nil without Redis.
	jobsMu     sync.Mutex
	out        *accept.Outbox
	tier       *accept.Tier
	jobsClosed bool // Close began: the tier is not started any more

	// base are the archivers of the two trim_after settings with no
	// retention; a cycle with a retention horizon gets one of its own
	// (an archiver holds only its options).
	base map[archive.TrimAfter]*archive.Archiver

	restored *RestoreResult // what Open's restore did (Config.Restore), or nil

	sched schedule  // the declared streams and their drivers (schedule.go)
	idle  idleBeat  // what the beat knows of idle archived streams (idle.go)
	disc  discovery // the streams Adoptable left alone (discover.go)
	id    string    // the node's id (NodeIDFile), "" for a live-only node
	group group     // its membership while Run runs (group.go)

	mu     sync.Mutex
	closed bool
}

// The state the node holds for each of its parts, with the methods that
// need nothing more than it; the parts' work is in their own files
// (schedule.go, idle.go, discover.go, group.go, gcloop.go, restore.go).

// schedule is what the node keeps of its declared streams: each one's
// policy, the archive driver of each (trim_after, retention) pair and the
// trim-only retention. mu guards policies and drivers; beat orders a beat
// and a delete, so that a deleted stream is not cycled by a beat that
// listed it before.
type schedule struct {
	mu       sync.Mutex
	policies map[names.StreamRef]StreamPolicy
	drivers  map[driverKey]*archive.Driver
	ret      *mq.Retention
	faults   map[names.StreamRef]bool // armed one-shot faults (fault.go)
	closing  chan struct{}            // closed by close: Run returns (made on first use, done)
	beat     sync.Mutex
	closed   bool // under beat: the node is closing, no beat runs
	once     sync.Once
}

// done returns the channel close closes.
func (s *schedule) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing == nil {
		s.closing = make(chan struct{})
	}
	return s.closing
}

// close ends the schedule as the node closes: Run returns, the beat in
// flight is waited for, and no beat runs after it.
func (s *schedule) close() {
	s.done()
	s.once.Do(func() { close(s.closing) })
	s.beat.Lock()
	s.closed = true
	s.beat.Unlock()
}

// driverKey names one archive driver: what its cycles trim after and the
// archive's retention horizon they apply.
type driverKey struct {
	ta     archive.TrimAfter
	retain archive.Retention
}

func (p StreamPolicy) driverKey() driverKey { return driverKey{p.TrimAfter, p.Retain} }

// forgetLocked takes ref out of the driver or retention of p; s.mu is held.
func (s *schedule) forgetLocked(ref names.StreamRef, p StreamPolicy) {
	if !p.Archived {
		s.ret.Forget(ref)
	} else if d, ok := s.drivers[p.driverKey()]; ok {
		d.Forget(ref)
	}
}

// top is what a probe reads of a stream: enough to tell that it has
// changed since (an XADD moves last, a trim or XDEL changes length).
type top struct {
	read   bool // probed (false: Redis failed, the beat cycles everything)
	exists bool
	length int64
	last   string // last-generated-id
}

// memo is what the beat knows of an archived stream since its last
// successful cycle.
type memo struct {
	top    top       // the stream's top after that cycle (as read before it, less its trim)
	view   string    // the membership it was cycled under (GroupView.Key)
	held   bool      // consumer groups held its trim back (capped or stalled)
	probed time.Time // the last cycle or probe
}

// idleBeat keeps the beat's memos; its own mutex guards them. Its zero
// value knows no stream.
type idleBeat struct {
	mu    sync.Mutex
	memos map[names.StreamRef]memo
}

// forget drops ref's memo: its next beat cycles it.
func (b *idleBeat) forget(ref names.StreamRef) {
	b.mu.Lock()
	delete(b.memos, ref)
	b.mu.Unlock()
}

// remember sets ref's memo; b.mu is held.
func (b *idleBeat) rememberLocked(ref names.StreamRef, m memo) {
	if b.memos == nil {
		b.memos = map[names.StreamRef]memo{}
	}
	b.memos[ref] = m
}

// cycled records the outcome of a beat's cycle of ref, whose top before
// the cycle was before: a success is a memo, a failure none (the next
// beat cycles it again).
func (b *idleBeat) cycled(ref names.StreamRef, before top, res archive.CycleResult, err error, view string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil || !before.read || res.Missing {
		// Failed, or not probed (a Redis error), or declared but not in
		// Redis yet (its first append, not registered as archived, names
		// it in no feed): due again, at one script a beat.
		delete(b.memos, ref)
		return
	}
	after := before
	after.length = max(before.length-res.Trimmed, 0)
	b.rememberLocked(ref, memo{top: after, view: view, probed: now,
		held: res.CappedBy != "" || len(res.Stalled) > 0})
}

// discovery paces the beat's discovery (BeatOptions.Adopt) and remembers
// the streams left alone, so that each is logged once; its zero value has
// discovered nothing and knows none.
type discovery struct {
	mu     sync.Mutex
	seen   map[names.StreamRef]bool
	last   time.Time // the last discovery
	forced bool      // the next one is due at once: the group changed
}

// due reports whether a discovery is due at now (the first always is, and
// one forced since the last), and if so counts it as done.
func (d *discovery) due(now time.Time, every time.Duration) bool {
	if every <= 0 {
		every = DefaultDiscoverEvery
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.last.IsZero() && now.Sub(d.last) < every && !d.forced {
		return false
	}
	d.last, d.forced = now, false
	return true
}

// force makes the next discovery due at once.
func (d *discovery) force() {
	d.mu.Lock()
	d.forced = true
	d.mu.Unlock()
}

// group is a node's heartbeat and its latest view of its group; mu guards
// it. The zero value is a node that has not joined.
type group struct {
	// hb orders the heartbeats and the leave: a heartbeat in flight when
	// the node leaves would put it back in the group until HeartbeatTTL.
	hb     sync.Mutex
	mu     sync.Mutex
	joined bool   // Run joined: heartbeats
	info   string // the heartbeat's value
	name   string // the remote's identity, "" until read
	cur    *GroupView
	gen    uint64
	// failing: the last heartbeat failed (logged once until one succeeds).
	failing bool
	clash   map[string]bool // nodes logged for sharing this node's number
	onView  func(v *GroupView, changed bool)
}

// gcLoop is the node's background remote GC.
type gcLoop struct {
	every, grace time.Duration
	stop         context.CancelFunc
	done         chan struct{}

	mu   sync.Mutex // one pass at a time; guards vols
	vols map[names.Volume]gcVolume

	objects, bytes [gcKinds]atomic.Int64
	passes, errs   atomic.Int64
}

// gcVolume is what the loop remembers of a volume between passes.
type gcVolume struct {
	seen uint64    // the volume's RemoteLSN at its last pass
	due  time.Time // zero: nothing held back; else when the grace ends
}

// The kinds of object remote GC removes, as GCTotals and the metrics name
// them.
const (
	gcSegment = iota
	gcCommit
	gcMarker
	gcKinds
)

// RestoredVolume is one volume a restore rebuilt.
type RestoredVolume struct {
	Volume string `json:"volume"`
	// Kind is "archive" (an archived stream's history) or "accept" (one of
	// the node's job queues).
	Kind string `json:"kind"`
	// RemoteLSN is the remote LSN the volume was restored to (the remote
	// log's head when it was pulled); LocalLSN the volume's local head.
	RemoteLSN uint64 `json:"remote_lsn"`
	LocalLSN  uint64 `json:"local_lsn"`
	Pages     uint64 `json:"pages"`
	Bytes     uint64 `json:"bytes"`
	// UnfetchedFrames are the frames whose pages are still in the remote,
	// fetched on first read (or by `volume hydrate`).
	UnfetchedFrames int `json:"unfetched_frames"`
	// Existed: the data dir held the volume already (RestoreForce); it
	// was pulled.
	Existed bool `json:"existed,omitempty"`
	// SeamLowered: the stream's seam cache in Redis named folds the remote
	// never received (a fold durable only on the lost disk); it was
	// lowered to the restored volume so that reads and cycles go on.
	SeamLowered bool `json:"seam_lowered,omitempty"`
}

// SkippedVolume is a volume of the remote a restore left alone, and why.
type SkippedVolume struct {
	Volume string `json:"volume"`
	Reason string `json:"reason"`
}

// RestoreResult is what a restore did (Node.Restored, `echostore
// restore`).
type RestoreResult struct {
	Data   string `json:"data"`
	Remote string `json:"remote"` // redacted
	Node   int    `json:"node"`
	Mode   string `json:"mode"`
	// Restored: the restore ran. False when RestoreIfEmpty found a store
	// (Reason says so).
	Restored bool   `json:"restored"`
	Reason   string `json:"reason,omitempty"`
	// Volumes are the volumes restored, by name; Skipped those of the
	// remote left alone (another node's accept volumes, other names).
	Volumes []RestoredVolume `json:"volumes"`
	Skipped []SkippedVolume  `json:"skipped"`
	// Requests and BytesFetched are the remote's requests and the bytes
	// it returned during the restore: everything fetched before the first
	// read (page bytes come later, on reads).
	Requests     int64 `json:"requests"`
	BytesFetched int64 `json:"bytes_fetched"`
	// Took is how long the restore took, in milliseconds.
	TookMs int64 `json:"took_ms"`
}

// needData fails wrapping ErrLiveOnly on a live-only node: what needs the
// data directory checks it before anything else.
func (n *Node) needData(op string) error {
	if n.cfg.LiveOnly {
		return fmt.Errorf("%s: %w", op, ErrLiveOnly)
	}
	return nil
}

// startJobs opens the accept outbox and starts the accept tier (its
// recovery pushes and dispatches what an earlier process left pending).
// n.jobsMu is held, or n is not yet shared.
func (n *Node) startJobs(ctx context.Context) error {
	cfg := n.cfg
	out, err := waitLock(ctx, cfg.LockWait, accept.ErrBusy, func() (*accept.Outbox, error) {
		return accept.Open(ctx, filepath.Join(cfg.Data, AcceptDir, OutboxDir),
			accept.Options{K: cfg.OutboxK, FlushInterval: cfg.FlushInterval, Logger: cfg.Logger})
	})
	if errors.Is(err, accept.ErrBusy) {
		return fmt.Errorf("%w (%s): %w", ErrDataLocked, cfg.Data, err)
	}
	if err != nil {
		return fmt.Errorf("echostore: open the accept outbox: %w", err)
	}
	tier, err := accept.NewTier(ctx, out, n.store, cfg.Replicator, n.mq,
		accept.TierOptions{Node: uint16(cfg.NodeNumber), MaxQueues: cfg.MaxQueues, GroupWait: cfg.GroupWait, Logger: cfg.Logger})
	if err != nil {
		if cerr := out.Close(ctx); cerr != nil {
			n.log.Warn("close the accept outbox", "err", cerr)
		}
		return fmt.Errorf("echostore: start the accept tier: %w", err)
	}
	n.out, n.tier = out, tier
	return nil
}

// jobs returns the accept tier, started now if Config.DeferJobs deferred
// it. Without Redis it fails with ErrNoRedis.
func (n *Node) jobs(ctx context.Context) (*accept.Tier, error) {
	if err := n.needData("jobs"); err != nil {
		return nil, err
	}
	if _, err := n.live(); err != nil {
		return nil, err
	}
	n.jobsMu.Lock()
	defer n.jobsMu.Unlock()
	if n.jobsClosed {
		return nil, ErrClosed
	}
	if n.tier == nil {
		if err := n.startJobs(ctx); err != nil {
			return nil, err
		}
	}
	return n.tier, nil
}

// waitLock calls open until it succeeds, fails with an error other than
// busy, or wait passes (0: one call).
func waitLock[T any](ctx context.Context, wait time.Duration, busy error, open func() (T, error)) (T, error) {
	deadline := time.Now().Add(wait)
	for {
		v, err := open()
		if err == nil || !errors.Is(err, busy) || wait <= 0 {
			return v, err
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("%w (another echostore process holds it; waited %s)", err, wait)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
	}
}

// newArchiver returns an archiver over the node's store, Redis and remote.
func (n *Node) newArchiver(ta archive.TrimAfter, retain archive.Retention) (*archive.Archiver, error) {
	opts := archive.Options{Store: n.store, Live: n.mq, Logger: n.log, TrimAfter: ta, Retain: retain}
	if ta == archive.TrimAfterRemote {
		opts.Pusher = graft.Replication{}
	}
	a, err := archive.New(opts)
	if err != nil {
		return nil, fmt.Errorf("echostore: %w", err)
	}
	return a, nil
}

// archiver returns an archiver over the node with the given settings (the
// schedule's drivers: archive.Archiver.NewDriver). Without Redis it fails
// with ErrNoRedis.
func (n *Node) archiver(ta TrimAfter, retain Retention) (*archive.Archiver, error) {
	if err := n.needData("archive"); err != nil {
		return nil, err
	}
	if n.mq == nil {
		return nil, ErrNoRedis
	}
	if a, ok := n.base[ta]; ok && retain.IsZero() {
		return a, nil
	}
	return n.newArchiver(ta, retain)
}

// archiveVolume returns the stream's archive volume in the data dir, nil
// if there is none.
func (n *Node) archiveVolume(ctx context.Context, ref names.StreamRef) (*graft.Volume, error) {
	v, err := n.store.Volume(ctx, ref.Volume())
	if errors.Is(err, graft.ErrVolumeNotFound) {
		return nil, nil
	}
	return v, err
}

// pullArchive creates the stream's archive volume if the remote has
// commits of it and pulls it up to the remote head (pages are fetched on
// first read). A remote without the volume fails wrapping
// archive.ErrNoVolume and creates nothing.
func (n *Node) pullArchive(ctx context.Context, ref names.StreamRef) (*graft.Volume, error) {
	name := ref.Volume()
	head, err := n.remoteHead(ctx, name)
	if err != nil {
		return nil, err
	}
	if head == 0 {
		return nil, fmt.Errorf("the remote has no commit of %s (was it pushed? archive cycles with trim_after remote push it): %w", name, archive.ErrNoVolume)
	}
	v, err := n.store.Volume(ctx, ref.Volume())
	if errors.Is(err, graft.ErrVolumeNotFound) {
		v, err = n.store.CreateVolume(ctx, ref.Volume())
	}
	if err != nil {
		return nil, err
	}
	if _, err := v.Pull(ctx, nil); err != nil {
		return nil, err
	}
	return v, nil
}

// remoteHead returns the newest remote LSN of the volume name (0: none).
func (n *Node) remoteHead(ctx context.Context, name names.Volume) (uint64, error) {
	l, err := remote.NewLog(n.rs, name)
	if err != nil {
		return 0, err
	}
	head, err := l.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("volume %s: remote: %w", name, err)
	}
	return head, nil
}

// HasRedis reports whether the node was opened with Redis (Config.Redis):
// without it, only the data dir's volumes and archive reads answer.
func (n *Node) HasRedis() bool { return n.mq != nil }

// OnLSN calls f with every LSN event (a commit or a push of a volume of
// the data dir) that the node announces on the volumes' lanes, from now on
// until stop is called, in this process and without reading Redis (see
// lane.Notifier.Local: f must not block). Without Redis nothing is
// announced and f is never called.
func (n *Node) OnLSN(f func(graft.Event)) (stop func()) {
	if n.lsn == nil {
		return func() {}
	}
	return n.lsn.Local(f)
}

// RemoteMeter returns the requests and bytes the node's remote store has
// sent and received since Open (zero for a live-only node).
func (n *Node) RemoteMeter() remote.Meter {
	if n.meter == nil {
		return remote.Meter{}
	}
	return n.meter.Meter()
}

// RemoteURL returns the remote's URL, secrets and all: never show it
// without redact.URL.
func (n *Node) RemoteURL() string { return n.rurl }

// AcceptQueues returns what the accept tier holds of each queue it has
// met (pending jobs, the latest commits' batch sizes), by name: none
// without Redis, and with Config.DeferJobs until the first job operation.
// It does no I/O.
func (n *Node) AcceptQueues() []accept.QueueStats {
	n.jobsMu.Lock()
	tier := n.tier
	n.jobsMu.Unlock()
	if tier == nil {
		return nil
	}
	return tier.Stats()
}

// outbox returns the accept outbox (nil without Redis, and with
// Config.DeferJobs until the first job operation).
func (n *Node) outbox() *accept.Outbox {
	n.jobsMu.Lock()
	defer n.jobsMu.Unlock()
	return n.out
}

// OutboxStats returns the accept outbox's counters, and false while the
// node has none (no Redis; with Config.DeferJobs, until the first job
// operation).
func (n *Node) OutboxStats() (accept.Stats, bool) {
	out := n.outbox()
	if out == nil {
		return accept.Stats{}, false
	}
	return out.Stats(), true
}

// live returns the Redis client, or ErrNoRedis.
func (n *Node) live() (*mq.Client, error) {
	if n.mq == nil {
		return nil, ErrNoRedis
	}
	return n.mq, nil
}

// Probe checks, concurrently and with one cheap request each, that the
// node's Redis and its remote answer (a PING; a GET of remote.ProbeKey,
// which need not exist). Each error is nil, or why it does not: ErrNoRedis
// for a node without Redis, one wrapping remote.ErrUnavailable for a remote
// out of reach or refusing the credentials. A node without a remote
// (Config.LiveOnly) has a nil remote error.
func (n *Node) Probe(ctx context.Context) (redisErr, remoteErr error) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if n.rs != nil {
			remoteErr = remote.Probe(ctx, n.rs)
		}
	}()
	if live, err := n.live(); err != nil {
		redisErr = err
	} else {
		redisErr = live.Ping(ctx)
	}
	wg.Wait()
	return redisErr, remoteErr
}

// OutboxK returns the accept outbox's loss window K (Config.OutboxK).
func (n *Node) OutboxK() int { return n.cfg.OutboxK }

// Drain commits and pushes every job pending in the accept tier now and
// returns once it is pushed (dispatch to the job streams follows in the
// background). Without Redis it fails with ErrNoRedis.
func (n *Node) Drain(ctx context.Context) error {
	t, err := n.jobs(ctx)
	if err != nil {
		return err
	}
	return t.Drain(ctx)
}
