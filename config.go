package echostore

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Replicator pushes an accept volume to the remote for the accept tier.
type Replicator = accept.Replicator

// Config configures a Node. Every field but Data may be left zero: a Config
// with Data and Redis alone is the node `echostore serve` runs by default.
type Config struct {
	// Data is the data directory (required unless LiveOnly): the graft
	// store is Data/graft, the accept outbox Data/accept/outbox. Open
	// creates it with mode 0700 (an existing one keeps its mode).
	Data string
	// LiveOnly opens Redis alone: no data directory (Data is ignored and
	// not locked, so any number of live-only nodes run beside the process
	// that holds it), no remote, no archive, no accept tier. Append, the
	// live side of Read (ReadLiveOnly) and the job operations that work on
	// Redis alone (Claim, Ack, Dead, Redrive, QueueStatus) work; every
	// other method fails wrapping ErrLiveOnly. Redis is required.
	LiveOnly bool
	// Redis is the Redis URL of the live tier. "" opens a Node without
	// Redis: its volumes work, every stream and job operation fails with
	// ErrNoRedis, and no accept tier runs.
	Redis string
	// Remote is the object-store URL the volumes replicate to (default
	// DefaultRemote(Data), file://<Data>/remote).
	Remote string
	// RemoteKeys, if set, encrypts at rest every object the node writes to
	// Remote and opens every object it reads (graft/remote/sealed; the
	// envelope is in docs/FORMAT.md): nil, the objects are plaintext.
	// Printing it shows key ids alone.
	RemoteKeys *sealed.Keyring
	// Dev allows a mem:// remote, which keeps nothing across a restart (a
	// sync enqueue's acknowledgement means nothing after a crash): for
	// demos and tests only. Without it a mem:// remote is ErrMemRemote.
	Dev bool
	// NodeNumber is the node number of the ids the node mints (EVT and
	// JOB); the accept volume of queue Q is accept.Q.<NodeNumber>.
	NodeNumber int
	// MaxQueues bounds the job queues the accept tier takes (default
	// accept.DefaultMaxQueues; negative is an error).
	MaxQueues int
	// OutboxK is the accept outbox's loss window in records (default
	// accept.DefaultK).
	OutboxK int
	// FlushInterval is the outbox's time bound: a partial block is cut and
	// synced once its oldest record is this old (default
	// accept.DefaultFlushInterval). Negative: never by time; the caller
	// then calls Node.CheckpointOutbox itself (serve does, to time each
	// checkpoint).
	FlushInterval time.Duration
	// ReplicateEvery turns on background replication: every volume with
	// local commits not yet pushed (archive and accept volumes alike, and a
	// volume committed through Volume) is pushed within ReplicateEvery of
	// the first of them, whatever the cycles' trim_after. It is driven by
	// the store's own commit events, so a quiet volume makes no request to
	// the remote; a failing remote is retried with a backoff and never
	// holds a commit up. 0 or negative: off (a program that embeds a Node
	// pushes when it chooses, as Cycle with TrimAfterRemote and Push do);
	// serve sets DefaultReplicateEvery unless its replicate_every says
	// otherwise. Docs: docs/ARCHITECTURE.md, Background replication.
	ReplicateEvery time.Duration
	// GroupWait bounds the sync group commit's wait for siblings
	// (accept.TierOptions.GroupWait; 0: its default, negative: never wait).
	GroupWait time.Duration
	// CacheSize is the graft store's block cache, in bytes
	// (graft.Options.CacheSize): the archive blocks a merge-read reads
	// stay in memory decompressed, so a node that serves full reads of an
	// archive larger than the cache reads and decompresses every block
	// again on each (docs/BENCHMARKS.md, issue 19). It is the node's
	// memory, allocated as blocks are read. 0: graft.DefaultCacheSize
	// (128 MiB); below graft.MinCacheSize, or negative, Open refuses it
	// (ErrConfig) before it opens anything. serve sets it from cache_size.
	CacheSize int64
	// ReadMostly sizes the graft store for a process that reads the data
	// dir once and briefly and writes little (the CLI's export): a block
	// cache of ReadMostlyCacheSize and memtables of a quarter of it
	// (CacheSize is then ignored), and the compactions the last writer
	// left owing deferred to the next open without it
	// (graft.Options.DeferCompactions). Such a process's resident memory
	// is then its own, not the archive's: measured, an export of 10M
	// records in docs/BENCHMARKS.md. serve never sets it.
	ReadMostly bool
	// History is how long the archive volumes keep their past states
	// readable for as-of reads (ReadOptions.AsOf; graft.Options.History):
	// the local GC keeps every state of the last History, and so the
	// pages that retention dropped or a fold replaced stay on disk that
	// much longer. 0: none (an as-of read reaches back to the GC horizon
	// alone, the last replicated state at best); negative: Open refuses
	// it. serve sets it from history.
	History time.Duration
	// Replicator is the push of the accept volumes (default
	// graft.Replication{}, Graft's own push); a caller may wrap it, to time
	// the pushes.
	Replicator Replicator
	// JobOutcomes keeps the end of every job's delivery (an ack, a failure,
	// a stall's burial) as a record of a stream of the job's queue, so that
	// finished, failed and dead jobs can be read, archived and exported
	// like any stream (docs/EXPORT.md, "Jobs"). The zero value keeps none.
	JobOutcomes JobOutcomes
	// DeferJobs starts the accept outbox and tier at the first Enqueue or
	// Drain instead of at Open. Starting the tier recovers what an earlier
	// process left pending, pushing it to the remote, so a short-lived
	// program whose work is not jobs (the CLI's stream and volume commands)
	// sets it, to neither wait on the remote nor touch the outbox. A
	// long-lived one (serve) leaves it false, so that pending jobs are
	// pushed and dispatched as soon as it starts.
	DeferJobs bool
	// Drivers are the remote drivers Remote may name (default file:// and
	// mem://, which link no cloud SDK; a program that archives to s3://,
	// gs:// or azblob:// passes those drivers, e.g. drivers.All() of
	// graft/remote/drivers, as the echostore binary does).
	Drivers []remote.Driver
	// GCEvery enables the node's background remote GC: every GCEvery it
	// checkpoints the remote log of each volume of the data dir whose
	// remote moved and collects it with the grace GCGrace (see
	// Node.RemoteGC and docs/REMOTE.md, "Remote GC"). 0: no background GC
	// (serve sets it from gc_every; Node.RemoteGC runs a pass on demand).
	GCEvery time.Duration
	// GCGrace is how long a reader's pull stays good: no remote object a
	// state pulled within GCGrace references is deleted (default
	// DefaultGCGrace).
	GCGrace time.Duration
	// LockWait is how long Open waits for another process to release the
	// data dir (0: not at all; the error wraps ErrDataLocked).
	LockWait time.Duration
	// AllowEviction connects to a Redis whose maxmemory-policy may evict
	// (tests only: eviction drops streams silently).
	AllowEviction bool
	// Restore rebuilds the data dir from the remote at Open (restore.go):
	// every archive volume of the remote and the node's accept volumes,
	// lazily, before the accept tier starts. RestoreOff (the default)
	// opens the data dir as it is.
	Restore RestoreMode
	// Logger receives the node's logs (default slog.Default()).
	Logger *slog.Logger
}

