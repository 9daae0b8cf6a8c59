package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestCLIEnqueueRunAt: a job with a run-at far in the future is committed
// and waits in the delayed set (not claimed); one whose run-at has passed is
// claimed at once; --delay is now plus the delay; bad values are refused.
func TestCLIEnqueueRunAt(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	g := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--remote", "file://" + filepath.Join(dir, "remote")}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	enq := func(args ...string) receipt {
		t.Helper()
		out, errOut, err := run(t, "", cmd(append([]string{"enqueue", "later"}, args...)...)...)
		if err != nil {
			t.Fatalf("enqueue %v: %v\n%s", args, err, errOut)
		}
		var rc receipt
		if err := json.Unmarshal([]byte(out), &rc); err != nil {
			t.Fatalf("printed %q: %v", out, err)
		}
		return rc
	}
	future := enq("--payload", `{"n":"future"}`, "--mode", "sync", "--run-at", "2999-01-01T00:00:00Z")
	past := enq("--payload", `{"n":"past"}`, "--mode", "sync", "--run-at", "2001-01-01T00:00:00+02:00")
	out, _, err := run(t, "", cmd("queue", "claim", "later", "--consumer", "c1", "--count", "10")...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, past.ID) != 1 || strings.Contains(out, future.ID) {
		t.Fatalf("claimed:\n%s\nwant %s only, not %s", out, past.ID, future.ID)
	}
	out, _, err = run(t, "", cmd("queue", "status", "later")...)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Delayed int    `json:"delayed"`
		NextDue string `json:"next_due"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Delayed != 1 || !strings.HasPrefix(st.NextDue, "2999-01-01T00:00:00") {
		t.Fatalf("status %s (%v): want the future job delayed until 2999", out, err)
	}
	for _, bad := range [][]string{
		{"--payload", "1", "--run-at", "tomorrow"},
		{"--payload", "1", "--run-at", "1969-12-31T00:00:00Z"},
		{"--payload", "1", "--delay", "-1s"},
		{"--payload", "1", "--delay", "1h", "--run-at", "2999-01-01T00:00:00Z"},
	} {
		if _, _, err := run(t, "", cmd(append([]string{"enqueue", "later"}, bad...)...)...); err == nil {
			t.Fatalf("%v: no error", bad)
		}
	}
}

// TestParseRunAt: --delay counts from the given now; neither flag is the
// zero time; --delay 0 is at once.
func TestParseRunAt(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if at, err := parseRunAt("", 90*time.Second, true, now); err != nil || !at.Equal(now.Add(90*time.Second)) {
		t.Fatalf("--delay 90s: %v %v", at, err)
	}
	if at, err := parseRunAt("", 0, true, now); err != nil || !at.IsZero() {
		t.Fatalf("--delay 0: %v %v", at, err)
	}
	if at, err := parseRunAt("", 0, false, now); err != nil || !at.IsZero() {
		t.Fatalf("neither: %v %v", at, err)
	}
	if at, err := parseRunAt("2031-05-06T07:08:09.5+02:00", 0, false, now); err != nil || at.UnixMilli() != time.Date(2031, 5, 6, 5, 8, 9, 5e8, time.UTC).UnixMilli() {
		t.Fatalf("--run-at: %v %v", at, err)
	}
}
