package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/lane"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/names"
)

// enqueueLockWait bounds how long enqueue waits for another process to
// release the outbox or the graft store.
const enqueueLockWait = 10 * time.Second

// acceptTier is an open accept tier over the data dir, the remote and Redis.
type acceptTier struct {
	out  *accept.Outbox
	gs   *graft.Store
	tier *accept.Tier
	stop func()
}

// openAcceptTier opens the outbox (<data>/accept/outbox), the graft store
// (<data>/graft) with the remote attached, and Redis, and starts the tier, which recovers
// what an earlier process left pending.
func openAcceptTier(ctx context.Context, g *globals) (_ *acceptTier, err error) {
	node, err := nodeFromEnv()
	if err != nil {
		return nil, err
	}
	a := &acceptTier{}
	var closers []func()
	a.stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			a.stop()
		}
	}()
	dir := filepath.Join(g.data, "accept")
	a.out, err = waitLock(ctx, func() (*accept.Outbox, error) {
		return accept.Open(ctx, filepath.Join(dir, "outbox"), accept.Options{Logger: g.log})
	}, accept.ErrBusy)
	if err != nil {
		return nil, fmt.Errorf("open the outbox in %s: %w", dir, err)
	}
	closers = append(closers, func() {
		if err := a.out.Close(context.WithoutCancel(ctx)); err != nil {
			g.log.Warn("close the outbox", "err", err)
		}
	})
	st, err := remote.Open(ctx, g.remoteURL(), drivers.All()...)
	if err != nil {
		return nil, fmt.Errorf("open the remote %s: %w; check --remote (or ECHOSTORE_REMOTE)", g.remoteShown(), err)
	}
	mqc, err := connectMQ(ctx, g)
	if err != nil {
		return nil, err
	}
	closers = append(closers, mqc.Close)
	gdir := filepath.Join(g.data, "graft")
	a.gs, err = waitLock(ctx, func() (*graft.Store, error) {
		// Commits and pushes are announced on the volume's lane.
		return graft.Open(ctx, gdir, graft.Options{Logger: g.log, Remote: st, Notifier: lane.New(mqc)})
	}, graft.ErrLocked)
	if err != nil {
		return nil, fmt.Errorf("open the graft store in %s: %w", gdir, err)
	}
	closers = append(closers, func() { _ = a.gs.Close() })
	a.tier, err = accept.NewTier(ctx, a.out, a.gs, graft.Replication{}, mqc, accept.TierOptions{Node: uint16(node), Logger: g.log})
	if err != nil {
		return nil, fmt.Errorf("start the accept tier: %w", err)
	}
	closers = append(closers, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueLockWait)
		defer cancel()
		if err := a.tier.Close(cctx); err != nil {
			g.log.Warn("close the accept tier", "err", err)
		}
	})
	return a, nil
}

