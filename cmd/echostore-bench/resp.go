package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/respbench"
	"github.com/echostore/echostore/internal/bench"
)

// newRESPCmd is `echostore-bench resp`: the RESP front beside Redis.
func newRESPCmd(g *globals) *cobra.Command {
	var (
		asJSON bool
		cfg    = respbench.Config{Dir: os.TempDir(), Records: 100_000, Live: 1000, Runs: 9, Ops: 5000}
	)
	cmd := &cobra.Command{
		Use:   "resp",
		Short: "Benchmark the RESP front (serve --resp) beside Redis, in the same run",
		Long: `Benchmark the RESP front against a private redis-server on loopback: XRANGE
- + and XREAD from 0 of an archived stream of --records records (all but --live
archived by one cycle) through the front, beside Redis's XRANGE and XREAD of the
same records kept live (goal ≥ 1.0×); and the p50 and p99 latency of GET and
XADD through the front beside Redis direct (goal: p50 overhead ≤ 100 µs).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Records < 1 || cfg.Live < 1 || cfg.Live >= cfg.Records || cfg.Runs < 1 || cfg.Ops < 1 {
				return usageError{fmt.Errorf("bench resp: --records, --runs and --ops must be positive and --live between 1 and --records")}
			}
			cfg.Command = commandLine(cmd)
			cfg.Progress = bench.NewProgress(g.stdout, g.stderr, respbench.Steps(cfg))
			return g.printReport(asJSON, cfg.Progress, func() (*bench.Report, error) { return respbench.Run(cmd.Context(), cfg) })
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cfg.Dir, "dir", cfg.Dir, "parent of the temporary data dir")
	f.IntVar(&cfg.Records, "records", cfg.Records, "records of the stream read")
	f.IntVar(&cfg.Live, "live", cfg.Live, "of them, how many stay live")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "repeats of each figure (the median is reported)")
	f.IntVar(&cfg.Ops, "ops", cfg.Ops, "commands timed per latency run")
	return cmd
}