// ErrConfig: Open was given a Config it cannot use (no Data, a negative
// MaxQueues), or a Config's part is out of range (JobOutcomes). It is one
// of the sentinel errors of Open and of Node's methods (node.go).
var ErrConfig = errors.New("echostore: invalid configuration")

// RestoreMode says whether Open rebuilds the data dir from the remote
// (Config.Restore).
type RestoreMode int

// The restore modes.
const (
	// RestoreOff opens the data dir as it is (a data dir left by an
	// unfinished restore is refused: ErrRestorePending).
	RestoreOff RestoreMode = iota
	// RestoreIfEmpty (serve's restore: true) restores a data dir that
	// holds no store (missing, empty, or left by an unfinished restore)
	// and opens one that holds a store as it is, so that a supervised
	// node restarted after an ordinary crash comes back with its own
	// disk; a data dir holding anything else is refused (*NotEmptyError).
	RestoreIfEmpty
	// RestoreEmpty (`echostore restore`) restores a data dir that holds
	// nothing (or was left by an unfinished restore) and refuses any
	// other (*NotEmptyError), before anything is created.
	RestoreEmpty
	// RestoreForce (`echostore restore --force`) restores into whatever
	// the data dir holds: volumes it lacks are created from the remote,
	// volumes it has are pulled (a volume with unpushed commits whose
	// remote moved fails the restore with graft's *DivergedError, dropping
	// nothing). Nothing in the data dir is deleted or overwritten.
	RestoreForce
)

