//go:build peers

package all

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

// peerEnv is what each measurement of the suite talks to.
type peerEnv struct {
	asynq    *asynq.Client
	asynqOpt asynq.RedisClientOpt
	asynqQ   string // the enqueue levels' queue
	// durable is asynq's client on a private redis-server with
	// appendfsync always (nil: no redis-server binary for it).
	durable   *asynq.Client
	fileNode  *echostore.Node
	minioNode *echostore.Node // nil: no MinIO in this run
	river     *riverPeer      // nil: River left out
	run       string          // a tag of the run, in queue names
}

// runPeers measures the peers suite. MinIO, if the run has one, and
// Postgres for River are started for it and stopped after; without
// Postgres, River's rows are one "left out" row that says why.
func runPeers(ctx context.Context, e *env, dir string, o PeersOptions, p *bench.Progress) (*bench.Report, error) {
	r := bench.NewReport("peers", "")
	ropt, err := asynq.ParseRedisURI(e.redisURL)
	if err != nil {
		return nil, fmt.Errorf("peers: asynq: %w", err)
	}
	opt, ok := ropt.(asynq.RedisClientOpt)
	if !ok {
		return nil, fmt.Errorf("peers: asynq: %s is not a single Redis", e.redisURL)
	}
	// One Client shared by every caller (asynq's documented use), its pool
	// as large as the most callers so that no caller waits for a
	// connection.
	opt.PoolSize = max(slices.Max(o.Callers), o.AsynqConcurrency) + 8
	pe := &peerEnv{asynqOpt: opt, run: fmt.Sprintf("%08x", rand.Uint32())}
	pe.asynqQ = "peers-" + pe.run
	pe.asynq = asynq.NewClient(opt)
	defer pe.asynq.Close()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		// This run's keys alone: --redis may hold others' asynq queues.
		_ = e.deleteKeys(cctx, "asynq:{"+pe.asynqQ+"*")
		if qs, err := e.raw.Do(cctx, e.raw.B().Smembers().Key("asynq:queues").Build()).AsStrSlice(); err == nil {
			for _, q := range qs {
				if strings.HasPrefix(q, pe.asynqQ) {
					_ = e.raw.Do(cctx, e.raw.B().Srem().Key("asynq:queues").Member(q).Build()).Error()
				}
			}
		}
		_ = e.deleteKeys(cctx, "emq:{peers-"+pe.run+"*")
		_ = e.deleteKeys(cctx, "emq:{vol.accept.peers-"+pe.run+"*")
		cancel()
	}()

	// The durable peer: asynq on its own private redis-server that fsyncs
	// its append-only file before it answers, on the scratch directory's
	// disk, as the file:// remote is.
	aofDir := filepath.Join(dir, "redis-aof")
	if err := os.MkdirAll(aofDir, 0o755); err != nil {
		return nil, fmt.Errorf("peers: durable asynq's Redis: %w", err)
	}
	if dr, err := testserver.StartRedis(ctx, testserver.RedisConfig{AOF: true, Dir: aofDir}); err == nil {
		defer func() { _ = dr.Stop() }()
		dopt := opt
		dopt.Addr = dr.Addr
		dopt.Password, dopt.Username, dopt.TLSConfig, dopt.DB = "", "", nil, 0
		pe.durable = asynq.NewClient(dopt)
		defer pe.durable.Close()
	} else {
		r.Rows = append(r.Rows, bench.Row{Name: peerAsynqDurable + ": left out", Unit: "left out", Note: "no private redis-server with appendfsync always: " + err.Error()})
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func(node int, name, url string) (*echostore.Node, error) {
		return echostore.Open(ctx, echostore.Config{Data: filepath.Join(dir, name), Redis: e.redisURL, Remote: url,
			NodeNumber: node, Drivers: drivers.All(), Logger: quiet})
	}
	for _, rem := range e.remotes {
		switch rem.Name {
		case "file":
			if pe.fileNode, err = open(1, "file", rem.URL); err != nil {
				return nil, err
			}
			defer pe.fileNode.Close(context.WithoutCancel(ctx))
		case "minio", "s3":
			if err := e.startMinIO(ctx); err != nil {
				return nil, err
			}
			defer e.closeMinIO()
			url := rem.URL
			if k := slices.IndexFunc(e.remotes, func(x remoteSpec) bool { return x.Name == rem.Name }); k >= 0 {
				url = e.remotes[k].URL
			}
			if pe.minioNode, err = open(2, "minio", url); err != nil {
				return nil, err
			}
			defer pe.minioNode.Close(context.WithoutCancel(ctx))
		}
	}

	riverLeftOut := ""
	pe.river, riverLeftOut, err = startRiver(ctx, slices.Max(o.Callers)+8)
	if err != nil {
		return nil, fmt.Errorf("peers: %w", err)
	}
	if pe.river != nil {
		defer pe.river.close()
	}

	type lvKey struct {
		sys     string
		callers int
	}
	jps := map[lvKey][]float64{}
	p50 := map[lvKey][]float64{}
	p99 := map[lvKey][]float64{}
	var dispatched, procAsynq, procAsynqN, procEcho, procRiver []float64
	add := func(k lvKey, lv peerLevel) {
		jps[k] = append(jps[k], lv.jobsPerSec)
		p50[k] = append(p50[k], ms(lv.p50))
		p99[k] = append(p99[k], ms(lv.p99))
	}
	for run := range o.Runs {
		// Interleaved: each repetition measures every system at each
		// level, the order of the systems turning with the run, so that a
		// drift of the shared machine's load falls on all of them.
		for _, c := range o.Callers {
			systems := []string{peerAsynqEnqueue, peerAsync, peerSyncFile, peerSyncMinIO, peerRiverInsert, peerAsynqDurable}
			rot := run % len(systems)
			systems = append(systems[rot:], systems[:rot]...)
			for _, sys := range systems {
				p.Step(fmt.Sprintf("run %d: %s, %d callers", run+1, sys, c))
				lv, extra, err := pe.enqueueLevel(ctx, sys, run, c, o.Window, o.LevelJobs)
				if err != nil {
					return nil, fmt.Errorf("peers: %s, %d callers: %w", sys, c, err)
				}
				if lv.jobs == 0 {
					continue // no MinIO
				}
				add(lvKey{sys, c}, lv)
				if sys == peerAsync && c == slices.Max(o.Callers) {
					dispatched = append(dispatched, extra)
				}
			}
			// What an enqueue level left in Redis goes, so that every
			// level meets the same server (after the batch levels).
			if err := e.deleteKeys(ctx, "asynq:{"+pe.asynqQ+"}:*"); err != nil {
				return nil, err
			}
			if pe.river != nil {
				if err := pe.river.reset(ctx); err != nil {
					return nil, err
				}
			}
		}
		for _, b := range []struct {
			name string
			node *echostore.Node
		}{{"file://", pe.fileNode}, {"MinIO", pe.minioNode}} {
			if b.node == nil {
				continue
			}
			p.Step(fmt.Sprintf("run %d: %s, %s", run+1, peerSyncBatch, b.name))
			lv, err := pe.batchLevel(ctx, b.node, b.name, run, o.Window, o.LevelJobs)
			if err != nil {
				return nil, fmt.Errorf("peers: %s, %s: %w", peerSyncBatch, b.name, err)
			}
			k := lvKey{peerSyncBatch + ", " + b.name, 1}
			jps[k] = append(jps[k], lv.jobsPerSec)
			p50[k] = append(p50[k], ms(lv.p50))
			p99[k] = append(p99[k], ms(lv.p99))
		}
		order := []func() error{
			func() error {
				p.Step(fmt.Sprintf("run %d: asynq server", run+1))
				v, err := pe.asynqProcess(ctx, run, 1, o)
				procAsynq = append(procAsynq, v)
				if err != nil {
					return err
				}
				v, err = pe.asynqProcess(ctx, run, o.Consumers, o)
				procAsynqN = append(procAsynqN, v)
				return err
			},
			func() error {
				p.Step(fmt.Sprintf("run %d: echostore claim + ack", run+1))
				v, err := pe.claimAckProcess(ctx, run, o)
				procEcho = append(procEcho, v)
				return err
			},
			func() error {
				p.Step(fmt.Sprintf("run %d: River client", run+1))
				if pe.river == nil {
					return nil
				}
				v, err := pe.river.process(ctx, fmt.Sprintf("peers_%s_%d", pe.run, run), o)
				procRiver = append(procRiver, v)
				if err != nil {
					return err
				}
				return pe.river.reset(ctx)
			},
		}
		rot := run % len(order)
		order = append(order[rot:], order[:rot]...)
		for _, f := range order {
			if err := f(); err != nil {
				return nil, fmt.Errorf("peers: processing: %w", err)
			}
		}
	}

	for _, c := range o.Callers {
		for _, sys := range []string{peerAsynqEnqueue, peerAsynqDurable, peerAsync, peerSyncFile, peerSyncMinIO, peerRiverInsert} {
			k := lvKey{sys, c}
			if len(jps[k]) == 0 {
				continue
			}
			r.Add(peerRow(sys, c, "jobs/s"), "jobs/s", jps[k], "")
			r.Add(peerRow(sys, c, "p50"), "ms", p50[k], "")
			r.Add(peerRow(sys, c, "p99"), "ms", p99[k], "")
			if sys != peerAsynqEnqueue {
				r.Compare(peerRow(sys, c, "jobs/s"), peerRow(peerAsynqEnqueue, c, "jobs/s"), 0)
			}
			if sys == peerAsync && c == slices.Max(o.Callers) && len(dispatched) > 0 {
				name := r.Add(peerRow(peerAsyncDispatch, c, "jobs/s"), "jobs/s", dispatched,
					"jobs enqueued in the level ÷ the time until the last of them is in the queue's job stream in Redis (asynq's Enqueue returns once it is there)")
				r.Compare(name, peerRow(peerAsynqEnqueue, c, "jobs/s"), 0)
			}
		}
	}
	for _, name := range []string{"file://", "MinIO"} {
		k := lvKey{peerSyncBatch + ", " + name, 1}
		if len(jps[k]) == 0 {
			continue
		}
		row := r.Add(peerSyncBatch+", "+name+": jobs/s", "jobs/s", jps[k],
			fmt.Sprintf("Node.EnqueueBatch of %d jobs, mode sync, one call at a time: the call answers once the group commits holding its jobs are pushed", peerBatchJobs))
		r.Add(peerSyncBatch+", "+name+": p50 a call", "ms", p50[k], "")
		r.Add(peerSyncBatch+", "+name+": p99 a call", "ms", p99[k], "")
		r.Compare(row, peerRow(peerAsynqEnqueue, 1, "jobs/s"), 0)
	}
	most := slices.Max(o.Callers)
	// The goals of issue 19.
	r.Compare(peerRow(peerAsync, most, "jobs/s"), peerRow(peerAsynqEnqueue, most, "jobs/s"), 5)
	r.Compare(peerRow(peerSyncMinIO, most, "jobs/s"), peerRow(peerAsynqEnqueue, most, "jobs/s"), 1)
	// The goals of issue 26: sync enqueue beside the durable peers. Each
	// is a row of its own, so that the comparison with in-memory asynq
	// above stays as it was.
	if pe.durable != nil && r.Row(peerRow(peerSyncMinIO, most, "jobs/s")) != nil {
		row := r.Add(peerRow(peerSyncMinIO, most, "jobs/s, ÷ durable asynq"), "jobs/s", jps[lvKey{peerSyncMinIO, most}], "the same figure, beside asynq on a Redis that fsyncs before it answers")
		r.Compare(row, peerRow(peerAsynqDurable, most, "jobs/s"), 1)
	}
	if pe.river != nil && r.Row(peerRow(peerSyncMinIO, most, "jobs/s")) != nil {
		row := r.Add(peerRow(peerSyncMinIO, most, "jobs/s, ÷ River"), "jobs/s", jps[lvKey{peerSyncMinIO, most}], "the same figure, beside River's Client.Insert on Postgres (fsync on)")
		r.Compare(row, peerRow(peerRiverInsert, most, "jobs/s"), 3)
	}
	r.Add(peerAsynqServer, "jobs/s", procAsynq, fmt.Sprintf("%s jobs queued before the server starts; Concurrency %d; timed from Start to the last handler call", n(o.Jobs), o.AsynqConcurrency))
	servers := r.Add(fmt.Sprintf(peerAsynqServers, o.Consumers), "jobs/s", procAsynqN,
		fmt.Sprintf("the same jobs shared by %d Servers in the process, Concurrency %d each (a Server dequeues one task at a time)", o.Consumers, max(1, o.AsynqConcurrency/o.Consumers)))
	r.Add(peerClaimAck, "jobs/s", procEcho, fmt.Sprintf("%s jobs in the job stream before the consumers start; %d consumers, each claiming %d at a time and acknowledging them in one call", n(o.Jobs), o.Consumers, o.ClaimBatch))
	// The goal's anchor is the faster asynq of the two in this run.
	anchor := peerAsynqServer
	if bench.Median(procAsynqN) > bench.Median(procAsynq) {
		anchor = servers
	}
	r.Compare(peerClaimAck, anchor, 1)
	if len(procRiver) > 0 {
		// Informational: issue 19 sets no goal on River.
		r.Add(peerRiverProcess, "jobs/s", procRiver, fmt.Sprintf("%s jobs inserted before the client starts; one queue, MaxWorkers %d, FetchCooldown %s, FetchPollInterval %s (the fetch settings of River's own benchmark, `river bench`; its defaults, 100 ms and 1 s, would cap the queue at MaxWorkers jobs per 100 ms); timed from Start to the last completion its subscription reports",
			n(o.Jobs), riverMaxWorkers, riverFetchCooldown, riverFetchPollInterval))
		r.Compare(peerRiverProcess, anchor, 0)
	}
	if riverLeftOut != "" {
		r.Rows = append(r.Rows, bench.Row{Name: peerRiverLeftOut, Unit: "left out", Note: riverLeftOut})
	}
	r.Finish()
	return r, nil
}

