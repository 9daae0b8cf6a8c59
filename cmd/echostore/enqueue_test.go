package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

type receipt struct {
	ID     string  `json:"id"`
	Mode   string  `json:"mode"`
	LSN    *uint64 `json:"lsn"`
	Volume string  `json:"volume"`
}

// TestCLIEnqueue: async then sync enqueues print their receipts; the sync
// one's lsn is the remote LSN; both jobs reach the job stream once.
func TestCLIEnqueue(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	g := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--remote", "file://" + filepath.Join(dir, "remote")}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	enq := func(mode, payload string) receipt {
		t.Helper()
		out, errOut, err := run(t, "", cmd("enqueue", "jobs", "--payload", payload, "--mode", mode)...)
		if err != nil {
			t.Fatalf("enqueue %s: %v\n%s", mode, err, errOut)
		}
		var rc receipt
		if err := json.Unmarshal([]byte(out), &rc); err != nil {
			t.Fatalf("printed %q: %v", out, err)
		}
		if rc.Mode != mode || rc.Volume != "accept.jobs.0" || !strings.HasPrefix(rc.ID, "JOB_") {
			t.Fatalf("receipt %+v", rc)
		}
		return rc
	}
	a := enq("async", `{"n":1}`)
	if a.LSN != nil {
		t.Fatalf("async receipt has lsn %d", *a.LSN)
	}
	s := enq("sync", `{"n":2}`)
	if s.LSN == nil || *s.LSN < 1 {
		t.Fatalf("sync receipt lsn %v", s.LSN)
	}
	out, _, err := run(t, "", cmd("queue", "claim", "jobs", "--consumer", "c1", "--count", "10")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID, s.ID} {
		if strings.Count(out, id) != 1 {
			t.Fatalf("job %s claimed %d times:\n%s", id, strings.Count(out, id), out)
		}
	}
	for _, bad := range [][]string{
		{"enqueue", "jobs", "--payload", "{", "--mode", "sync"},
		{"enqueue", "jobs", "--payload", "1", "--mode", "later"},
		{"enqueue", "a:b", "--payload", "1"},
	} {
		if _, _, err := run(t, "", cmd(bad...)...); err == nil {
			t.Fatalf("%v: no error", bad)
		}
	}
}
