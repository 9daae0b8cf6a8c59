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

// Open and Close: the one place that starts every part of a node, and
// stops them again in order (doc.go, "Close order").

// Open opens the node of cfg: it checks the remote's URL, opens the remote
// and Redis, creates the data dir (mode 0700), opens and locks its graft
// store with the remote attached (every commit and push announced on the
// volume's Redis lane), opens the accept outbox and starts the accept tier,
// which recovers what an earlier process left pending (with
// Config.DeferJobs, the outbox and tier wait for the first job operation). An unreachable
// remote does not stop the open (pushes fail until it is back); an
// unreachable Redis does. A data dir held by another process fails with
// ErrDataLocked once cfg.LockWait has passed.
func Open(ctx context.Context, cfg Config) (*Node, error) { return openNode(ctx, cfg) }

func openNode(ctx context.Context, cfg Config) (_ *Node, err error) {
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
		n.mq, err = mq.Connect(ctx, mq.Options{URL: cfg.Redis, Node: cfg.NodeNumber, Logger: cfg.Logger, AllowEviction: cfg.AllowEviction,
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
		n.restored = &RestoreResult{Data: cfg.Data, Remote: redact.URL(n.rurl), Node: cfg.NodeNumber, Mode: cfg.Restore.String(),
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
	c, err := mq.Connect(ctx, mq.Options{URL: cfg.Redis, Node: cfg.NodeNumber, Logger: cfg.Logger, AllowEviction: cfg.AllowEviction,
		Jobs: cfg.JobOutcomes.mqJobs()})
	if err != nil {
		return nil, fmt.Errorf("echostore: redis: %w", err)
	}
	return &Node{cfg: cfg, log: cfg.Logger, mq: c, base: map[archive.TrimAfter]*archive.Archiver{}}, nil
}

// CloseTimeout bounds how long Close lets the accept tier's committers
// finish the batches they hold when its context has no deadline.
const CloseTimeout = 15 * time.Second

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
