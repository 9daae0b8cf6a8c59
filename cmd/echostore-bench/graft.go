package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/graftbench"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/redact"
)

// newGraftCmd is `echostore-bench graft`: the local page store.
func newGraftCmd(g *globals) *cobra.Command {
	var (
		asJSON bool
		quick  bool
		cfg    = graftbench.Config{Dir: os.TempDir(), Pages: 1_000_000, Runs: 3, Duration: 2 * time.Second, Committers: 16, Gets: 200_000}
	)
	cmd := &cobra.Command{
		Use:   "graft",
		Short: "Benchmark the local page store (commits, group commit, reads, scans, Open)",
		Long: `Benchmark Graft, the local page store, in a temporary directory under --dir:
synced 1-page commits/s beside the raw fsync rate of the same directory;
16 writers on 16 volumes (group commit) against one; pages/s in 64-page
commits; Get p50/p99 and range-scan pages/s on a volume of --pages 150-byte
pages; Open latency. The documented run is the default (1,000,000 pages,
about two minutes); --quick uses 100,000 pages and shorter runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if quick {
				if !cmd.Flags().Changed("pages") {
					cfg.Pages = 100_000
				}
				if !cmd.Flags().Changed("duration") {
					cfg.Duration = 500 * time.Millisecond
				}
				if !cmd.Flags().Changed("gets") {
					cfg.Gets = 50_000
				}
			}
			if cfg.Pages < 1 || cfg.Runs < 1 || cfg.Committers < 1 || cfg.Gets < 1 || cfg.Duration <= 0 {
				return fmt.Errorf("bench graft: --pages, --runs, --committers, --gets and --duration must be positive")
			}
			if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
				return fmt.Errorf("bench graft: --dir %q is not a directory; pass an existing directory on the disk to measure", cfg.Dir)
			}
			cfg.Command = commandLine(cmd)
			cfg.Progress = bench.NewProgress(g.stdout, g.stderr, graftbench.Steps(cfg))
			r, err := graftbench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return r.WriteJSON(g.stdout)
			}
			return r.WriteTable(g.stdout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&quick, "quick", false, "a short run: 100,000 pages, 0.5 s rate runs, 50,000 Gets")
	f.StringVar(&cfg.Dir, "dir", cfg.Dir, "parent of the temporary directory to measure in (its disk is the one measured)")
	f.IntVar(&cfg.Pages, "pages", cfg.Pages, "pages in the read/scan volume")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "repeats of each figure (the median is reported)")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of each timed commit-rate run")
	f.IntVar(&cfg.Committers, "committers", cfg.Committers, "concurrent writers (one volume each) for the group-commit figure")
	f.IntVar(&cfg.Gets, "gets", cfg.Gets, "random Gets timed per run")
	return cmd
}

// commandLine spells the command as run: its path and the flags given,
// each URL's secrets hidden (it is written into the report).
func commandLine(cmd *cobra.Command) string {
	parts := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			parts = append(parts, "--"+f.Name)
		} else {
			parts = append(parts, "--"+f.Name+"="+redact.URL(f.Value.String()))
		}
	})
	return strings.Join(parts, " ")
}
