package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/all"
	"github.com/echostore/echostore/cmd/echostore-bench/internal/scalebench"
)

// scaleServeCmd is the hidden subcommand that runs the child serve of
// `echostore-bench scale`.
const scaleServeCmd = "scale-serve"

// newScaleCmd is `echostore-bench scale`: one serve with many archived
// streams (scalebench), its figures written as the "scale" key of
// --out/bench/report.json (the rest of the report is kept).
func newScaleCmd(g *globals) *cobra.Command {
	var (
		streams int
		asJSON  bool
		out     string
		dir     string
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure one serve with many archived streams (memory, goroutines, Redis connections, idle Redis commands/s)",
		Long: `Run serve (a child process of this binary) on a private redis-server,
make --streams archived streams (one HTTP append each, 8 callers), append 4 ×
--streams records to streams picked at random, wait until a beat passes
without a cycle, and measure over a quiet window of two beats: serve's
resident memory (VmRSS), its goroutines, Redis's connected_clients and the
Redis commands per second (total_commands_processed, scripts' own calls
included). The goals of 10,000 streams: ≤ 500 MB, ≤ 64 connections, ≤ 100
commands/s. The figures go into --out/bench/report.json as its "scale" key
(bench all does not run this suite: about a minute and a half more).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			rep, err := scalebench.Run(cmd.Context(), scalebench.Config{Streams: streams, Dir: dir,
				Serve: func(data, redisURL string, n int) *exec.Cmd {
					c := exec.Command(exe, scaleServeCmd, "--data", data, "--redis", redisURL, "--streams", strconv.Itoa(n))
					c.Stderr = g.stderr
					return c
				}})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			path := filepath.Join(out, all.JSONFile)
			if err := writeScaleKey(path, rep); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%d archived streams: %.0f MB resident (%.0f MB with one), %d goroutines, %d Redis clients, idle %.1f Redis commands/s (%0.f cycles in the quiet window); settled %.0fs after the appends\nwrote the scale key of %s\n",
				rep.Streams, rep.RSSMB, rep.RSSStartMB, rep.Goroutines, rep.RedisClients, rep.IdleOps, rep.IdleCycles, rep.SettleSeconds, path)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&streams, "streams", scalebench.DefaultCount, "archived streams")
	f.BoolVar(&asJSON, "json", false, "print the figures as JSON instead of writing the report")
	f.StringVar(&out, "out", "docs", "folder whose bench/report.json gets the scale key")
	f.StringVar(&dir, "dir", os.TempDir(), "parent of the serve's scratch data dir")
	return cmd
}

// newScaleServeCmd runs the child serve of newScaleCmd.
func newScaleServeCmd(g *globals) *cobra.Command {
	var (
		data, redisURL string
		streams        int
	)
	cmd := &cobra.Command{
		Use:    scaleServeCmd,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return scalebench.ServeChild(cmd.Context(), data, redisURL, streams, g.stdout)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "data dir")
	cmd.Flags().StringVar(&redisURL, "redis", "", "Redis URL")
	cmd.Flags().IntVar(&streams, "streams", scalebench.DefaultCount, "streams")
	return cmd
}

// writeScaleKey sets the "scale" key of the JSON report at path (made if
// missing), keeping its other keys.
func writeScaleKey(path string, rep *scalebench.Report) error {
	doc := map[string]json.RawMessage{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("bench scale: %s: %w", path, err)
		}
	}
	v, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	doc["scale"] = v
	b, err = json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
