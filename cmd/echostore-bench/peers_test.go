//go:build peers

package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/internal/testserver"
)

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
	// The durable peer (issue 26): asynq on a Redis with appendfsync
	// always, measured at every level beside the in-memory one.
	for _, name := range []string{"durable asynq Client.Enqueue (Redis appendonly yes, appendfsync always), 1 caller: jobs/s",
		"durable asynq Client.Enqueue (Redis appendonly yes, appendfsync always), 4 callers: jobs/s"} {
		if row := rep.Row(name); row == nil || row.Value <= 0 || len(row.Runs) != 1 {
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
