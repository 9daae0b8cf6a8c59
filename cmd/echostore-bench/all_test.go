package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/all"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/internal/testserver"
)

// TestCLIBenchAll runs `echostore-bench all` end to end (the hidden --tiny
// size; --quick with ECHOSTORE_BENCH_QUICK=1) into a temp dir holding a
// copy of docs/BENCHMARKS.md, and checks the files' shape: every byte
// outside the generated block kept, the JSON report with its keys, the
// plots well-formed SVG.
func TestCLIBenchAll(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark suite")
	}
	if _, err := testserver.RedisBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	orig, err := os.ReadFile(filepath.Join("..", "..", "docs", "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := all.Splice(orig, "(replaced by the run)") // as the repository keeps it once generated
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "BENCHMARKS.md"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	size := "--tiny"
	if os.Getenv("ECHOSTORE_BENCH_QUICK") == "1" {
		size = "--quick"
	}
	// No Redis answers on port 1: the run starts its own.
	stdout, stderr, err := runLong(t, "--redis", "redis://127.0.0.1:1/0", "all", size, "--out", out, "--dir", t.TempDir())
	if err != nil {
		t.Fatalf("bench all: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "### graft") || !strings.Contains(stdout, "wrote ") {
		t.Fatalf("stdout:\n%s", stdout)
	}
	if strings.Contains(stderr, "% |") || strings.Contains(stderr, "█") { // progress bars only on a terminal
		t.Fatalf("progress on a non-terminal:\n%s", stderr)
	}

	if err := all.Verify(out, doc); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte("`echostore-bench all ")) {
		t.Fatal("the block does not name its command")
	}
}

// runLong is run with room for a whole benchmark run.
func runLong(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd(&stdout, &stderr)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}

// TestCLIBenchPeers runs `echostore-bench peers --tiny --json` against a
// private redis-server and checks that every goal of issue 19 stands
// beside its anchor, each from runs of its own.
func TestCLIBenchPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a benchmark suite")
	}
	if _, err := testserver.RedisBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	stdout, stderr, err := runLong(t, "--redis", "redis://127.0.0.1:1/0", "peers", "--tiny", "--json", "--no-minio", "--dir", t.TempDir())
	if err != nil {
		t.Fatalf("bench peers: %v\n%s", err, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	// The processing goal's anchor is the faster of one asynq Server and
	// two.
	goals := map[string][]string{
		"echostore async enqueue, 4 callers: jobs/s": {"asynq Client.Enqueue, 4 callers: jobs/s"},
		"echostore claim + ack consumer: processing": {"asynq Server, no-op handler: processing", "asynq, 2 Servers, no-op handler: processing"},
	}
	for name, anchors := range goals {
		row := rep.Row(name)
		if row == nil || !slices.Contains(anchors, row.Anchor) || row.Met == nil || len(row.Runs) != 1 || row.Value <= 0 || row.AnchorValue <= 0 {
			t.Errorf("row %q: %+v", name, row)
		}
	}
	for _, name := range goals["echostore claim + ack consumer: processing"] {
		if row := rep.Row(name); row == nil || row.Value <= 0 {
			t.Errorf("row %q: %+v", name, row)
		}
	}
	if rep.Row("echostore sync enqueue, MinIO, 4 callers: jobs/s") != nil {
		t.Error("a MinIO row with --no-minio")
	}
	// River's rows, informational (no goal), or one row that says why
	// they are left out when there is no Postgres.
	if _, err := testserver.PostgresBinaries(); err != nil {
		if row := rep.Row("River: left out"); row == nil || !strings.Contains(row.Note, "not found") {
			t.Errorf("no Postgres, and no left-out row that says so: %+v", row)
		}
	} else {
		for _, name := range []string{"River Client.Insert, 1 caller: jobs/s", "River Client.Insert, 4 callers: jobs/s",
			"River Client, no-op Worker: processing"} {
			row := rep.Row(name)
			if row == nil || row.Value <= 0 || len(row.Runs) != 1 || row.Anchor == "" || row.Met != nil {
				t.Errorf("row %q: %+v", name, row)
			}
		}
	}
}