// waitLock calls open until it succeeds, fails with an error other than
// busy, or enqueueLockWait passes.
func waitLock[T any](ctx context.Context, open func() (T, error), busy error) (T, error) {
	deadline := time.Now().Add(enqueueLockWait)
	for {
		v, err := open()
		if err == nil || !errors.Is(err, busy) || time.Now().After(deadline) {
			if err != nil && errors.Is(err, busy) {
				err = fmt.Errorf("%w (another echostore process holds it; waited %s)", err, enqueueLockWait)
			}
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// newEnqueueCmd is `echostore enqueue Q --payload JSON --mode async|sync`.
func newEnqueueCmd(g *globals) *cobra.Command {
	var payload, mode, id, runAtText string
	var delay time.Duration
	cmd := &cobra.Command{
		Use:   "enqueue Q --payload JSON [--mode async|sync] [--run-at RFC3339 | --delay D]",
		Short: "Enqueue a job through the accept tier (async: loss ≤ K; sync: replicated before the ack)",
		Long: `Enqueue one job on queue Q through the two-tier accept path.

--mode async acknowledges once the job is recorded in the outbox and
checkpointed on local disk. After printing, the process commits what is
pending to the queue's accept volume accept.Q.N, pushes it and puts it on the
job stream; if it cannot (or is killed), the next process that runs the accept
loop (serve, or any enqueue) does.

--mode sync acknowledges only after the job's batch is one commit of the
accept volume pushed to the remote; "lsn" is the remote LSN that made it
durable. The job then goes to the queue's job stream (emq:{Q}:jobs) with the
payload in the field "payload"; delivery is at least once, keyed by the id.

--run-at (RFC 3339, e.g. 2030-01-02T03:04:05Z) or --delay (e.g. 90s, 2h) makes
the job due later: it is committed and pushed as any other, and waits in the
queue's delayed set (emq:{Q}:jobs:delayed) until then; it is not on the job
stream, nor claimed, before. The run-at is kept to the millisecond.

Prints {"id":…,"mode":…,"lsn":…,"volume":…}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := names.ParseQueue(args[0])
			if err != nil {
				return fmt.Errorf("queue %q: %w", args[0], err)
			}
			m, err := accept.ParseMode(mode)
			if err != nil {
				return fmt.Errorf("--mode %q: want async or sync", mode)
			}
			// Strict, as serve is: one value, no duplicate names, valid
			// UTF-8 and no lone surrogates (encoding/json's Valid allows both).
			if !jsontext.Value(payload).IsValid() {
				return usageError("--payload is not one valid JSON value (duplicate names, invalid UTF-8 and lone surrogates are refused too): %q", payload)
			}
			var jobID brand.ID
			if id != "" {
				b, err := brand.Parse(id)
				if err != nil || b.Brand != brand.JOB || b.ID == 0 || brand.JOB.Format(b.ID) != id {
					return usageError("--id %q: want a JOB id (JOB_…) that is not zero, or no --id to mint one", id)
				}
				jobID = b.ID
			}
			runAt, err := parseRunAt(runAtText, delay, cmd.Flags().Changed("delay"), time.Now())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if done, err := enqueueViaServe(ctx, g, q.String(), jobID, []byte(payload), m, runAt); done {
				return err
			}
			a, err := openAcceptTier(ctx, g)
			if err != nil {
				return err
			}
			defer a.stop()
			r, err := a.tier.EnqueueAt(ctx, q, jobID, []byte(payload), m, runAt)
			if err != nil {
				return fmt.Errorf("enqueue on %s: %w", q, err)
			}
			if m == accept.Async {
				// K bounds the loss of a crash, not of an exit.
				if err := a.out.Flush(ctx); err != nil {
					return fmt.Errorf("checkpoint the outbox: %w", err)
				}
			}
			if err := printReceipt(g, r); err != nil {
				return err
			}
			// Any enqueue runs the loop: commit what is pending (earlier
			// async enqueues, and this one) before exiting. A failure here
			// loses nothing: the intents stay in the outbox.
			if err := a.tier.Drain(ctx); err != nil {
				g.log.Warn("commit pending intents; the next enqueue or serve retries", "err", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&payload, "payload", "", "the job, a JSON value")
	f.StringVar(&mode, "mode", "async", "async (loss ≤ K) or sync (replicated before the ack)")
	f.StringVar(&id, "id", "", "the job's id (JOB_…), to retry an enqueue idempotently; default a new one")
	f.StringVar(&runAtText, "run-at", "", "not due before this time (RFC 3339); default at once")
	f.DurationVar(&delay, "delay", 0, "not due before this long from now (e.g. 90s, 2h); default at once")
	cmd.MarkFlagsMutuallyExclusive("run-at", "delay")
	_ = cmd.MarkFlagRequired("payload")
	return cmd
}

// parseRunAt returns the run-at that --run-at or --delay (set says it was
// given) ask for, relative to now; the zero time for neither.
func parseRunAt(runAt string, delay time.Duration, set bool, now time.Time) (time.Time, error) {
	switch {
	case runAt != "":
		t, err := time.Parse(time.RFC3339Nano, runAt)
		if err != nil {
			return time.Time{}, fmt.Errorf("--run-at %q: want an RFC 3339 time such as 2030-01-02T03:04:05Z", runAt)
		}
		if t.UnixMilli() <= 0 {
			return time.Time{}, fmt.Errorf("--run-at %q: want a time after 1970", runAt)
		}
		return t, nil
	case set && delay < 0:
		return time.Time{}, fmt.Errorf("--delay %s: want a duration of zero or more", delay)
	case set && delay > 0:
		return now.Add(delay), nil
	}
	return time.Time{}, nil
}

func printReceipt(g *globals, r accept.Receipt) error {
	var lsn any
	if r.Mode == accept.Sync {
		lsn = r.LSN
	}
	out := struct {
		ID     string `json:"id"`
		Mode   string `json:"mode"`
		LSN    any    `json:"lsn"`
		Volume string `json:"volume"`
	}{brand.JOB.Format(r.ID), r.Mode.String(), lsn, r.Volume}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.stdout, string(b))
	return err
}
