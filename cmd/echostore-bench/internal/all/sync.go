package all

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/cmd/echostore-bench/internal/acceptbench"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/names"
)

// SyncReport is sync enqueue latency against concurrent callers, per
// remote, beside one conditional 8 KiB PUT to the same remote.
type SyncReport struct {
	PayloadBytes int          `json:"payload_bytes"`
	WindowMs     float64      `json:"window_ms"` // length of each level
	Remotes      []SyncRemote `json:"remotes"`
}

// SyncRemote is one remote's figures.
type SyncRemote struct {
	Name   string      `json:"name"`
	Note   string      `json:"note"`
	PutP50 float64     `json:"put_p50_ms"` // one conditional 8 KiB PUT: the floor of a sync ack
	PutP99 float64     `json:"put_p99_ms"`
	Puts   int         `json:"puts"`
	Levels []SyncLevel `json:"levels"`
	// NoGroupWait is the most callers' level again on a tier whose
	// committer never waits for siblings (accept.TierOptions.GroupWait <
	// 0): the baseline of the group commit, in the same run.
	NoGroupWait *SyncLevel `json:"no_group_wait,omitempty"`
}

// SyncLevel is one level of concurrent callers.
type SyncLevel struct {
	Callers       int     `json:"callers"`
	Jobs          int     `json:"jobs"`
	JobsPerSec    float64 `json:"jobs_per_s"`
	P50           float64 `json:"p50_ms"`
	P99           float64 `json:"p99_ms"`
	Commits       uint64  `json:"commits"`
	JobsPerCommit float64 `json:"jobs_per_commit"`
	PushP50       float64 `json:"push_p50_ms"` // one push of the level's commits
	Pushes        int     `json:"pushes"`
}

var syncPayload = []byte(`{"bench":"sync enqueue","pad":"0123456789012345678901234567890123456789012345678901234567890123"}`)

func runSync(ctx context.Context, e *env, dir string, cfg Config, p *bench.Progress) (*SyncReport, error) {
	r := &SyncReport{PayloadBytes: len(syncPayload), WindowMs: float64(cfg.SyncWindow.Microseconds()) / 1e3}
	if err := e.startMinIO(ctx); err != nil {
		return nil, err
	}
	defer e.closeMinIO()
	for k, rem := range e.remotes {
		p.Step(rem.Name + ": conditional PUTs")
		queue := fmt.Sprintf("%s-%d", e.queue, k)
		sr, err := syncRemote(ctx, e, filepath.Join(dir, rem.Name), queue, rem, cfg, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rem.Name, err)
		}
		// The dispatched jobs leave Redis, so that later suites measure
		// a server holding only their own keys.
		for _, q := range []string{queue, queue + "-nowait"} {
			if err := e.deleteKeys(ctx, "emq:{"+q+"}*"); err != nil {
				return nil, err
			}
		}
		r.Remotes = append(r.Remotes, sr)
	}
	return r, nil
}

func syncRemote(ctx context.Context, e *env, dir, queue string, rem remoteSpec, cfg Config, p *bench.Progress) (SyncRemote, error) {
	sr := SyncRemote{Name: rem.Name, Note: rem.Note, Puts: cfg.SyncPuts}
	st, err := remote.Open(ctx, rem.URL, drivers.All()...)
	if err != nil {
		return sr, err
	}
	defer st.Close()
	page := make([]byte, 8192)
	var puts []time.Duration
	for i := range cfg.SyncPuts {
		t0 := time.Now()
		if err := st.PutIfAbsent(ctx, fmt.Sprintf("bench/%s/put-%d", queue, i), page); err != nil {
			return sr, fmt.Errorf("conditional PUT: %w", err)
		}
		puts = append(puts, time.Since(t0))
	}
	slices.Sort(puts)
	sr.PutP50, sr.PutP99 = ms(bench.Percentile(puts, 50)), ms(bench.Percentile(puts, 99))

	if sr.Levels, err = syncTier(ctx, e, rem.URL, dir, queue, accept.TierOptions{}, cfg.SyncCallers, cfg.SyncWindow, rem.Name, p); err != nil {
		return sr, err
	}
	most := slices.Max(cfg.SyncCallers)
	base, err := syncTier(ctx, e, rem.URL, dir+"-nowait", queue+"-nowait", accept.TierOptions{GroupWait: -1}, []int{most}, cfg.SyncWindow, rem.Name+", no group wait", p)
	if err != nil {
		return sr, err
	}
	sr.NoGroupWait = &base[0]
	return sr, nil
}

// syncTier runs the sync enqueue levels (callers) on a node of its own
// in dir over the remote at remoteURL, dispatching to queue.
func syncTier(ctx context.Context, e *env, remoteURL, dir, queue string, opts accept.TierOptions, callers []int, window time.Duration, name string, p *bench.Progress) ([]SyncLevel, error) {
	q, err := names.ParseQueue(queue)
	if err != nil {
		return nil, err
	}
	pusher := &acceptbench.TimedReplicator{Replicator: graft.Replication{}}
	node, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: e.redisURL, Remote: remoteURL,
		OutboxK: 1000, GroupWait: opts.GroupWait, Replicator: pusher, Drivers: drivers.All()})
	if err != nil {
		return nil, err
	}
	defer node.Close(context.WithoutCancel(ctx))
	// The first enqueue creates the volume; it is not timed.
	rc, err := node.Enqueue(ctx, q, syncPayload, echostore.EnqueueOptions{Mode: echostore.Sync})
	if err != nil {
		return nil, err
	}
	vn, err := names.ParseVolume(rc.Volume) // a receipt's name, as a client reads it
	if err != nil {
		return nil, err
	}
	var levels []SyncLevel
	for _, c := range callers {
		p.Step(fmt.Sprintf("%s: %d callers", name, c))
		pusher.Take()
		lv, err := syncLevel(ctx, node, vn, q, c, window)
		if err != nil {
			return nil, err
		}
		pushes := pusher.Take()
		lv.Pushes, lv.PushP50 = len(pushes), ms(bench.Percentile(pushes, 50))
		levels = append(levels, lv)
	}
	if err := node.Drain(ctx); err != nil {
		return nil, err
	}
	return levels, nil
}

// syncLevel runs callers goroutines enqueueing with Sync for window.
func syncLevel(ctx context.Context, node *echostore.Node, vol names.Volume, q names.Queue, callers int, window time.Duration) (SyncLevel, error) {
	head := func() (uint64, error) {
		st, err := node.VolumeStatus(ctx, vol)
		return st.LocalLSN, err
	}
	head0, err := head()
	if err != nil {
		return SyncLevel{}, err
	}
	lats := make([][]time.Duration, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(window)
	for k := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if _, err := node.Enqueue(ctx, q, syncPayload, echostore.EnqueueOptions{Mode: echostore.Sync}); err != nil {
					errs[k] = err
					return
				}
				lats[k] = append(lats[k], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return SyncLevel{}, err
	}
	head1, err := head()
	if err != nil {
		return SyncLevel{}, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	lv := SyncLevel{Callers: callers, Jobs: len(all), JobsPerSec: float64(len(all)) / elapsed.Seconds(),
		P50: ms(bench.Percentile(all, 50)), P99: ms(bench.Percentile(all, 99)), Commits: head1 - head0}
	if lv.Commits > 0 {
		lv.JobsPerCommit = float64(lv.Jobs) / float64(lv.Commits)
	}
	return lv, nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
