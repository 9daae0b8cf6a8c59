package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// newEnqueueCmd is `echostore enqueue Q --payload JSON --mode async|sync`.
func newEnqueueCmd(g *globals) *cobra.Command {
	var payload, mode, id, runAtText, batch string
	var delay time.Duration
	cmd := &cobra.Command{
		Use:   "enqueue Q (--payload JSON | --batch FILE) [--mode async|sync] [--run-at RFC3339 | --delay D]",
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

--batch FILE (- for standard input) enqueues the payloads of FILE, one JSON
value a line, in batches of up to 1,000 handed to the committer together
(Node.EnqueueBatch): a sync batch waits one commit round per 64 jobs where one
enqueue after another waits a round each. Every line is checked before
anything is enqueued; --run-at and --delay apply to every job; no --id.

Prints {"id":…,"mode":…,"lsn":…,"volume":…}; with --batch, that line for each
job in order, with "error" on a job that was not enqueued (the exit status is
then 1).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := names.ParseQueue(args[0])
			if err != nil {
				return fmt.Errorf("queue %q: %w", args[0], err)
			}
			m, err := accept.ParseMode(mode)
			if err != nil {
				return usageError("--mode %q: want async or sync", mode)
			}
			if (batch == "") == (payload == "") {
				return usageError("give the job with --payload JSON, or a file of payloads with --batch FILE (not both)")
			}
			if batch != "" && id != "" {
				return usageError("--id retries one job: give it with --payload, not with --batch")
			}
			// Strict, as serve is: one value, no duplicate names, valid
			// UTF-8 and no lone surrogates (encoding/json's Valid allows both).
			if batch == "" && !jsontext.Value(payload).IsValid() {
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
			var jobs []echostore.BatchJob
			if batch != "" {
				if jobs, err = readBatch(cmd, batch, runAt); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisRequired)
			if err != nil {
				return err
			}
			defer b.close()
			var out []any
			failed := 0
			if batch != "" {
				for len(jobs) > 0 {
					n := min(len(jobs), echostore.MaxBatch)
					res, err := b.EnqueueBatch(ctx, q, jobs[:n], m)
					if err != nil {
						return err
					}
					for _, rc := range res.Receipts {
						out = append(out, rc)
					}
					failed += res.Failed
					jobs = jobs[n:]
				}
			} else {
				r, err := b.Enqueue(ctx, q, []byte(payload), echostore.EnqueueOptions{Mode: m, ID: jobID, RunAt: runAt})
				if err != nil {
					return err
				}
				out = append(out, r)
			}
			if b.node != nil && m == accept.Async {
				// K bounds the loss of a crash, not of an exit. (serve keeps
				// running: its accept tier holds the job.)
				if _, err := b.node.CheckpointOutbox(ctx); err != nil {
					return err
				}
			}
			for _, r := range out {
				if err := printJSON(g.stdout, r); err != nil {
					return err
				}
			}
			// Any enqueue runs the loop: commit what is pending (earlier
			// async enqueues, and this one) before exiting. A failure here
			// loses nothing: the intents stay in the outbox.
			if d, ok := b.backend.(interface{ Drain(context.Context) error }); ok && b.node != nil {
				if err := d.Drain(ctx); err != nil {
					g.log.Warn("commit pending intents; the next enqueue or serve retries", "err", err)
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d jobs were not enqueued (their lines say why)", failed, len(out))
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
	f.StringVar(&batch, "batch", "", "a file of payloads, one JSON value a line (- for standard input), enqueued in batches")
	return cmd
}

// readBatch reads the payloads of --batch (path, or - for the command's
// standard input): one JSON value a line, each checked as --payload is,
// blank lines skipped; every job due at runAt.
func readBatch(cmd *cobra.Command, path string, runAt time.Time) ([]echostore.BatchJob, error) {
	var r io.Reader = cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageError("--batch: %w", err)
		}
		defer f.Close()
		r = f
	}
	var jobs []echostore.BatchJob
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !jsontext.Value(line).IsValid() {
			return nil, usageError("--batch line %d is not one valid JSON value (duplicate names, invalid UTF-8 and lone surrogates are refused too): %.80q", n, line)
		}
		jobs = append(jobs, echostore.BatchJob{Payload: bytes.Clone(line), RunAt: runAt})
	}
	if err := sc.Err(); err != nil {
		return nil, usageError("--batch: %w", err)
	}
	if len(jobs) == 0 {
		return nil, usageError("--batch %s holds no payload", path)
	}
	return jobs, nil
}

// parseRunAt returns the run-at that --run-at or --delay (set says it was
// given) ask for, relative to now; the zero time for neither.
func parseRunAt(runAt string, delay time.Duration, set bool, now time.Time) (time.Time, error) {
	switch {
	case runAt != "":
		t, err := time.Parse(time.RFC3339Nano, runAt)
		if err != nil {
			return time.Time{}, usageError("--run-at %q: want an RFC 3339 time such as 2030-01-02T03:04:05Z", runAt)
		}
		if t.UnixMilli() <= 0 {
			return time.Time{}, usageError("--run-at %q: want a time after 1970", runAt)
		}
		return t, nil
	case set && delay < 0:
		return time.Time{}, usageError("--delay %s: want a duration of zero or more", delay)
	case set && delay > 0:
		return now.Add(delay), nil
	}
	return time.Time{}, nil
}
