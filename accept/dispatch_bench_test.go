package accept

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// timedDispatcher counts the EnqueueBatch calls of the Dispatcher it wraps,
// their jobs and their time.
type timedDispatcher struct {
	Dispatcher
	calls, jobs atomic.Int64
	nanos       atomic.Int64
}

func (d *timedDispatcher) EnqueueBatch(ctx context.Context, q names.Queue, jobs []mq.Job) ([]mq.EnqueueResult, error) {
	start := time.Now()
	res, err := d.Dispatcher.EnqueueBatch(ctx, q, jobs)
	d.nanos.Add(int64(time.Since(start)))
	d.calls.Add(1)
	d.jobs.Add(int64(len(jobs)))
	return res, err
}

// commandStats returns INFO commandstats of the Redis at addr: calls and
// usec per command ("evalsha", "exec", …).
func commandStats(tb testing.TB, addr string) map[string][2]float64 {
	tb.Helper()
	s, err := testserver.Do(context.Background(), addr, "INFO", "commandstats")
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string][2]float64{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseFloat(v, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = [2]float64{calls, usec}
	}
	return out
}

// BenchmarkDispatch is the accept tier's "until in the job stream": 64
// callers async-enqueue a level of jobs (ACCEPT_DISPATCH_JOBS, default
// 20,000, as bench peers' level) on a fresh queue of a tier over a file://
// remote and the package's redis-server, and the level is timed from its
// start until the last of its jobs is in the queue's job stream (a Drain
// after the callers, as bench peers does). jobs/s is the median level's
// rate; beside it the median level's accept rate (the callers alone), and
// per level the commits and pushes, the dispatcher's EnqueueBatch calls
// and time, and Redis's own time in scripts and transactions per job
// (INFO commandstats):
//
//	go test -run='^$' -bench='^BenchmarkDispatch$' -benchtime=5x -count=5 ./accept/
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	rd := servers.Redis(b)
	n := 20000
	if v := os.Getenv("ACCEPT_DISPATCH_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	const callers = 64
	var topts TierOptions
	if v := os.Getenv("ACCEPT_DISPATCH_ASYNC_BATCH"); v != "" {
		var err error
		if topts.AsyncCommitBatch, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	mqc, err := mq.Connect(ctx, mq.Options{URL: rd.URL})
	if err != nil {
		b.Fatal(err)
	}
	td := &timedDispatcher{Dispatcher: mqc}
	r, err := openRigOn(ctx, dir, fileURL(filepath.Join(dir, "remote")), td, 1000, topts)
	if err != nil {
		b.Fatal(err)
	}
	r.mqc = mqc
	tr := &timedReplicator{Replicator: r.tier.rep}
	r.tier.rep = tr
	defer func() {
		if err := r.close(ctx); err != nil {
			b.Error(err)
		}
	}()
	payload := []byte(`{"bench":"dispatch","pad":"0123456789012345678901234567890123456789012345678901234567890123"}`)
	inStream := func(q names.Queue, want int64) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			st, err := mqc.Status(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			if st.Length >= want {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: %d of %d jobs in the job stream", q, st.Length, want)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}
	var rates, accepts []float64
	var commits, pushes, calls, jobs int64
	var pushTime, callTime time.Duration
	var luaUsec, txUsec, redisCalls float64
	level := 0
	for b.Loop() {
		b.StopTimer()
		level++
		q := qn(fmt.Sprintf("dispatch-%d-%d", time.Now().UnixNano(), level))
		// The first enqueue of a queue creates its accept volume: not timed.
		if _, err := r.tier.Enqueue(ctx, q, 0, payload, Async); err != nil {
			b.Fatal(err)
		}
		if err := r.tier.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		inStream(q, 1)
		tq, _ := r.tier.queue(ctx, q, false)
		head0 := tq.vol.Head()
		tr.Take()
		c0, j0, n0 := td.calls.Load(), td.jobs.Load(), td.nanos.Load()
		if _, err := testserver.Do(ctx, rd.Addr, "CONFIG", "RESETSTAT"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					if _, err := r.tier.Enqueue(ctx, q, 0, payload, Async); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		accepted := time.Since(start)
		if err := r.tier.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		inStream(q, int64(n)+1)
		el := time.Since(start)
		b.StopTimer()
		rates = append(rates, float64(n)/el.Seconds())
		accepts = append(accepts, float64(n)/accepted.Seconds())
		commits += int64(tq.vol.Head() - head0)
		ps := tr.Take()
		pushes += int64(len(ps))
		for _, d := range ps {
			pushTime += d
		}
		calls += td.calls.Load() - c0
		jobs += td.jobs.Load() - j0
		callTime += time.Duration(td.nanos.Load() - n0)
		st := commandStats(b, rd.Addr)
		luaUsec += st["evalsha"][1] + st["eval"][1]
		txUsec += st["exec"][1]
		for k, v := range st {
			if k != "info" && k != "config" {
				redisCalls += v[0]
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(rates)
	slices.Sort(accepts)
	lv := float64(level)
	b.ReportMetric(rates[len(rates)/2], "jobs/s")
	b.ReportMetric(accepts[len(accepts)/2], "accepted/s")
	b.ReportMetric(float64(commits)/lv, "commits/level")
	b.ReportMetric(float64(pushes)/lv, "pushes/level")
	b.ReportMetric(float64(pushTime.Milliseconds())/lv, "push-ms/level")
	b.ReportMetric(float64(calls)/lv, "dispatches/level")
	b.ReportMetric(float64(callTime.Milliseconds())/lv, "dispatch-ms/level")
	b.ReportMetric(luaUsec/float64(max(jobs, 1)), "lua-us/job")
	b.ReportMetric(txUsec/float64(max(jobs, 1)), "exec-us/job")
	b.ReportMetric(redisCalls/lv, "redis-cmds/level")
	b.ReportMetric(0, "ns/op")
}
