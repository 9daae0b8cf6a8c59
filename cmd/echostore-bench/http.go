package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/httpbench"
	"github.com/echostore/echostore/internal/bench"
)

// newHTTPCmd is `echostore-bench http`: serve's HTTP append beside
// pipelined raw XADD.
func newHTTPCmd(g *globals) *cobra.Command {
	var (
		asJSON bool
		cfg    = httpbench.Config{Dir: os.TempDir(), Records: 100_000, Batch: 1000, Runs: 5}
	)
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Benchmark serve's HTTP append of JSON lines beside pipelined raw XADD, in the same run",
		Long: `Benchmark serve's HTTP append against a private redis-server: --records
records appended as JSON lines through POST /v1/streams/{q}/{s} on serve's
loopback TCP listener, --batch per request, one client; beside the same records XADDed raw to
Redis, --batch per pipelined round trip on one connection. Interleaved, --runs
times, medians (goal: HTTP ÷ XADD ≥ 0.5×).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Records < 1 || cfg.Batch < 1 || cfg.Batch > cfg.Records || cfg.Runs < 1 {
				return usageError{fmt.Errorf("bench http: --records, --batch and --runs must be positive, and --batch at most --records")}
			}
			cfg.Command = commandLine(cmd)
			cfg.Progress = bench.NewProgress(g.stdout, g.stderr, httpbench.Steps(cfg))
			return g.printReport(asJSON, cfg.Progress, func() (*bench.Report, error) { return httpbench.Run(cmd.Context(), cfg) })
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cfg.Dir, "dir", cfg.Dir, "parent of the temporary data dir")
	f.IntVar(&cfg.Records, "records", cfg.Records, "records appended per run")
	f.IntVar(&cfg.Batch, "batch", cfg.Batch, "records per HTTP request and per pipelined round trip")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "repeats of each figure (the median is reported)")
	return cmd
}
