package accept

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/echostore/echostore/graft"
)

// Replicator pushes a volume's local commits to its remote log. Push returns
// the remote LSN whose commit covers every local commit of vol made before
// the call: the LSN a sync enqueue prints.
type Replicator interface {
	Push(ctx context.Context, vol *graft.Volume) (remoteLSN uint64, err error)
}

// VolumePusher is the Replicator of Graft's own replication: Volume.Push,
// over the remote store attached to the volume's Store (graft.Options.Remote
// or Store.AttachRemote). The sync point and the pending remote commit live
// in the volume's record, so `echostore volume push` and the accept tier
// agree on them.
type VolumePusher struct{}

// Push publishes vol's local commits above its sync point as one remote
// commit and returns the remote LSN of the new sync point.
func (VolumePusher) Push(ctx context.Context, vol *graft.Volume) (uint64, error) {
	sp, err := vol.Push(ctx)
	if err != nil {
		return 0, fmt.Errorf("accept: push %s: %w", vol.Name(), err)
	}
	return sp.Remote, nil
}

// TimedReplicator is a Replicator that records how long each Push of the
// one it wraps takes, for the benchmarks (a sync enqueue waits for one
// push). Safe for concurrent use.
type TimedReplicator struct {
	Replicator
	mu sync.Mutex
	d  []time.Duration
}

// Push pushes through the wrapped Replicator and records how long it took.
func (r *TimedReplicator) Push(ctx context.Context, vol *graft.Volume) (uint64, error) {
	start := time.Now()
	lsn, err := r.Replicator.Push(ctx, vol)
	r.mu.Lock()
	r.d = append(r.d, time.Since(start))
	r.mu.Unlock()
	return lsn, err
}

// Take returns the durations of the pushes since the last Take, sorted,
// and forgets them.
func (r *TimedReplicator) Take() []time.Duration {
	r.mu.Lock()
	d := r.d
	r.d = nil
	r.mu.Unlock()
	slices.Sort(d)
	return d
}