// peerLevel is one enqueue level's figures.
type peerLevel struct {
	start      time.Time
	jobs       int
	jobsPerSec float64
	p50, p99   time.Duration
}

// enqueueLevel runs callers goroutines enqueueing through system sys for
// window. For echostore's async enqueue, extra is the jobs/s until the
// level's jobs are all in the job stream.
func (pe *peerEnv) enqueueLevel(ctx context.Context, sys string, run, callers int, window time.Duration, most int) (peerLevel, float64, error) {
	var call func(ctx context.Context) error
	var node *echostore.Node
	var q names.Queue
	switch sys {
	case peerAsynqEnqueue, peerAsynqDurable:
		client := pe.asynq
		if sys == peerAsynqDurable {
			if client = pe.durable; client == nil {
				return peerLevel{}, 0, nil
			}
		}
		task := asynq.NewTask("peers", syncPayload, asynq.Queue(pe.asynqQ))
		call = func(ctx context.Context) error {
			_, err := client.EnqueueContext(ctx, task)
			return err
		}
	case peerRiverInsert:
		if pe.river == nil {
			return peerLevel{}, 0, nil
		}
		call = pe.river.insertCall
	default:
		mode, tag := echostore.Sync, "sync"
		node = pe.fileNode
		switch sys {
		case peerAsync:
			mode, tag = echostore.Async, "async"
		case peerSyncMinIO:
			if node = pe.minioNode; node == nil {
				return peerLevel{}, 0, nil
			}
		}
		var err error
		if q, err = names.ParseQueue(fmt.Sprintf("peers-%s-%s-%d-%d", pe.run, tag, run, callers)); err != nil {
			return peerLevel{}, 0, err
		}
		call = func(ctx context.Context) error {
			_, err := node.Enqueue(ctx, q, syncPayload, echostore.EnqueueOptions{Mode: mode})
			return err
		}
		// The first enqueue of a queue creates its accept volume: not timed.
		if err := call(ctx); err != nil {
			return peerLevel{}, 0, err
		}
		if err := settle(ctx, node, q, 1); err != nil {
			return peerLevel{}, 0, err
		}
	}
	lv, err := timedCallers(ctx, callers, window, most, call)
	if err != nil || node == nil {
		return lv, 0, err
	}
	// The level's jobs reach the job stream before the next level starts,
	// so that no level's dispatch runs in another's window.
	if err := node.Drain(ctx); err != nil {
		return lv, 0, err
	}
	if err := settle(ctx, node, q, int64(lv.jobs)+1); err != nil {
		return lv, 0, err
	}
	return lv, float64(lv.jobs) / time.Since(lv.start).Seconds(), nil
}

