package all

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server"
)

// LitestreamPerHour is the PUTs an hour of one active database under
// Litestream's default 1 s sync interval (one upload per interval with
// changes: ≈ 2.6 M a month, Litestream issue 261).
const LitestreamPerHour = 3600

// RequestsReport is what echostore asks of the object store, counted by the
// node's own metering of its remote (remote.MeteredStore, serve's
// echostore_remote_requests_total): a node opened as serve opens it, with
// background replication at the default replicate_every and trim_after:
// local. The counts are those of the Store interface, so every driver
// makes the same requests (the run uses file://).
type RequestsReport struct {
	ReplicateEveryS float64 `json:"replicate_every_s"`
	BeatS           float64 `json:"beat_s"` // serve's default beat: an active stream's cycles

	ArchivedRecords    int     `json:"archived_records"`
	CycleRecords       int     `json:"records_per_cycle"`
	PerMillionArchived float64 `json:"per_million_archived_records"`

	Jobs            int     `json:"jobs"`
	PerMillionAsync float64 `json:"per_million_async_jobs"`
	PerMillionSync  float64 `json:"per_million_sync_jobs"`
	SyncCallers     int     `json:"sync_callers"`

	IdleCycles   int     `json:"idle_cycles"` // cycles of the quiet streams during the idle window
	IdleSeconds  float64 `json:"idle_seconds"`
	IdleRequests int64   `json:"idle_requests"`
	PerIdleHour  float64 `json:"per_idle_hour"`

	Active []ActiveRequests `json:"active_streams"`
}

// ActiveRequests is the hourly cost of a number of active streams: each
// cycled on every beat with new records, each cycle's commit pushed by the
// background replication.
type ActiveRequests struct {
	Streams    int     `json:"streams"`
	PerCycle   float64 `json:"requests_per_stream_cycle"` // measured: a steady-state cycle of each stream, replicated
	PerHour    float64 `json:"per_hour"`                  // Streams × PerCycle × cycles an hour
	Litestream float64 `json:"litestream_per_hour"`       // Streams × LitestreamPerHour
}

func requestSteps(cfg Config) int { return 4 + len(cfg.RequestStreams) }

