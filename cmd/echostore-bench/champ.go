package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/acceptbench"
	"github.com/echostore/echostore/internal/bench"
)

// champResult is one K of champJSON: the outbox's rate, its fsyncs per
// run, and the append-only reference measured beside it
// (acceptbench.AppendOnlyRate) with the ratio.
type champResult struct {
	K                 int     `json:"k"`
	RecPerS           float64 `json:"rec_per_s"`
	Fsyncs            float64 `json:"fsyncs"`
	AppendOnlyRecPerS float64 `json:"append_only_rec_per_s"`
	VsAppendOnly      float64 `json:"vs_append_only"`
}

// champJSON is the --json shape of `echostore-bench champ`.
type champJSON struct {
	N                 int                `json:"n"`
	Results           []champResult      `json:"results"`
	RecoveryMs        map[string]float64 `json:"recovery_ms"`
	ReplayIntentsPerS float64            `json:"replay_intents_per_s"`
	// The same, timed before the garbage of the preparation is collected
	// (how recovery_ms and replay_intents_per_s were measured until
	// 2026-11-30; see acceptbench.RecoveryTimes).
	RecoveryAfterWorkMs        map[string]float64 `json:"recovery_after_work_ms"`
	ReplayAfterWorkIntentsPerS float64            `json:"replay_after_work_intents_per_s"`
}

// newChampCmd is `echostore-bench champ`: the accept tier's outbox
// through the real Record path with real fsyncs, beside the seed's
// algorithm in the same process.
func newChampCmd(g *globals) *cobra.Command {
	var (
		asJSON bool
		opts   = acceptbench.BenchOptions{N: 20_000, Ks: []int{100, 1000, 10_000}, PayloadSize: 100,
			RecoverySizes: []int{1000, 10_000, 50_000}, Runs: 3, RecordRuns: 9}
	)
	cmd := &cobra.Command{
		Use:   "champ",
		Short: "Benchmark the accept tier's outbox (records/s per K, fsyncs, recovery, replay) against the seed",
		Long: `Benchmark the outbox of the accept tier in a temporary folder under --data
(removed afterwards): N records of 100-byte payloads through Record with real
fsyncs at K = 100, 1,000 and 10,000 (one fsync per K records: N/K per run),
beside the seed's algorithm (the whole map written as a snapshot every K
records) run in the same process, and the seed's published table; then the
time Open takes to recover 1,000, 10,000 and 50,000 intents and the replay
rate of the log (a restarted process recovers with a heap of its own, so the
preparation's garbage is collected before each timed Open; the JSON also
gives the figures timed before that collection, "…_after_work…"). Figures
are medians: of --record-runs runs for the outbox's record rates, of --runs
for the seed's algorithm and the fsync rate, of 21 Opens for recovery and
replay.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.N < 1 || opts.Runs < 1 || opts.RecordRuns < 1 {
				return fmt.Errorf("bench champ: --n, --runs and --record-runs must be positive")
			}
			if err := os.MkdirAll(g.data, 0o700); err != nil {
				return fmt.Errorf("bench champ: --data %q: %w", g.data, err)
			}
			steps := opts.Steps()
			p := bench.NewProgress(g.stdout, g.stderr, steps)
			opts.Progress = p.Step
			r, err := acceptbench.Bench(cmd.Context(), g.data, opts)
			p.Done()
			if err != nil {
				return fmt.Errorf("bench champ: %w", err)
			}
			if !asJSON {
				return r.WriteText(g.stdout)
			}
			out := champJSON{N: r.N, RecoveryMs: map[string]float64{}, ReplayIntentsPerS: r.ReplayPerSec,
				RecoveryAfterWorkMs: map[string]float64{}, ReplayAfterWorkIntentsPerS: r.ReplayAfterWorkPerSec}
			for _, t := range r.Throughput {
				out.Results = append(out.Results, champResult{t.K, t.RecPerSec, t.BlocksPerRun, t.AppendOnlyPerSec, t.VsAppendOnly})
			}
			for _, rr := range r.Recovery {
				out.RecoveryMs[strconv.Itoa(rr.Intents)] = rr.SnapshotMs
				out.RecoveryAfterWorkMs[strconv.Itoa(rr.Intents)] = rr.SnapshotAfterWorkMs
			}
			enc := json.NewEncoder(g.stdout)
			enc.SetEscapeHTML(false)
			return enc.Encode(out)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, `print {"n":…,"results":[{"k":…,"rec_per_s":…,"fsyncs":…,"append_only_rec_per_s":…,"vs_append_only":…},…],"recovery_ms":{…},"replay_intents_per_s":…}`)
	f.IntVar(&opts.N, "n", opts.N, "records per throughput run")
	f.IntVar(&opts.Runs, "runs", opts.Runs, "repeats of the seed's algorithm and the fsync rate (the median is reported)")
	f.IntVar(&opts.RecordRuns, "record-runs", opts.RecordRuns, "repeats of the outbox's record rate at each K (the median is reported)")
	return cmd
}
