package echostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/lane"
	"github.com/echostore/echostore/mq"
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
