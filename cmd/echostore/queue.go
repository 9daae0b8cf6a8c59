package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

func newQueueCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Consume and inspect job queues: list, claim, ack, fail, jobs, dead, redrive, delete-dead, status",
	}
	cmd.AddCommand(newQueueListCmd(g), newQueueClaimCmd(g), newQueueAckCmd(g), newQueueFailCmd(g),
		newQueueJobsCmd(g), newQueueDeadCmd(g), newQueueRedriveCmd(g), newQueueDeleteDeadCmd(g),
		newQueueStatusCmd(g))
	return cmd
}

// queueRun checks the queue's name, opens the backend and runs f with it,
// closing it after.
func queueRun(cmd *cobra.Command, g *globals, name string, f func(b backend, q names.Queue) error) error {
	q, err := names.ParseQueue(name)
	if err != nil {
		return err
	}
	return withBackend(cmd, g, redisLive, func(b backend) error { return f(b, q) })
}

func newQueueClaimCmd(g *globals) *cobra.Command {
	var (
		consumer string
		count    int
		stalled  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "claim QUEUE [--consumer NAME] [--count N] [--stalled DURATION]",
		Short: "Claim jobs and print them as JSON lines {\"id\",\"entry\",\"attempt\",\"fields\"}",
		Long: `Claim up to --count jobs that no consumer has had yet (due delayed jobs
included) for --consumer, and print one JSON line per job:
{"id":"JOB_…","entry":"<entry id>","attempt":1,"fields":{…}}.
Acknowledge each with "echostore queue ack QUEUE ENTRY" when done.
With --stalled D, first take over jobs claimed by any consumer and not
acknowledged for D or longer (jobs that used up their attempts go to the dead
letters instead). Prints nothing when there is no job.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > echostore.MaxBatch {
				return usageError("--count %d: want 1 to %d", count, echostore.MaxBatch)
			}
			if stalled < 0 {
				return usageError("--stalled %v: want a positive duration such as 5m", stalled)
			}
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				res, err := b.Claim(cmd.Context(), q, echostore.ClaimOptions{Consumer: consumer, Count: count, Stalled: stalled})
				if perr := printJSONLines(g.stdout, res.Jobs); perr != nil {
					return perr
				}
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&consumer, "consumer", "cli", "consumer name the jobs are claimed for")
	f.IntVar(&count, "count", 1, "claim at most N jobs")
	f.DurationVar(&stalled, "stalled", 0, "first take over jobs unacknowledged for this long (0: do not)")
	return cmd
}

func newQueueAckCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ack QUEUE ENTRY [ENTRY …]",
		Short: "Acknowledge finished jobs by entry id; print {\"acked\":N}",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkEntryIDs(args[1:]); err != nil {
				return err
			}
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				res, err := b.Ack(cmd.Context(), q, args[1:])
				if err != nil {
					return err
				}
				return printJSON(g.stdout, res)
			})
		},
	}
}

func newQueueDeadCmd(g *globals) *cobra.Command {
	var (
		limit int
		after string
	)
	cmd := &cobra.Command{
		Use:   "dead QUEUE [--limit N] [--after ENTRY]",
		Short: "List dead letters as JSON lines {\"entry\",\"id\",\"attempts\",\"error\",\"fields\"}",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > echostore.MaxBatch {
				return usageError("--limit %d: want 1 to %d", limit, echostore.MaxBatch)
			}
			if after != "" {
				if err := checkEntryIDs([]string{after}); err != nil {
					return fmt.Errorf("--after: %w", err)
				}
			}
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				res, err := b.Dead(cmd.Context(), q, echostore.DeadOptions{After: after, Limit: limit})
				if perr := printJSONLines(g.stdout, res.Dead); perr != nil {
					return perr
				}
				return err
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "list at most N")
	cmd.Flags().StringVar(&after, "after", "", "start after this dead-letter entry id")
	return cmd
}

func newQueueRedriveCmd(g *globals) *cobra.Command {
	var (
		all   bool
		limit int
	)
	cmd := &cobra.Command{
		Use:   "redrive QUEUE (ENTRY … | --all [--limit N])",
		Short: "Move dead letters back to the queue with fresh attempts; print {\"entries\":[…],\"redriven\":N}",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 1) {
				return usageError("name the dead-letter entries to redrive, or give --all (not both)")
			}
			if all && (limit < 1 || limit > echostore.MaxBatch) {
				return usageError("--limit %d: want 1 to %d", limit, echostore.MaxBatch)
			}
			if err := checkEntryIDs(args[1:]); err != nil {
				return err
			}
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				opts := echostore.RedriveOptions{All: all, Entries: args[1:]}
				if all {
					opts.Limit = limit
				}
				res, err := b.Redrive(cmd.Context(), q, opts)
				if err != nil {
					return err
				}
				return printJSON(g.stdout, res)
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "redrive the oldest dead letters, up to --limit")
	cmd.Flags().IntVar(&limit, "limit", 1000, "with --all: at most N")
	return cmd
}

func newQueueStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status QUEUE",
		Short: "Print the queue's state as JSON {queue, length, pending, lag, delayed, dead, consumers, next_due}",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return queueRun(cmd, g, args[0], func(b backend, q names.Queue) error {
				st, err := b.QueueStatus(cmd.Context(), q)
				if err != nil {
					return err
				}
				return printJSON(g.stdout, st)
			})
		},
	}
}

// checkEntryIDs checks entry ids of the command line before anything is
// contacted: a malformed one is a usage error (exit status 2).
func checkEntryIDs(ids []string) error {
	for _, id := range ids {
		if err := mq.CheckEntryID(id); err != nil {
			return exitError{exitUsage, err}
		}
	}
	return nil
}
