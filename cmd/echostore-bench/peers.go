package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/all"
	"github.com/echostore/echostore/internal/bench"
)

// newPeersCmd is `echostore-bench peers`: the accept tier beside asynq on
// the same Redis, in the same run (the peers suite of all, alone).
func newPeersCmd(g *globals) *cobra.Command {
	var (
		quick   bool
		tiny    bool
		asJSON  bool
		dir     string
		s3      string
		noMinIO bool
		plot    string
	)
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "Benchmark the accept tier beside asynq on the same Redis (and River on Postgres), in the same run",
		Long: `Benchmark echostore's job tier beside asynq (github.com/hibiken/asynq) on the
same Redis, in one process, interleaved, medians of three runs:

  enqueue     jobs/s and p50/p99 latency with 1 and 64 concurrent callers:
              asynq's Client.Enqueue; echostore's async enqueue, sync enqueue
              on file:// and sync enqueue on MinIO (a private one when its
              binary is found, or --s3); asynq's Client.Enqueue again on a
              second private redis-server with appendonly yes and
              appendfsync always, the durable peer of sync enqueue
  processing  jobs/s of asynq's Server with a no-op handler beside echostore
              consumers that claim a batch and acknowledge it in one call
  River       (github.com/riverqueue/river with riverpgxv5) on a private
              Postgres (fsync on), when initdb and postgres are found:
              Client.Insert with 1 and 64 callers, and a Client with a
              no-op Worker (MaxWorkers 1,000); informational, no goal.
              Without Postgres one row says why River is left out.

The goals (issue 19) stand beside their anchors: async enqueue ÷ asynq ≥ 5×
and sync enqueue to MinIO ÷ asynq ≥ 1× at 64 callers, claim + ack ÷ asynq's
server ≥ 1×; and (issue 26) sync enqueue to MinIO at 64 callers ≥ 1× the
durable asynq and ≥ 3× River's Client.Insert. Redis: the one at --redis if it answers, else a private
redis-server. It writes no file but --plot's; the all suite includes it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := all.Default()
			switch {
			case tiny:
				cfg = all.Tiny()
			case quick:
				cfg = all.Quick()
			}
			cfg.Dir, cfg.S3URL, cfg.NoMinIO = dir, s3, noMinIO
			cfg.RedisURL = g.redis
			if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
				return fmt.Errorf("bench peers: --dir %q is not a directory", cfg.Dir)
			}
			cfg.Command = commandLine(cmd)
			if bench.IsTerminal(g.stdout) {
				cfg.Progress = g.stderr
			}
			r, err := all.RunPeers(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if plot != "" {
				if err := all.WritePeersPlot(r, plot); err != nil {
					return fmt.Errorf("bench peers: --plot: %w", err)
				}
			}
			if asJSON {
				return r.WriteJSON(g.stdout)
			}
			fmt.Fprintf(g.stdout, "%s\n\n", all.PeersSettings(r))
			return r.WriteTable(g.stdout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "a smoke run: shorter levels, fewer jobs")
	f.BoolVar(&tiny, "tiny", false, "the smallest run, for tests (no meaningful figures)")
	_ = f.MarkHidden("tiny")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&dir, "dir", os.TempDir(), "parent of the scratch directory")
	f.StringVar(&s3, "s3", "", "an s3:// remote for sync enqueue instead of a private MinIO")
	f.BoolVar(&noMinIO, "no-minio", false, "measure sync enqueue on file:// only")
	f.StringVar(&plot, "plot", "", "also draw the jobs/s plot into this SVG file")
	return cmd
}
