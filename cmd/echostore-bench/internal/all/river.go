//go:build peers

package all

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/echostore/echostore/internal/testserver"
)

// riverModule is the module path of River, for its version in the build.
const riverModule = "github.com/riverqueue/river"

// riverArgs is the job River inserts: its JSON is the suite's payload
// (syncPayload), byte for byte.
type riverArgs struct {
	Bench string `json:"bench"`
	Pad   string `json:"pad"`
}

// Kind is River's name of the job kind.
func (riverArgs) Kind() string { return "peers" }

// riverWorker is the no-op Worker.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
}

// Work does nothing.
func (riverWorker) Work(context.Context, *river.Job[riverArgs]) error { return nil }

// riverPeer is River on a private Postgres for the peers suite.
type riverPeer struct {
	pg     *testserver.Postgres
	pool   *pgxpool.Pool
	insert *river.Client[pgx.Tx] // insert-only: no queues, no workers
	args   riverArgs
	logger *slog.Logger
}

// startRiver starts a private Postgres, runs River's migrations on it and
// opens an insert-only client whose pool has conns connections. A nil
// riverPeer with a nil error means River is left out: reason says why.
func startRiver(ctx context.Context, conns int) (rp *riverPeer, reason string, err error) {
	pg, err := testserver.StartPostgres(ctx)
	if err != nil {
		if errors.Is(err, testserver.ErrMissing) {
			return nil, err.Error(), nil
		}
		return nil, fmt.Sprintf("the private Postgres did not start: %v", err), nil
	}
	rp = &riverPeer{pg: pg, logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}
	defer func() {
		if err != nil {
			rp.close()
			rp = nil
		}
	}()
	if err := json.Unmarshal(syncPayload, &rp.args); err != nil {
		return nil, "", fmt.Errorf("river: payload: %w", err)
	}
	if b, err := json.Marshal(rp.args); err != nil || string(b) != string(syncPayload) {
		return nil, "", fmt.Errorf("river: the job's JSON %q is not the payload %q (%v)", b, syncPayload, err)
	}
	cfg, err := pgxpool.ParseConfig(pg.URL)
	if err != nil {
		return nil, "", fmt.Errorf("river: pool: %w", err)
	}
	// More connections than callers, so that no caller waits for one
	// (pgxpool's default is max(4, CPUs)).
	cfg.MaxConns = int32(conns)
	if rp.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, "", fmt.Errorf("river: pool: %w", err)
	}
	driver := riverpgxv5.New(rp.pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: rp.logger})
	if err != nil {
		return nil, "", fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, "", fmt.Errorf("river: migrate: %w", err)
	}
	if rp.insert, err = river.NewClient(driver, &river.Config{Logger: rp.logger}); err != nil {
		return nil, "", fmt.Errorf("river: insert client: %w", err)
	}
	return rp, "", nil
}

func (rp *riverPeer) close() {
	if rp.pool != nil {
		rp.pool.Close()
	}
	_ = rp.pg.Stop()
}

// reset empties River's job table, so that every level meets the same
// database (as the asynq levels' keys are deleted between levels).
func (rp *riverPeer) reset(ctx context.Context) error {
	if _, err := rp.pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return fmt.Errorf("river: truncate river_job: %w", err)
	}
	return nil
}

// insertCall is one Client.Insert of one job, the enqueue levels' call.
func (rp *riverPeer) insertCall(ctx context.Context) error {
	_, err := rp.insert.Insert(ctx, rp.args, nil)
	return err
}

// process inserts o.Jobs jobs into a queue of their own (InsertMany in
// batches: not timed), then times a River Client with a no-op Worker from
// Start until its subscription has reported every job completed (River
// reports a completion once its completer has written it to Postgres).
func (rp *riverPeer) process(ctx context.Context, queue string, o PeersOptions) (float64, error) {
	const batch = 1000
	params := make([]river.InsertManyParams, 0, batch)
	for left := o.Jobs; left > 0; left -= len(params) {
		params = params[:0]
		for range min(batch, left) {
			params = append(params, river.InsertManyParams{Args: rp.args, InsertOpts: &river.InsertOpts{Queue: queue}})
		}
		if _, err := rp.insert.InsertMany(ctx, params); err != nil {
			return 0, fmt.Errorf("river: queue the jobs: %w", err)
		}
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &riverWorker{}); err != nil {
		return 0, fmt.Errorf("river: worker: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(rp.pool), &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            rp.logger,
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: riverMaxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return 0, fmt.Errorf("river: client: %w", err)
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: o.Jobs + 1000, // no event dropped: each is counted
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, fmt.Errorf("river: start: %w", err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = client.Stop(sctx)
		scancel()
	}()
	done := 0
	timeout := time.After(5 * time.Minute)
	for done < o.Jobs {
		select {
		case ev, ok := <-events:
			if !ok {
				return 0, fmt.Errorf("river: the subscription closed after %d of %d jobs", done, o.Jobs)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return 0, fmt.Errorf("river: job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout:
			return 0, fmt.Errorf("river: %d of %d jobs completed after 5 minutes", done, o.Jobs)
		}
	}
	return float64(o.Jobs) / time.Since(start).Seconds(), nil
}

// RiverVersion is the River module version linked into the binary ("" if
// the build has no module information).
func RiverVersion() string { return moduleVersion(riverModule) }
