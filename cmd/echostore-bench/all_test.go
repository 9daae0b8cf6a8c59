package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/all"
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
	needPeers(t)
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

// needPeers skips a test that runs the peers suite in a build without them
// (go test without -tags peers); under CI it fails instead: make test
// passes the tag.
func needPeers(t *testing.T) {
	t.Helper()
	if all.PeersBuilt {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("built without the peers: run the tests with -tags peers (make test does)")
	}
	t.Skip("built without the peers (asynq, River): go test -tags peers runs this test")
}
