package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/all"
	"github.com/echostore/echostore/internal/bench"
)

// newAllCmd is `echostore-bench all`: every suite in one run, written
// to docs/BENCHMARKS.md (a generated block), docs/bench/report.json and
// SVG plots.
func newAllCmd(g *globals) *cobra.Command {
	var (
		quick   bool
		tiny    bool
		asJSON  bool
		out     string
		dir     string
		s3      string
		noMinIO bool
		only    []string
		history int
	)
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Run every suite and write docs/BENCHMARKS.md's generated block, a JSON report and plots",
		Long: `Run every benchmark suite in one process, each figure beside the anchor
measured in the same run:

  graft         synced commits beside the disk's raw fsync, group commit, reads,
                scans, Open (as echostore-bench graft)
  accept        outbox records/s against K beside the seed's whole-snapshot
                algorithm run in the same process and the seed's table;
                recovery and replay (as echostore-bench champ)
  sync enqueue  latency and jobs/s for 1 to 64 concurrent sync callers, on
                file:// and on MinIO (a private one when its binary is found,
                or --s3), beside one conditional PUT to the same remote
  archive       fold and merge-read records/s against history depth, beside
                Redis XRANGE of the same records kept live (a 256 MiB block
                cache, serve's cache_size: 256MiB); a key stream's cycle
                beside a queue stream's
  redis memory  used_memory while the history grows and the window stays,
                beside the same history kept live
  head lookup   object-store requests to find a remote head, beside GET
                probing, for logs of growing length
  peers         enqueue (1 and 64 callers: async, sync on file:// and MinIO)
                and claim + ack processing beside asynq on the same Redis,
                and River on a private Postgres when one is found (as
                echostore-bench peers)

It writes --out/BENCHMARKS.md (only the block between the markers
"<!-- bench all: begin -->" and "<!-- bench all: end -->"; the rest of the file
is kept byte for byte, and a file without them gets them before its first
section), --out/bench/report.json and four SVG plots in --out/bench.

Redis: the one at --redis if it answers, else a private redis-server started
for the run. The documented run is the default (about three minutes on a
loaded 2-core machine, and a minute more for peers); --quick is a smoke run.
Progress shows on a terminal only.

--only SUITE,… runs just those suites (graft, accept, sync_enqueue, archive,
redis_memory, head_lookup, resp, remote_requests, peers) and prints their
figures, writing nothing to --out. --history N is the opt-in deep-history run
(issue 19: N = 10000000, merge-read ≥ 3× XRANGE): the archive suite at N records
and the redis memory suite over 100 rounds of N/100, printed likewise, with a
1 GiB block cache for the archive; at 10M it takes 6–12 minutes on a loaded
2-core machine and about 1 GB of --dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := all.Default()
			switch {
			case history > 0:
				cfg = all.History(history)
			case tiny:
				cfg = all.Tiny()
			case quick:
				cfg = all.Quick()
			}
			cfg.Dir, cfg.Out, cfg.S3URL, cfg.NoMinIO = dir, out, s3, noMinIO
			if len(only) > 0 {
				cfg.Only = only
			}
			cfg.RedisURL = g.redis
			if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
				return fmt.Errorf("bench all: --dir %q is not a directory; pass an existing directory on the disk to measure", cfg.Dir)
			}
			cfg.Command = commandLine(cmd)
			if bench.IsTerminal(g.stdout) {
				cfg.Progress = g.stderr
			}
			r, err := all.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return r.WriteJSON(g.stdout)
			}
			if len(cfg.Only) > 0 {
				fmt.Fprintf(g.stdout, "%s\n(suites %s only: nothing written to --out)\n", r.Markdown(), strings.Join(cfg.Only, ", "))
				return nil
			}
			fmt.Fprintf(g.stdout, "%s\nwrote %s, %s and %d plots in %s\n", r.Markdown(),
				filepath.Join(cfg.Out, all.DocFile), filepath.Join(cfg.Out, all.JSONFile), len(r.Plots), filepath.Join(cfg.Out, "bench"))
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "a smoke run of under a minute: smaller sizes, fewer repeats")
	f.BoolVar(&tiny, "tiny", false, "the smallest run that exercises every suite, for tests (no meaningful figures)")
	_ = f.MarkHidden("tiny")
	f.BoolVar(&asJSON, "json", false, "print the JSON report instead of the tables")
	f.StringVar(&out, "out", "docs", "folder of BENCHMARKS.md; the JSON report and plots go to its bench/ folder")
	f.StringVar(&dir, "dir", os.TempDir(), "parent of the scratch directory (its disk is the one measured)")
	f.StringVar(&s3, "s3", "", "an s3:// remote (e.g. s3://bucket?endpoint=…) for the sync suite instead of a private MinIO")
	f.BoolVar(&noMinIO, "no-minio", false, "measure the sync suite on file:// only")
	f.StringSliceVar(&only, "only", nil, "run only these suites ("+strings.Join(all.SuiteKeys, ", ")+"), print their figures and write nothing to --out")
	f.IntVar(&history, "history", 0, "the deep-history run instead (opt-in, e.g. 10000000): the archive suite at this many records and the redis memory suite over the same history; prints, writes nothing to --out")
	return cmd
}