// peerBatchJobs is the jobs of one call of the sync batch rows.
const peerBatchJobs = 64

// batchLevel is one caller making sync batch enqueues of peerBatchJobs
// jobs on node, one call at a time, for window or until most jobs; its
// p50 and p99 are a call's.
func (pe *peerEnv) batchLevel(ctx context.Context, node *echostore.Node, remote string, run int, window time.Duration, most int) (peerLevel, error) {
	tag := "file"
	if remote != "file://" {
		tag = "minio"
	}
	q, err := names.ParseQueue(fmt.Sprintf("peers-%s-batch-%s-%d", pe.run, tag, run))
	if err != nil {
		return peerLevel{}, err
	}
	jobs := make([]echostore.BatchJob, peerBatchJobs)
	for i := range jobs {
		jobs[i] = echostore.BatchJob{Payload: syncPayload}
	}
	call := func() error {
		res, err := node.EnqueueBatch(ctx, q, jobs, echostore.Sync)
		if err == nil && res.Failed > 0 {
			for _, rc := range res.Receipts {
				if rc.Error != "" {
					return fmt.Errorf("%d of %d jobs failed: %s", res.Failed, len(jobs), rc.Error)
				}
			}
		}
		return err
	}
	// The first enqueue of a queue creates its accept volume: not timed.
	if err := call(); err != nil {
		return peerLevel{}, err
	}
	var lats []time.Duration
	start := time.Now()
	done := 0
	for time.Since(start) < window && done < most {
		t0 := time.Now()
		if err := call(); err != nil {
			return peerLevel{}, err
		}
		lats = append(lats, time.Since(t0))
		done += len(jobs)
	}
	el := time.Since(start)
	slices.Sort(lats)
	lv := peerLevel{start: start, jobs: done, jobsPerSec: float64(done) / el.Seconds(),
		p50: lats[len(lats)/2], p99: lats[min(len(lats)-1, len(lats)*99/100)]}
	if err := node.Drain(ctx); err != nil {
		return lv, err
	}
	return lv, settle(ctx, node, q, int64(done+len(jobs)))
}

