package main

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// queueRow is one line of queue list.
type queueRow struct {
	Queue names.Queue `json:"queue"`
}

func newQueueListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the queues as JSON lines {\"queue\"}, by name",
		Long: `List the queues that have a job stream in Redis (at most 1,000), one JSON
line per queue, {"queue":"<name>"}, sorted by name. While serve holds --data
the list is serve's (GET /v1/queues), which also names the queues serve has
handled or declares in its configuration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withBackend(cmd, g, redisLive, func(b backend) error {
				qs, err := b.Queues(cmd.Context())
				if err != nil {
					return err
				}
				slices.SortFunc(qs, func(a, b names.Queue) int { return cmp.Compare(a.String(), b.String()) })
				rows := make([]queueRow, len(qs))
				for i, q := range qs {
					rows[i] = queueRow{q}
				}
				return printJSONLines(g.stdout, rows)
			})
		},
	}
}

func newQueueJobsCmd(g *globals) *cobra.Command {
	var (
		state string
		limit int
	)
	cmd := &cobra.Command{
		Use:   "jobs QUEUE --state (ready|pending|delayed|dead) [--limit N]",
		Short: "List jobs in one state as JSON lines {\"state\",\"entry\",\"id\",\"attempt\",…,\"fields\"}",
		Long: `List up to --limit jobs of the queue in --state, oldest first, one JSON line
per job: {"state":…,"entry":"<entry id>","id":"JOB_…","attempt":n,…,"fields":{…}}.
ready: not yet claimed (attempt is the one they get next); pending: claimed and
not acknowledged, with "consumer" and "idle_ms"; delayed: waiting for their
time ("due"; no entry yet); dead: the dead letters, with "error". Prints
nothing when there is no such job.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := mq.ParseJobState(state)
			if err != nil {
				return exitError{exitUsage, fmt.Errorf("--state: %w", err)}
			}
			if limit < 1 || limit > echostore.MaxBatch {
				return usageError("--limit %d: want 1 to %d", limit, echostore.MaxBatch)
			}
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				res, err := b.Jobs(cmd.Context(), q, st, limit)
				if perr := printJSONLines(g.stdout, res.Jobs); perr != nil {
					return perr
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "the jobs' state: ready, pending, delayed or dead")
	cmd.Flags().IntVar(&limit, "limit", 50, "list at most N")
	_ = cmd.MarkFlagRequired("state")
	return cmd
}

func newQueueFailCmd(g *globals) *cobra.Command {
	var (
		consumer, reason string
		attempt          int
	)
	cmd := &cobra.Command{
		Use:   "fail QUEUE ENTRY --error TEXT [--consumer NAME] [--attempt N]",
		Short: "Fail a claimed job; print {\"failed\",\"dead\",\"attempts\",\"retry_at\"}",
		Long: `Report that --consumer failed its delivery of the job at ENTRY (the "entry" and
"attempt" that queue claim printed). The job leaves the job stream for its
next attempt after the queue's backoff, which grows with --attempt (printed
as "retry_at"), or, once it has had its attempts (5), for the dead letters
with --error as its error. A job pending no more (acknowledged, failed or
buried already) prints {"failed":false,…}; one that another consumer has
taken over fails the command.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mq.CheckConsumer(consumer); err != nil {
				return exitError{exitUsage, fmt.Errorf("--consumer: %w", err)}
			}
			if attempt < 1 {
				return usageError("--attempt %d: want the attempt that failed, 1 or more", attempt)
			}
			if len(reason) > echostore.MaxFailReason {
				return usageError("--error of %d bytes: at most %d", len(reason), echostore.MaxFailReason)
			}
			if err := checkEntryIDs(args[1:]); err != nil {
				return err
			}
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				res, err := b.Fail(cmd.Context(), q, echostore.FailOptions{Consumer: consumer, Entry: args[1], Attempt: attempt, Reason: reason})
				if err != nil {
					return err
				}
				return printJSON(g.stdout, res)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&reason, "error", "", "why the job failed (a dead letter keeps it)")
	f.StringVar(&consumer, "consumer", "cli", "the consumer that claimed the job")
	f.IntVar(&attempt, "attempt", 1, "the attempt that failed (the claim's \"attempt\")")
	_ = cmd.MarkFlagRequired("error")
	return cmd
}

// confirmDeleteDeadFlag is the flag queue delete-dead insists on.
const confirmDeleteDeadFlag = echostore.DeleteDeadConfirm

func newQueueDeleteDeadCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete-dead QUEUE ENTRY [ENTRY …] --" + confirmDeleteDeadFlag,
		Short: "Delete dead letters by entry id; print {\"deleted\":N}",
		Long: `Delete the dead letters at the given entries (as queue dead lists them, at most
1,000). A deleted dead letter exists nowhere else: without --` + confirmDeleteDeadFlag + `
nothing is deleted. Entries that are no dead letter are not counted.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args)-1 > echostore.MaxBatch {
				return usageError("%d entries: at most %d at a time", len(args)-1, echostore.MaxBatch)
			}
			if err := checkEntryIDs(args[1:]); err != nil {
				return err
			}
			if !yes {
				return usageError("queue delete-dead deletes dead letters for good; nothing was deleted: add --%s to confirm", confirmDeleteDeadFlag)
			}
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				res, err := b.DeleteDead(cmd.Context(), q, args[1:])
				if err != nil {
					return err
				}
				return printJSON(g.stdout, res)
			})
		},
	}
	cmd.Flags().BoolVar(&yes, confirmDeleteDeadFlag, false, "confirm: delete the dead letters")
	return cmd
}

func newStreamGroupsCmd(g *globals) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "groups (QUEUE STREAM | --key K)",
		Short: "List the stream's consumer groups as JSON {\"groups\":[…],\"checked_at\"}",
		Long: `List the consumer groups of the live stream (XINFO GROUPS), each
{"group","consumers","pending","last_delivered","lag","holds_trim","stalled"}:
holds_trim when it has entries pending or not yet delivered, which no trim
passes; stalled the last archive cycle's verdict on it (max_live, max_hold,
passed; "" if none), judged at checked_at ("" before any cycle).`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, _, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			return withBackend(cmd, g, redisLive, func(b backend) error {
				res, err := b.Groups(cmd.Context(), ref)
				if err != nil {
					return err
				}
				return printJSON(g.stdout, res)
			})
		},
	}
	cmd.Flags().StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}
