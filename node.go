package echostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/graft/remote/mem"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/lane"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/redact"
)

// Sentinel errors of Open and of Node's methods.
var (
	// ErrConfig: Open was given a Config it cannot use (no Data, a
	// negative MaxQueues).
	ErrConfig = errors.New("echostore: invalid configuration")
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

// CloseTimeout bounds how long Close lets the accept tier's committers
// finish the batches they hold when its context has no deadline.
const CloseTimeout = 15 * time.Second

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

// Open opens the node of cfg: it checks the remote's URL, opens the remote
// and Redis, creates the data dir (mode 0700), opens and locks its graft
// store with the remote attached (every commit and push announced on the
// volume's Redis lane), opens the accept outbox and starts the accept tier,
// which recovers what an earlier process left pending (with
// Config.DeferJobs, the outbox and tier wait for the first job operation). An unreachable
// remote does not stop the open (pushes fail until it is back); an
// unreachable Redis does. A data dir held by another process fails with
// ErrDataLocked once cfg.LockWait has passed.
func Open(ctx context.Context, cfg Config) (*Node, error) { return open(ctx, cfg) }

func open(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg.LiveOnly {
		return openLive(ctx, cfg)
	}
	if cfg.Data == "" {
		return nil, fmt.Errorf("%w: no data directory", ErrConfig)
	}
	if cfg.MaxQueues < 0 {
		return nil, fmt.Errorf("%w: max_queues %d: want a positive number (default %d; there is no unlimited)",
			ErrConfig, cfg.MaxQueues, accept.DefaultMaxQueues)
	}
	if cfg.CacheSize != 0 && cfg.CacheSize < graft.MinCacheSize {
		return nil, fmt.Errorf("%w: cache size %d bytes: want at least %d (128 MiB: the block cache also holds the store's memtables), or 0 for the default (%d)",
			ErrConfig, cfg.CacheSize, graft.MinCacheSize, graft.DefaultCacheSize)
	}
	if cfg.History < 0 {
		return nil, fmt.Errorf("%w: history %v: want 0 (none) or a positive duration", ErrConfig, cfg.History)
	}
	if err := cfg.JobOutcomes.check(false); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OutboxK == 0 {
		cfg.OutboxK = accept.DefaultK
	}
	if cfg.Replicator == nil {
		cfg.Replicator = graft.Replication{}
	}
	gc, err := newGCLoop(cfg)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, base: map[archive.TrimAfter]*archive.Archiver{}, gc: gc}
	defer func() {
		if err != nil {
			n.closeAll(context.WithoutCancel(ctx))
		}
	}()
	// The remote URL is checked before anything is contacted or created
	// (remote.Open creates nothing).
	n.rurl = cfg.Remote
	if n.rurl == "" {
		if n.rurl, err = DefaultRemote(cfg.Data); err != nil {
			return nil, err
		}
	}
	if u, perr := url.Parse(n.rurl); perr == nil && strings.EqualFold(u.Scheme, "mem") && !cfg.Dev {
		return nil, ErrMemRemote
	}
	// A restore's refusals come before anything is contacted or created.
	plan, err := planRestore(cfg, n.rurl)
	if err != nil {
		return nil, err
	}
	drv := cfg.Drivers
	if len(drv) == 0 {
		drv = []remote.Driver{file.Driver{}, mem.Driver{}}
	}
	raw, err := remote.Open(ctx, n.rurl, drv...)
	if err != nil {
		return nil, fmt.Errorf("echostore: remote %s: %w", redact.URL(n.rurl), err)
	}
	// The meter sits directly around the driver's store: it counts what
	// crosses the wire.
	n.meter = remote.NewMeteredStore(raw)
	n.rs = n.meter
	if cfg.RemoteKeys != nil {
		// Encryption at rest wraps whatever store the URL opened (and
		// whatever wraps it), so that every byte that leaves is sealed.
		n.rs = sealed.New(n.rs, cfg.RemoteKeys)
		n.log.Info("remote: objects encrypted at rest", "write_key", cfg.RemoteKeys.WriteID(), "read_keys", cfg.RemoteKeys.ReadIDs())
	}
	var notifier graft.Notifier
	if cfg.Redis != "" {
		n.mq, err = mq.Connect(ctx, mq.Options{URL: cfg.Redis, Node: cfg.Node, Logger: cfg.Logger, AllowEviction: cfg.AllowEviction,
			Jobs: cfg.JobOutcomes.mqJobs()})
		if err != nil {
			return nil, fmt.Errorf("echostore: redis: %w", err)
		}
		// Every local commit and push is announced on its volume's lane.
		n.lsn = lane.New(n.mq)
		notifier = n.lsn
	}
	if plan.restore {
		// The remote's keys are checked on one object before anything is
		// written: a restore without the key of an encrypted remote, or
		// with another, leaves the data dir as it was.
		if err := probeRemote(ctx, n.rs); err != nil {
			return nil, fmt.Errorf("echostore: restore from %s: %w; nothing was written", redact.URL(n.rurl), err)
		}
	}
	if plan.marker {
		// The marker first: a restore cut short leaves a data dir that says so.
		if err := writeRestoreMarker(cfg.Data, n.rurl); err != nil {
			return nil, err
		}
	}
	if cfg.ReplicateEvery > 0 {
		// Every local commit also marks its volume for the background
		// replication (in memory: a quiet volume costs nothing).
		n.repl = newReplicator(cfg.ReplicateEvery, cfg.Logger)
		notifier = n.repl.notifier(notifier)
	}
	// The data dir holds every record and job payload: its owner only
	// (an existing dir keeps its mode; docs/SECURITY.md).
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, fmt.Errorf("echostore: create data dir %s: %w", cfg.Data, err)
	}
	gopts := graft.Options{Logger: cfg.Logger, Notifier: notifier, CacheSize: cfg.CacheSize, History: archiveHistory(cfg.History)}
	if cfg.ReadMostly {
		gopts.CacheSize, gopts.MemTableSize, gopts.DeferCompactions = ReadMostlyCacheSize, ReadMostlyCacheSize/4, true
	}
	n.store, err = waitLock(ctx, cfg.LockWait, graft.ErrLocked, func() (*graft.Store, error) {
		return graft.Open(ctx, filepath.Join(cfg.Data, GraftDir), gopts)
	})
	if errors.Is(err, graft.ErrLocked) {
		return nil, fmt.Errorf("%w (%s): %w", ErrDataLocked, cfg.Data, err)
	}
	if err != nil {
		return nil, fmt.Errorf("echostore: open data dir %s: %w", cfg.Data, err)
	}
	n.store.AttachRemote(n.rs)
	if n.id, err = loadNodeID(cfg.Data); err != nil {
		return nil, err
	}
	if plan.skip != "" {
		n.restored = &RestoreResult{Data: cfg.Data, Remote: redact.URL(n.rurl), Node: cfg.Node, Mode: cfg.Restore.String(),
			Reason: plan.skip, Volumes: []RestoredVolume{}, Skipped: []SkippedVolume{}}
		n.log.Info("restore: not needed", "data", cfg.Data, "reason", plan.skip)
	}
	if plan.restore {
		// Before the accept tier: its recovery reads the restored accept
		// volumes and dispatches again what they hold above their safe
		// index.
		if n.restored, err = n.restore(ctx); err != nil {
			return nil, err
		}
		if err := n.restoreSeams(ctx, n.restored); err != nil {
			return nil, fmt.Errorf("echostore: restore: %w", err)
		}
		if err := removeRestoreMarker(cfg.Data); err != nil {
			return nil, err
		}
		n.log.Info("restore: done", "volumes", len(n.restored.Volumes), "skipped", len(n.restored.Skipped),
			"requests", n.restored.Requests, "bytes_fetched", n.restored.BytesFetched, "took_ms", n.restored.TookMs)
	}
	if n.repl != nil {
		if err := n.repl.start(ctx, n.store); err != nil {
			return nil, err
		}
	}
	n.startGC() // after a restore; its first pass is GCEvery away
	if n.mq == nil {
		return n, nil
	}
	for _, ta := range []archive.TrimAfter{archive.TrimAfterLocal, archive.TrimAfterRemote} {
		if n.base[ta], err = n.newArchiver(ta, archive.Retention{}); err != nil {
			return nil, err
		}
	}
	if cfg.DeferJobs {
		return n, nil
	}
	if err := n.startJobs(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// openLive opens the live-only node of cfg: Redis alone.
func openLive(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Redis == "" {
		return nil, fmt.Errorf("%w: a live-only node needs Redis", ErrConfig)
	}
	if err := cfg.JobOutcomes.check(true); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c, err := mq.Connect(ctx, mq.Options{URL: cfg.Redis, Node: cfg.Node, Logger: cfg.Logger, AllowEviction: cfg.AllowEviction,
		Jobs: cfg.JobOutcomes.mqJobs()})
	if err != nil {
		return nil, fmt.Errorf("echostore: redis: %w", err)
	}
	return &Node{cfg: cfg, log: cfg.Logger, mq: c, base: map[archive.TrimAfter]*archive.Archiver{}}, nil
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
		accept.TierOptions{Node: uint16(cfg.Node), MaxQueues: cfg.MaxQueues, GroupWait: cfg.GroupWait, Logger: cfg.Logger})
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

// Close closes the node: the accept tier (its committers finish the
// batches they hold, bounded by ctx or CloseTimeout; what is still pending
// stays in the outbox for the next open), the outbox, the graft store
// (which releases the data dir), the remote and Redis, in that order. A
// second Close does nothing.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	return n.closeAll(ctx)
}

func (n *Node) closeAll(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CloseTimeout)
		defer cancel()
	}
	n.sched.close() // Run returns; the beat in flight ends first, and no beat runs after it
	n.leave(ctx)    // before Redis closes: the others take its share at once
	n.stopGC()      // before the store and the remote it uses close
	var errs []error
	if n.repl != nil {
		n.repl.stop() // the pushes in flight are canceled; their commits wait for the next open
	}
	n.jobsMu.Lock()
	n.jobsClosed = true // no job operation starts the tier after this
	tier, out := n.tier, n.out
	n.jobsMu.Unlock()
	if tier != nil {
		if err := tier.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("echostore: close the accept tier: %w", err))
		}
	}
	if out != nil {
		if err := out.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("echostore: close the accept outbox: %w", err))
		}
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("echostore: close data dir: %w", err))
		}
	}
	if n.rs != nil {
		if err := n.rs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("echostore: close remote: %w", err))
		}
	}
	if n.mq != nil {
		n.mq.Close()
	}
	return errors.Join(errs...)
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