// String returns the mode's name.
func (m RestoreMode) String() string {
	switch m {
	case RestoreOff:
		return "off"
	case RestoreIfEmpty:
		return "if-empty"
	case RestoreEmpty:
		return "empty"
	case RestoreForce:
		return "force"
	}
	return "RestoreMode(" + strconv.Itoa(int(m)) + ")"
}

// DefaultRemote returns the remote of a data dir when none is given:
// file://<absolute data>/remote.
func DefaultRemote(data string) (string, error) {
	abs, err := filepath.Abs(data)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", data, err)
	}
	return "file://" + filepath.ToSlash(filepath.Join(abs, "remote")), nil
}

// ReadMostlyCacheSize is the block cache of a Config.ReadMostly node: an
// archive read once in order finds nothing again in a larger one.
const ReadMostlyCacheSize = 8 << 20

// JobOutcomes says where a node keeps its jobs' outcomes
// (Config.JobOutcomes). Every ack, failure and stall's burial of a job of
// queue Q is appended, by the script that ends the delivery, to stream
// Stream of Q (emq:{Q}:stream:<Stream>) as the record
//
//	outcome <done|retry|dead> job <JOB_…> attempt <n> consumer <name> error <why> <the job's own fields…>
//
// whose Redis id is the time it ended (mq.JobOptions.Outcomes). The node
// declares that stream with Policy the first time it acks or fails a job
// of Q, so that the outcomes are folded into the archive and trimmed like
// any declared stream; a declaration of the stream made before (serve's
// configuration) is kept.
type JobOutcomes struct {
	// Stream is the outcome stream's name within each queue; zero: no
	// outcomes are kept.
	Stream names.Stream
	// Policy is the outcome streams' policy; the zero value is
	// DefaultOutcomePolicy.
	Policy StreamPolicy
}

// DefaultOutcomePolicy returns the policy of outcome streams when
// JobOutcomes.Policy is zero: archived, the newest 10,000 outcomes live.
func DefaultOutcomePolicy() StreamPolicy {
	return StreamPolicy{Archived: true, Window: Window{Keep: 10000}}
}

// policy returns o's policy, DefaultOutcomePolicy for the zero one.
func (o JobOutcomes) policy() StreamPolicy {
	if o.Policy == (StreamPolicy{}) {
		return DefaultOutcomePolicy()
	}
	return o.Policy
}

// check refuses a policy no stream could be declared with: a bad window,
// or an archived one on a live-only node (which has no archive).
func (o JobOutcomes) check(liveOnly bool) error {
	if o.Stream.IsZero() {
		return nil
	}
	p := o.policy()
	if err := p.Window.Validate(); err != nil {
		return fmt.Errorf("%w: job outcomes %s: %w", ErrConfig, o.Stream, err)
	}
	if p.Archived && liveOnly {
		return fmt.Errorf("%w: job outcomes %s: a live-only node has no archive: give them a policy that is not archived", ErrConfig, o.Stream)
	}
	return nil
}

// mqJobs returns the mq job options that keep o's outcomes.
func (o JobOutcomes) mqJobs() mq.JobOptions { return mq.JobOptions{Outcomes: o.Stream} }
