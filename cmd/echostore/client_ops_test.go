package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/server"
)

// dataDir is a fresh data dir and remote beside a private Redis.
type dataDir struct {
	redis, data, remote string
	cli                 func(args ...string) string // the CLI with --redis, --data, --remote
	g                   []string                    // those flags
}

func newDataDir(t *testing.T) dataDir {
	r := startRedis(t)
	dir := t.TempDir()
	d := dataDir{redis: r.URL, data: filepath.Join(dir, "data"), remote: "file://" + filepath.Join(dir, "remote")}
	d.g = []string{"--redis", d.redis, "--data", d.data, "--remote", d.remote}
	d.cli = mustRun(t, d.g)
	return d
}

// serve starts serve on the data dir with the queues declared.
func (d dataDir) serve(t *testing.T, queues ...server.QueueConfig) (*server.Server, func()) {
	return startServeConfig(t, server.Config{Redis: d.redis, Data: d.data, Remote: d.remote, Queues: queues})
}

var evtRe = regexp.MustCompile(`EVT_[0-9A-Z]{13}`)

// TestArchiveDeleteThroughServe: `archive delete` through serve prints what
// it prints directly, for the same stream in the same state, and serve
// stops cycling the stream (declared in its configuration): a beat after
// the delete creates no volume. Without the confirmation nothing is sent.
func TestArchiveDeleteThroughServe(t *testing.T) {
	d := newDataDir(t)
	cli := d.cli
	fill := func() {
		for i := range 10 {
			cli("stream", "append", "q", "s", fmt.Sprintf("n=%d", i))
		}
		cli("archive", "cycle", "q", "s", "--keep", "3", "--trim-after", "remote")
	}
	fill()
	direct := cli("archive", "delete", "q", "s", "--yes-delete-history")
	if !strings.HasPrefix(direct, `{"deleted":true,"volume":"archive.q.s","volume_dropped":true,"live_entries":3,"remote_log_kept":false,"remote_objects":`) {
		t.Fatalf("direct delete: %s", direct)
	}
	fill()

	srv, stop := d.serve(t, server.QueueConfig{Name: "q", Streams: []server.StreamConfig{{Name: "s", Keep: 3, TrimAfter: "remote"}}})
	srv.Beat(t.Context())
	if _, _, err := run(t, "", append(append([]string{}, d.g...), "archive", "delete", "q", "s")...); err == nil ||
		!strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("delete without its confirmation: %v", err)
	}
	if via := cli("archive", "delete", "q", "s", "--yes-delete-history"); via != direct {
		t.Fatalf("delete through serve printed\n%s\nwant (direct)\n%s", via, direct)
	}
	srv.Beat(t.Context())
	if ls := cli("volume", "ls"); strings.Contains(ls, "archive.q.s") {
		t.Fatalf("a beat after the delete through serve re-created the volume: %s", ls)
	}
	if got := cli("stream", "read", "q", "s"); got != "" {
		t.Fatalf("read after the delete: %q", got)
	}
	stop()
	if ls := cli("volume", "ls"); strings.Contains(ls, "archive.q.s") {
		t.Fatalf("volume after serve stopped: %s", ls)
	}
}

// TestEnqueueRunAtThroughServe: `enqueue --run-at` and `--delay` through
// serve print what they print directly (the job id and LSN aside), and the
// jobs wait in the delayed set until their time.
func TestEnqueueRunAtThroughServe(t *testing.T) {
	d := newDataDir(t)
	cli := d.cli
	due := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
	cmds := [][]string{
		{"enqueue", "jobs", "--payload", `{"n":1}`, "--run-at", due.Format(time.RFC3339Nano)},
		{"enqueue", "jobs", "--payload", `{"n":2}`, "--run-at", due.Format(time.RFC3339Nano), "--mode", "sync"},
		{"enqueue", "jobs", "--payload", `{"n":3}`, "--delay", "3h"},
	}
	norm := func(s string) string {
		return lsnRe.ReplaceAllString(jobIDRe.ReplaceAllString(s, "JOB_X"), `"lsn":N`)
	}
	direct := make([]string, len(cmds))
	for i, args := range cmds {
		direct[i] = cli(args...)
	}
	_, stop := d.serve(t)
	for i, args := range cmds {
		if got := cli(args...); norm(got) != norm(direct[i]) || got == direct[i] {
			t.Errorf("%v through serve printed\n%s\nwant (direct, but its own id)\n%s", args, got, direct[i])
		}
	}
	stop()
	// An async job serve had not committed yet stays in the outbox at its
	// shutdown; the next enqueue commits and dispatches it.
	cli("enqueue", "jobs", "--payload", `{"n":0}`)
	var st struct {
		Length, Delayed int64
		NextDue         string `json:"next_due"`
	}
	if err := json.Unmarshal([]byte(cli("queue", "status", "jobs")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Delayed != 6 || st.Length != 1 || st.NextDue != due.Format(time.RFC3339Nano) {
		t.Fatalf("queue status: %+v, want 6 jobs delayed, the next due at %s", st, due.Format(time.RFC3339Nano))
	}
}

// TestArchiveCycleRetainThroughServe: `archive cycle --retain-count` and
// `--retain-age` through serve print what they print directly for a stream
// in the same state ("dropped" included), and `archive status` after it.
func TestArchiveCycleRetainThroughServe(t *testing.T) {
	d := newDataDir(t)
	cli := d.cli
	steps := func(s string) [][]string {
		return [][]string{
			{"archive", "cycle", "q", s, "--keep", "5", "--retain-count", "12"},
			{"archive", "cycle", "q", s, "--keep", "5"},
			{"archive", "cycle", "q", s, "--keep", "1", "--retain-age", "1ns", "--trim-after", "remote"},
		}
	}
	// Each step appends 20 records first; the same steps on a directly,
	// on b through serve.
	runSteps := func(s string) []string {
		var out []string
		for _, args := range steps(s) {
			for i := range 20 {
				cli("stream", "append", "q", s, fmt.Sprintf("n=%d", i))
			}
			out = append(out, evtRe.ReplaceAllString(cli(args...), "EVT"))
		}
		status := strings.ReplaceAll(cli("archive", "status", "q", s), `"archive.q.`+s+`"`, `"archive.q.S"`)
		return append(out, evtRe.ReplaceAllString(status, "EVT"))
	}
	direct := runSteps("a")
	if want := `{"folded":15,"trimmed":15,"watermark":"EVT","dropped":3}` + "\n"; direct[0] != want {
		t.Fatalf("direct cycle with --retain-count: %s, want %s", direct[0], want)
	}
	if strings.Contains(direct[1], "dropped") || !strings.Contains(direct[2], `"dropped":`) {
		t.Fatalf("direct cycles: %q", direct)
	}
	_, stop := d.serve(t, server.QueueConfig{Name: "q", Streams: []server.StreamConfig{{Name: "b", Keep: 5, RetainCount: 1}}})
	via := runSteps("b")
	stop()
	for i := range direct {
		if via[i] != direct[i] {
			t.Errorf("step %d through serve printed\n%s\nwant (direct)\n%s", i, via[i], direct[i])
		}
	}
}
