package accept

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/echostore/echostore/brand"
)

// The tier's defaults (TierOptions).
const (
	// DefaultCommitBatch is the most jobs one commit takes: mq's default
	// claim batch, so that one commit is one consumer's claim.
	DefaultCommitBatch = 64
	// DefaultAsyncCommitBatch is the most jobs one commit of async jobs
	// alone takes (TierOptions.AsyncCommitBatch).
	DefaultAsyncCommitBatch = 512
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
	// AsyncCommitBatch is the most jobs one commit takes when none of them
	// has a sync caller waiting (default DefaultAsyncCommitBatch; at most
	// CommitBatch if smaller). A backlog of async intents (a burst of
	// async enqueues) is then committed and pushed in commits this large
	// rather than CommitBatch at a time: no caller waits for those pushes,
	// and each push costs the same whatever it carries, so the jobs reach
	// the job stream sooner. A commit that holds a sync job is bounded by
	// CommitBatch, as before.
	AsyncCommitBatch int
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

// withDefaults returns o with its zero fields set to their defaults, or
// ErrInvalid for a field no default can mend.
func (o TierOptions) withDefaults() (TierOptions, error) {
	if o.CommitBatch <= 0 {
		o.CommitBatch = DefaultCommitBatch
	}
	if o.AsyncCommitBatch <= 0 {
		o.AsyncCommitBatch = DefaultAsyncCommitBatch
	}
	if o.AsyncEvery <= 0 {
		o.AsyncEvery = DefaultAsyncEvery
	}
	if o.AsyncInterval <= 0 {
		o.AsyncInterval = DefaultAsyncInterval
	}
	if o.MaxQueues < 0 {
		return o, fmt.Errorf("%w: MaxQueues %d (0 means the default, %d)", ErrInvalid, o.MaxQueues, DefaultMaxQueues)
	}
	if o.MaxQueues == 0 {
		o.MaxQueues = DefaultMaxQueues
	}
	if o.Minter == nil {
		m, err := brand.NewMinter(int(o.Node))
		if err != nil {
			return o, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		o.Minter = m
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
