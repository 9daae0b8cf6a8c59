package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/spf13/cobra"
)

func newQueueCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "The consumer side of a job queue: claim, ack, dead, redrive, status",
	}
	cmd.AddCommand(newQueueClaimCmd(g), newQueueAckCmd(g), newQueueDeadCmd(g),
		newQueueRedriveCmd(g), newQueueStatusCmd(g))
	return cmd
}

// queueRun connects and runs f with the client, closing it after.
func queueRun(cmd *cobra.Command, g *globals, queue string, f func(c *mq.Client, q names.Queue) error) error {
	c, err := connectMQ(cmd.Context(), g)
	if err != nil {
		return err
	}
	defer c.Close()
	q, err := names.ParseQueue(queue)
	if err != nil {
		return err
	}
	return f(c, q)
}

// printJSONLines prints each value as one JSON line.
func printJSONLines[T any](w io.Writer, vals []T) error {
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for _, v := range vals {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return out.Flush()
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
			if count < 1 {
				return fmt.Errorf("--count %d: want 1 or more", count)
			}
			if stalled < 0 {
				return fmt.Errorf("--stalled %v: want a positive duration such as 5m", stalled)
			}
			return queueRun(cmd, g, args[0], func(c *mq.Client, q names.Queue) error {
				ctx := cmd.Context()
				var jobs []mq.Delivery
				if stalled > 0 {
					rec, err := c.Recover(ctx, q, consumer, stalled, count)
					if err != nil {
						return err
					}
					jobs = rec.Claimed
				}
				var claimErr error
				if len(jobs) < count {
					more, err := c.Claim(ctx, q, consumer, count-len(jobs))
					jobs = append(jobs, more...)
					claimErr = err
				}
				if err := printJSONLines(g.stdout, jobs); err != nil {
					return err
				}
				return claimErr
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
			return queueRun(cmd, g, args[0], func(c *mq.Client, q names.Queue) error {
				n, err := c.Ack(cmd.Context(), q, args[1:]...)
				if err != nil {
					return err
				}
				return printJSONLines(g.stdout, []any{map[string]int64{"acked": n}})
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
			if limit < 1 {
				return fmt.Errorf("--limit %d: want 1 or more", limit)
			}
			return queueRun(cmd, g, args[0], func(c *mq.Client, q names.Queue) error {
				dead, err := c.Dead(cmd.Context(), q, after, limit)
				if perr := printJSONLines(g.stdout, dead); perr != nil {
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
		Short: "Move dead letters back to the queue with fresh attempts; print {\"redriven\":N,\"entries\":[…]}",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 1) {
				return errors.New("name the dead-letter entries to redrive, or give --all (not both)")
			}
			return queueRun(cmd, g, args[0], func(c *mq.Client, q names.Queue) error {
				var ids []string
				var err error
				if all {
					ids, err = c.RedriveAll(cmd.Context(), q, limit)
				} else {
					ids, err = c.Redrive(cmd.Context(), q, args[1:]...)
				}
				if err != nil {
					return err
				}
				if ids == nil {
					ids = []string{}
				}
				return printJSONLines(g.stdout, []any{struct {
					Redriven int      `json:"redriven"`
					Entries  []string `json:"entries"`
				}{len(ids), ids}})
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
			return queueRun(cmd, g, args[0], func(c *mq.Client, q names.Queue) error {
				st, err := c.Status(cmd.Context(), q)
				if err != nil {
					return err
				}
				return printJSONLines(g.stdout, []mq.QueueStatus{st})
			})
		},
	}
}