// runRequests measures the requests of each workload on one node.
func runRequests(ctx context.Context, env *env, dir string, cfg Config, p *bench.Progress) (*RequestsReport, error) {
	every := echostore.DefaultReplicateEvery
	n, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: env.redisURL, Remote: "file://" + filepath.Join(dir, "remote"),
		ReplicateEvery: every, Logger: slog.New(slog.DiscardHandler), AllowEviction: true})
	if err != nil {
		return nil, fmt.Errorf("open the node: %w", err)
	}
	defer n.Close(context.WithoutCancel(ctx))
	r := &RequestsReport{ReplicateEveryS: every.Seconds(), BeatS: server.DefaultBeat.Seconds(),
		ArchivedRecords: cfg.RequestRecords, CycleRecords: cfg.RequestCycle, Jobs: cfg.RequestJobs, SyncCallers: 16}
	count := func() int64 { return n.RemoteMeter().Total() }
	q := env.queue + "-req"

	// Archived records: cycles of CycleRecords, each pushed in the background.
	ar, err := names.ParseStreamRef(q, "ar")
	if err != nil {
		return nil, err
	}
	before := count()
	for done := 0; done < cfg.RequestRecords; done += cfg.RequestCycle {
		if err := appendRecords(ctx, n, ar, cfg.RequestCycle); err != nil {
			return nil, err
		}
		if _, err := n.Cycle(ctx, ar, echostore.CycleOptions{Window: echostore.Window{Keep: 1}}); err != nil {
			return nil, fmt.Errorf("cycle: %w", err)
		}
		if err := waitReplicated(ctx, n); err != nil {
			return nil, err
		}
	}
	r.PerMillionArchived = float64(count()-before) / float64(cfg.RequestRecords) * 1e6
	p.Step("archived records")

	// Idle: the stream cycled again and again with nothing new, and the
	// replication left alone for several intervals.
	before = count()
	start := time.Now()
	for time.Since(start) < cfg.RequestIdle {
		if _, err := n.Cycle(ctx, ar, echostore.CycleOptions{Window: echostore.Window{Keep: 1}}); err != nil {
			return nil, fmt.Errorf("idle cycle: %w", err)
		}
		r.IdleCycles++
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(cfg.RequestIdle / 20):
		}
	}
	r.IdleSeconds = time.Since(start).Seconds()
	r.IdleRequests = count() - before
	r.PerIdleHour = float64(r.IdleRequests) / r.IdleSeconds * 3600
	p.Step("idle")

	// Jobs, async then sync.
	queue, err := names.ParseQueue(q)
	if err != nil {
		return nil, err
	}
	before = count()
	for i := range cfg.RequestJobs {
		if _, err := n.Enqueue(ctx, queue, fmt.Appendf(nil, `{"n":%d}`, i), echostore.EnqueueOptions{Mode: echostore.Async}); err != nil {
			return nil, fmt.Errorf("async enqueue: %w", err)
		}
	}
	if err := n.Drain(ctx); err != nil {
		return nil, err
	}
	if err := waitReplicated(ctx, n); err != nil {
		return nil, err
	}
	r.PerMillionAsync = float64(count()-before) / float64(cfg.RequestJobs) * 1e6
	p.Step("async jobs")
	before = count()
	var wg sync.WaitGroup
	errs := make(chan error, r.SyncCallers)
	for c := range r.SyncCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < cfg.RequestJobs; i += r.SyncCallers {
				if _, err := n.Enqueue(ctx, queue, fmt.Appendf(nil, `{"s":%d}`, i), echostore.EnqueueOptions{Mode: echostore.Sync}); err != nil {
					errs <- fmt.Errorf("sync enqueue: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(<-errs); err != nil {
		return nil, err
	}
	if err := waitReplicated(ctx, n); err != nil {
		return nil, err
	}
	r.PerMillionSync = float64(count()-before) / float64(cfg.RequestJobs) * 1e6
	p.Step("sync jobs")

	// Active streams: a steady-state cycle of each (after a first one,
	// not counted, that creates its volume and reads the remote head),
	// with new records, replicated.
	perHour := 3600 / max(r.BeatS, r.ReplicateEveryS)
	for _, s := range cfg.RequestStreams {
		refs := make([]names.StreamRef, s)
		for i := range refs {
			if refs[i], err = names.ParseStreamRef(q, fmt.Sprintf("a%d-%d", s, i)); err != nil {
				return nil, err
			}
		}
		round := func() error {
			for _, ref := range refs {
				if err := appendRecords(ctx, n, ref, 10); err != nil {
					return err
				}
				if _, err := n.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}}); err != nil {
					return fmt.Errorf("cycle: %w", err)
				}
			}
			return waitReplicated(ctx, n)
		}
		if err := round(); err != nil {
			return nil, err
		}
		before = count()
		if err := round(); err != nil {
			return nil, err
		}
		per := float64(count()-before) / float64(s)
		r.Active = append(r.Active, ActiveRequests{Streams: s, PerCycle: per, PerHour: float64(s) * per * perHour,
			Litestream: float64(s) * LitestreamPerHour})
		p.Step(fmt.Sprintf("%d active streams", s))
	}
	return r, nil
}

// appendRecords appends k records to ref, in batches of 1,000.
func appendRecords(ctx context.Context, n *echostore.Node, ref names.StreamRef, k int) error {
	for k > 0 {
		b := min(k, 1000)
		batch := make([][]echostore.Field, b)
		for i := range batch {
			batch[i] = recordFields(i)
		}
		if _, err := n.Append(ctx, ref, batch); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		k -= b
	}
	return nil
}

// waitReplicated waits until every volume of the node is at its remote
// LSN (the background replication's work), bounded by a minute.
func waitReplicated(ctx context.Context, n *echostore.Node) error {
	deadline := time.Now().Add(time.Minute)
	for {
		vols, err := n.Volumes(ctx)
		if err != nil {
			return err
		}
		behind := 0
		for _, v := range vols.Volumes {
			if v.Lag.Commits > 0 {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d volumes not replicated within a minute", behind)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