// timedCallers runs callers goroutines calling call in a loop for window
// or until they made most calls, and returns their figures.
func timedCallers(ctx context.Context, callers int, window time.Duration, most int, call func(context.Context) error) (peerLevel, error) {
	lats := make([][]time.Duration, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(window)
	var calls atomic.Int64
	for k := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && calls.Add(1) <= int64(most) && ctx.Err() == nil {
				t0 := time.Now()
				if err := call(ctx); err != nil {
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
		return peerLevel{}, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return peerLevel{start: start, jobs: len(all), jobsPerSec: float64(len(all)) / elapsed.Seconds(),
		p50: bench.Percentile(all, 50), p99: bench.Percentile(all, 99)}, nil
}

// settle waits, bounded, until queue q's job stream holds want entries.
func settle(ctx context.Context, node *echostore.Node, q names.Queue, want int64) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := node.QueueStatus(ctx, q)
		if err != nil {
			return err
		}
		if st.Length >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d jobs in the job stream after 60 s", q, st.Length, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// asynqProcess queues o.Jobs tasks, then times an asynq Server with a
// no-op handler from Start until its handler has run for every one.
func (pe *peerEnv) asynqProcess(ctx context.Context, run, servers int, o PeersOptions) (float64, error) {
	queue := fmt.Sprintf("%s-process-%d-%d", pe.asynqQ, run, servers)
	task := asynq.NewTask("peers", syncPayload, asynq.Queue(queue))
	var next atomic.Int64
	if _, err := timedJobs(ctx, slices.Max(o.Callers), o.Jobs, &next, func(ctx context.Context) error {
		_, err := pe.asynq.EnqueueContext(ctx, task)
		return err
	}); err != nil {
		return 0, fmt.Errorf("asynq: queue the jobs: %w", err)
	}
	var done atomic.Int64
	all := make(chan struct{})
	handler := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(o.Jobs) {
			close(all)
		}
		return nil
	})
	srvs := make([]*asynq.Server, servers)
	for k := range srvs {
		srvs[k] = asynq.NewServer(pe.asynqOpt, asynq.Config{
			Concurrency: max(1, o.AsynqConcurrency/servers),
			Queues:      map[string]int{queue: 1},
			Logger:      asynqLogger{},
			LogLevel:    asynq.ErrorLevel,
		})
	}
	start := time.Now()
	for _, srv := range srvs {
		if err := srv.Start(handler); err != nil {
			return 0, fmt.Errorf("asynq: start a server: %w", err)
		}
		defer srv.Shutdown()
	}
	select {
	case <-all:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("asynq: %d of %d jobs processed after 5 minutes", done.Load(), o.Jobs)
	}
	return float64(o.Jobs) / time.Since(start).Seconds(), nil
}

// claimAckProcess async-enqueues o.Jobs jobs, waits until they are all in
// the job stream, then times o.Consumers consumers claiming and
// acknowledging them until none is left.
func (pe *peerEnv) claimAckProcess(ctx context.Context, run int, o PeersOptions) (float64, error) {
	node := pe.fileNode
	q, err := names.ParseQueue(fmt.Sprintf("peers-%s-process-%d", pe.run, run))
	if err != nil {
		return 0, err
	}
	var next atomic.Int64
	if _, err := timedJobs(ctx, slices.Max(o.Callers), o.Jobs, &next, func(ctx context.Context) error {
		_, err := node.Enqueue(ctx, q, syncPayload, echostore.EnqueueOptions{})
		return err
	}); err != nil {
		return 0, fmt.Errorf("echostore: queue the jobs: %w", err)
	}
	if err := node.Drain(ctx); err != nil {
		return 0, err
	}
	if err := settle(ctx, node, q, int64(o.Jobs)); err != nil {
		return 0, err
	}
	var acked atomic.Int64
	errs := make([]error, o.Consumers)
	var wg sync.WaitGroup
	start := time.Now()
	for k := range o.Consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			consumer := fmt.Sprintf("peers-%d", k)
			for ctx.Err() == nil {
				res, err := node.Claim(ctx, q, echostore.ClaimOptions{Consumer: consumer, Count: o.ClaimBatch})
				if err != nil {
					errs[k] = err
					return
				}
				if len(res.Jobs) == 0 {
					return // every job queued is claimed
				}
				ids := make([]string, len(res.Jobs))
				for j, job := range res.Jobs {
					ids[j] = job.EntryID // the no-op handler
				}
				a, err := node.Ack(ctx, q, ids)
				if err != nil {
					errs[k] = err
					return
				}
				acked.Add(a.Acked)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return 0, fmt.Errorf("echostore: consumers: %w", err)
	}
	if got := acked.Load(); got != int64(o.Jobs) {
		return 0, fmt.Errorf("echostore: %d of %d jobs acknowledged", got, o.Jobs)
	}
	return float64(o.Jobs) / elapsed.Seconds(), nil
}

// timedJobs makes total calls of call from callers goroutines (next counts
// them out) and returns the elapsed time.
func timedJobs(ctx context.Context, callers, total int, next *atomic.Int64, call func(context.Context) error) (time.Duration, error) {
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for k := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) && ctx.Err() == nil {
				if err := call(ctx); err != nil {
					errs[k] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(append(errs, ctx.Err())...)
}

// asynqLogger drops asynq's logs below Error and passes the rest to
// slog's default logger.
type asynqLogger struct{}

func (asynqLogger) Debug(...any) {}
func (asynqLogger) Info(...any)  {}
func (asynqLogger) Warn(...any)  {}
func (asynqLogger) Error(args ...any) {
	slog.Error("asynq", "msg", fmt.Sprint(args...))
}
func (asynqLogger) Fatal(args ...any) {
	slog.Error("asynq (fatal)", "msg", fmt.Sprint(args...))
}

// asynqModule is the module path of asynq, for its version in the build.
const asynqModule = "github.com/hibiken/asynq"

// AsynqVersion is the asynq module version linked into the binary ("" if
// the build has no module information).
func AsynqVersion() string { return moduleVersion(asynqModule) }

// PeersBuilt reports whether this build has the peers (-tags peers).
const PeersBuilt = true
