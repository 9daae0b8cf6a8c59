package accept

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/bench"
)

// TestSyncBenchReport measures sync enqueue against file:// and a real
// MinIO: the latency of a lone caller (p50/p99), and acknowledged jobs/s of
// 64 concurrent callers with the commits they shared, beside one conditional
// 8 KiB PUT to the same remote measured in the same run. Run with
//
//	ACCEPT_SYNC_BENCH=1 go test -run='^TestSyncBenchReport$' -v ./accept/
func TestSyncBenchReport(t *testing.T) {
	if os.Getenv("ACCEPT_SYNC_BENCH") == "" {
		t.Skip("set ACCEPT_SYNC_BENCH=1 to run the sync enqueue benchmark")
	}
	ctx := t.Context()
	rd := servers.Redis(t)
	m := servers.MinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	remotes := []struct{ name, url string }{{"file", ""}, {"minio", ""}}
	for i := range remotes {
		if remotes[i].name == "file" {
			remotes[i].url = fileURL(filepath.Join(t.TempDir(), "remote"))
			continue
		}
		b := fmt.Sprintf("bench-%d", rand.Uint64())
		if err := m.CreateBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
		remotes[i].url = m.URL(b)
	}
	for _, rem := range remotes {
		for _, wait := range []time.Duration{-1, 0} {
			syncBenchRemote(t, ctx, rem.name, rem.url, rd.URL, wait)
		}
	}
}

// timedReplicator records how long each Push of the Replicator it wraps
// takes (a sync enqueue waits for one push); acceptbench.TimedReplicator is
// the same for programs outside the package.
type timedReplicator struct {
	Replicator
	mu sync.Mutex
	d  []time.Duration
}

func (r *timedReplicator) Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error) {
	start := time.Now()
	sp, err := r.Replicator.Push(ctx, vol)
	r.mu.Lock()
	r.d = append(r.d, time.Since(start))
	r.mu.Unlock()
	return sp, err
}

// Take returns the durations of the pushes since the last Take, sorted.
func (r *timedReplicator) Take() []time.Duration {
	r.mu.Lock()
	d := r.d
	r.d = nil
	r.mu.Unlock()
	slices.Sort(d)
	return d
}

// syncBenchRemote is one remote's run of TestSyncBenchReport, with
// TierOptions.GroupWait = wait (-1: the committer never waits for
// siblings, the baseline of the default group commit).
func syncBenchRemote(t *testing.T, ctx context.Context, name, url, redisURL string, wait time.Duration) {
	const (
		lone    = 500
		callers = 64
		window  = 3 * time.Second
	)
	rem := struct{ name, url string }{name, url}
	// A queue (so an accept volume) of its own on the shared remote.
	queue := "bench"
	if wait >= 0 {
		queue = "benchwait"
	}
	{
		// One conditional 8 KiB PUT, the floor of a sync ack.
		st, err := remote.Open(ctx, rem.url, drivers.All()...)
		if err != nil {
			t.Fatal(err)
		}
		page := make([]byte, 8192)
		var puts []time.Duration
		for i := range 200 {
			start := time.Now()
			if err := st.PutIfAbsent(ctx, fmt.Sprintf("bench/%s/put-%d", queue, i), page); err != nil {
				t.Fatal(err)
			}
			puts = append(puts, time.Since(start))
		}
		st.Close()
		slices.Sort(puts)

		dir := t.TempDir()
		r, err := openRig(ctx, dir, rem.url, redisURL, 1000, TierOptions{GroupWait: wait})
		if err != nil {
			t.Fatal(err)
		}
		tr := &timedReplicator{Replicator: r.tier.rep}
		r.tier.rep = tr
		payload := []byte(`{"bench":"sync enqueue","pad":"0123456789012345678901234567890123456789012345678901234567890123"}`)
		var lat []time.Duration
		for range lone {
			start := time.Now()
			if _, err := r.tier.Enqueue(ctx, qn(queue), 0, payload, Sync); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		q, _ := r.tier.queue(ctx, qn(queue), false)
		head0 := q.vol.Head()

		var acked atomic.Int64
		var wg sync.WaitGroup
		wctx, cancel := context.WithTimeout(ctx, window)
		start := time.Now()
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for wctx.Err() == nil {
					if _, err := r.tier.Enqueue(wctx, qn(queue), 0, payload, Sync); err != nil {
						if wctx.Err() == nil {
							t.Error(err)
						}
						return
					}
					acked.Add(1)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		cancel()
		commits := q.vol.Head() - head0
		t.Logf("%s, group wait %v: conditional 8 KiB PUT p50 %s p99 %s | lone sync enqueue p50 %s p99 %s (%d calls) | 64 callers: %.0f acknowledged jobs/s, %d jobs in %d commits (%.1f jobs per commit)",
			rem.name, wait, bench.Percentile(puts, 50), bench.Percentile(puts, 99),
			bench.Percentile(lat, 50), bench.Percentile(lat, 99), lone,
			float64(acked.Load())/elapsed.Seconds(), acked.Load(), commits, float64(acked.Load())/float64(max(commits, 1)))
		pushes := tr.Take()
		t.Logf("%s: push p50 %s over %d pushes", rem.name, bench.Percentile(pushes, 50), len(pushes))
		r.settle(t, ctx)
		if err := r.close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
