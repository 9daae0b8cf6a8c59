package acceptbench

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
)

// TimedReplicator is an accept.Replicator that records how long each Push
// of the one it wraps takes, for the sync enqueue benchmarks (a sync
// enqueue waits for one push). Safe for concurrent use.
type TimedReplicator struct {
	accept.Replicator
	mu sync.Mutex
	d  []time.Duration
}

// Push pushes through the wrapped Replicator and records how long it took.
func (r *TimedReplicator) Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error) {
	start := time.Now()
	sp, err := r.Replicator.Push(ctx, vol)
	r.mu.Lock()
	r.d = append(r.d, time.Since(start))
	r.mu.Unlock()
	return sp, err
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
