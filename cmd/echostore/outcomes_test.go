package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJobOutcomesCLI: with --job-outcomes, a job acknowledged and one
// failed on the data dir are records of the queue's outcome stream, which
// stream read shows and export writes; a name that is not a stream name is
// a usage error before anything is done.
func TestJobOutcomesCLI(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	g := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--job-outcomes", "outcomes"}
	cli := mustRun(t, g)
	if _, _, err := run(t, "", append(append([]string{}, g[:4]...), "--job-outcomes", "a/b", "queue", "list")...); err == nil ||
		!strings.Contains(err.Error(), "--job-outcomes") {
		t.Fatalf("--job-outcomes a/b: %v, want a usage error naming the flag", err)
	}
	cli("enqueue", "jobs", "--payload", `{"n":1}`, "--mode", "sync")
	cli("enqueue", "jobs", "--payload", `{"n":2}`, "--mode", "sync")
	// Dispatch follows the push that acknowledged the jobs.
	var entries []string
	for deadline := time.Now().Add(20 * time.Second); len(entries) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("claimed %d of 2 jobs within 20 s", len(entries))
		}
		for _, l := range lines(cli("queue", "claim", "jobs", "--consumer", "w", "--count", "2")) {
			var j struct{ Entry string }
			if l != "" && json.Unmarshal([]byte(l), &j) == nil && j.Entry != "" {
				entries = append(entries, j.Entry)
			}
		}
		if len(entries) < 2 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cli("queue", "ack", "jobs", entries[0])
	cli("queue", "fail", "jobs", entries[1], "--consumer", "w", "--error", "no luck")
	read := cli("stream", "read", "jobs", "outcomes")
	got := lines(read)
	if len(got) != 2 || !strings.Contains(got[0], `"outcome":"done"`) || !strings.Contains(got[1], `"outcome":"retry"`) ||
		!strings.Contains(got[1], `"error":"no luck"`) || !strings.Contains(got[1], `"consumer":"w"`) {
		t.Fatalf("the outcome stream reads\n%s", read)
	}
	out := cli("export", "jobs", "outcomes", "--dir", filepath.Join(dir, "export"))
	if !strings.Contains(out, `"rows":2`) {
		t.Fatalf("export of the outcome stream printed %s", out)
	}
}
