package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIArchiveCycleKeepBelowOne: archive cycle --keep 0 (or negative)
// exits 2 with the reason and folds nothing, as does a bad flag value;
// --max-age alone still cycles, and a failing command exits 1.
func TestCLIArchiveCycleKeepBelowOne(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	g := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data")}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	for i := range 3 {
		if _, _, err := run(t, "", cmd("stream", "append", "q", "s", "n="+strings.Repeat("x", i+1))...); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"--keep", "0"},
		{"--keep", "-1"},
		{"--keep", "0", "--max-age", "1h"},
		{"--keep", "x"},
		{"--max-age", "-1h"},
		{},
	} {
		out, _, err := run(t, "", cmd(append([]string{"archive", "cycle", "q", "s"}, args...)...)...)
		if err == nil || exitCode(err) != exitUsage || out != "" {
			t.Fatalf("archive cycle %v: %q, %v (exit %d), want exit %d and nothing done", args, out, err, exitCodeOf(err), exitUsage)
		}
		if len(args) > 0 && !strings.Contains(err.Error(), args[0]) {
			t.Fatalf("archive cycle %v: %v; want the reason, naming %s", args, err, args[0])
		}
	}
	if out, _, err := run(t, "", cmd("archive", "cycle", "q", "s", "--max-age", "1h")...); err != nil || !strings.Contains(out, `"folded":0`) {
		t.Fatalf("archive cycle --max-age 1h: %q %v", out, err)
	}
	_, _, err := run(t, "", "--redis", "redis://127.0.0.1:1", "--data", filepath.Join(dir, "data"), "archive", "cycle", "q", "s", "--keep", "1")
	if err == nil || exitCode(err) != exitFailure {
		t.Fatalf("archive cycle with no Redis: %v (exit %d), want exit %d", err, exitCodeOf(err), exitFailure)
	}
}

func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	return exitCode(err)
}

// TestCLIEnqueueStrict: enqueue refuses, with exit 2 and before anything is
// recorded, a payload encoding/json would pass (duplicate names, a lone
// surrogate, trailing data) and an explicit id that is zero or not
// canonical; an id taken by another payload fails (exit 1) naming it.
func TestCLIEnqueueStrict(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	g := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--remote", "file://" + filepath.Join(dir, "remote")}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	for _, args := range [][]string{
		{"--payload", `{"a":1,"a":2}`},
		{"--payload", `"\ud800"`},
		{"--payload", `1 2`},
		{"--payload", "\"\xff\""},
		{"--payload", `1`, "--id", "JOB_0000000000000"},
		{"--payload", `1`, "--id", "job_0000000000001"},
	} {
		out, _, err := run(t, "", cmd(append([]string{"enqueue", "jobs"}, args...)...)...)
		if err == nil || exitCode(err) != exitUsage || out != "" {
			t.Fatalf("enqueue %q: %q %v (exit %d), want exit %d", args, out, err, exitCodeOf(err), exitUsage)
		}
	}
	out, _, err := run(t, "", cmd("enqueue", "jobs", "--payload", `1`, "--mode", "sync")...)
	if err != nil {
		t.Fatal(err)
	}
	var rc struct{ ID string }
	if err := json.Unmarshal([]byte(out), &rc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "", cmd("enqueue", "jobs", "--payload", `1`, "--id", rc.ID)...); err != nil {
		t.Fatalf("retry with the same payload: %v", err)
	}
	if _, _, err := run(t, "", cmd("enqueue", "jobs", "--payload", `2`, "--id", rc.ID)...); err == nil || exitCode(err) != exitFailure || !strings.Contains(err.Error(), "taken") {
		t.Fatalf("another payload under %s: %v, want a conflict", rc.ID, err)
	}
}
