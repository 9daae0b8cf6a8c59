package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// startRedis starts a private redis-server for one test.
func startRedis(t *testing.T) *testserver.Redis {
	t.Helper()
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}

// run runs the echostore command line in-process and returns its stdout,
// stderr and error (non-nil means a non-zero exit status).
func run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd(&stdout, &stderr)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func TestCLIStreamAppendRead(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	g := []string{"--redis", r.URL, "--data", data, "--remote", "file://" + filepath.Join(dir, "remote")}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }

	out, _, err := run(t, "", cmd("stream", "append", "q", "s", "b=2", "a=1=x")...)
	if err != nil {
		t.Fatal(err)
	}
	first, err := brand.EVT.Parse(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("append printed %q: %v", out, err)
	}
	input := `{"fields":{"n":"1"}}` + "\n\n" + `{"fields":{"n":"2","é":"ü"}}` + "\n" + `{"fields":{"n":"3"}}`
	out, _, err = run(t, input, cmd("stream", "append", "q", "s", "--jsonl", "-")...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []brand.ID
	for _, l := range lines(out) {
		id, err := brand.EVT.Parse(l)
		if err != nil {
			t.Fatalf("append --jsonl printed %q", out)
		}
		ids = append(ids, id)
	}
	if len(ids) != 3 || ids[0] <= first || ids[1] <= ids[0] || ids[2] <= ids[1] {
		t.Fatalf("ids %v after %v", ids, first)
	}
	// stream append touches neither the data dir nor the remote.
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("stream append created the data dir: %v", err)
	}

	out, _, err = run(t, "", cmd("stream", "read", "q", "s", "--live-only")...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"id":"` + brand.EVT.Format(first) + `","fields":{"b":"2","a":"1=x"}}`,
		`{"id":"` + brand.EVT.Format(ids[0]) + `","fields":{"n":"1"}}`,
		`{"id":"` + brand.EVT.Format(ids[1]) + `","fields":{"n":"2","é":"ü"}}`,
		`{"id":"` + brand.EVT.Format(ids[2]) + `","fields":{"n":"3"}}`,
	}
	if got := lines(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stream read printed\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
	// Inclusive bounds in either id form, limit, reverse.
	out, _, err = run(t, "", cmd("stream", "read", "q", "s", "--live-only", "--from", ids[0].RedisID(),
		"--to", brand.EVT.Format(ids[2]), "--limit", "2", "--reverse")...)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(out); len(got) != 2 || got[0] != want[3] || got[1] != want[2] {
		t.Fatalf("reverse read printed %q", out)
	}
	// A record is printed the same whatever reads it.
	var rec mq.Record
	if err := json.Unmarshal([]byte(want[2]), &rec); err != nil || string(mq.AppendJSON(nil, rec)) != want[2] {
		t.Fatalf("the printed record does not round-trip: %v", err)
	}
}

func TestCLIStreamErrors(t *testing.T) {
	r := startRedis(t)
	g := []string{"--redis", r.URL}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	// A bad line anywhere in the input: non-zero exit, its line named,
	// nothing of the batch appended.
	for _, tc := range []struct{ input, line, what string }{
		{`{"fields":{"a":"1"}}` + "\n" + `{"fields":{"a":"1","a":"2"}}` + "\n", "line 2", "duplicate field"},
		{`{"fields":{"a":"1"}}` + "\n\n" + `{"fields":{"a":1}}`, "line 3", "JSON string"},
		{`{"fields":{}}`, "line 1", "no fields"},
		{`{"fields":{"a":"1"}}` + "\n" + "{\"fields\":{\"a\":\"\xff\"}}\n", "line 2", "UTF-8"},
		{`{"id":"EVT_0000000000001","fields":{"a":"1"}}`, "line 1", "minted"},
	} {
		out, _, err := run(t, tc.input, cmd("stream", "append", "q", "bad", "--jsonl", "-")...)
		if err == nil || !strings.Contains(err.Error(), tc.line) || !strings.Contains(err.Error(), tc.what) ||
			!strings.Contains(err.Error(), "nothing was appended") || out != "" {
			t.Fatalf("input %q: out %q, err %v; want an error naming %s (%s)", tc.input, out, err, tc.line, tc.what)
		}
	}
	out, _, err := run(t, "", cmd("stream", "read", "q", "bad", "--live-only")...)
	if err != nil || out != "" {
		t.Fatalf("after bad batches the stream holds %q (%v), want nothing", out, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{cmd("stream", "read", "q", "s", "--live-only", "--archive-only"), "--live-only"},
		{cmd("stream", "read", "q", "s", "--live-only", "--from", "JOB_0000000000001"), "--from"},
		{cmd("stream", "append", "q", "s"), "NAME=VALUE"},
		{cmd("stream", "append", "q", "s", "novalue"), "NAME=VALUE"},
		{cmd("stream", "append", "q", "s", "a=1", "a=2"), "duplicate field"},
		{cmd("stream", "append", "q:x", "s", "a=1"), "queue name"},
		{[]string{"--redis", "redis://127.0.0.1:1/0", "stream", "append", "q", "s", "a=1"}, "ECHOSTORE_REDIS"},
		{[]string{"--redis", "redis://127.0.0.1/0?bogus=1", "stream", "append", "q", "s", "a=1"}, "unknown option"},
	} {
		if _, _, err := run(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error about %s", tc.args, err, tc.want)
		}
	}
	// An evicting policy is refused with what to do.
	if _, err := testserver.Do(context.Background(), r.Addr, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "", cmd("stream", "append", "q", "s", "a=1")...); err == nil ||
		!strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("append on an evicting server: %v", err)
	}
}

func TestCLIQueue(t *testing.T) {
	r := startRedis(t)
	g := []string{"--redis", r.URL}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	ctx := context.Background()
	c, err := mq.Connect(ctx, mq.Options{URL: r.URL, Jobs: mq.JobOptions{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	jobs, err := names.ParseQueue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	var jobIDs []string
	for _, v := range []string{"a", "b", "c"} {
		res, err := c.Enqueue(ctx, jobs, mq.Job{Fields: []mq.Field{{Name: "task", Value: v}}})
		if err != nil {
			t.Fatal(err)
		}
		jobIDs = append(jobIDs, brand.JOB.Format(res.ID))
	}
	status := func() map[string]any {
		t.Helper()
		out, _, err := run(t, "", cmd("queue", "status", "jobs")...)
		var st map[string]any
		if err != nil || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("queue status: %q, %v", out, err)
		}
		return st
	}
	if st := status(); st["length"] != 3.0 || st["lag"] != 3.0 || st["pending"] != 0.0 || st["queue"] != "jobs" {
		t.Fatalf("status %v", st)
	}
	out, _, err := run(t, "", cmd("queue", "claim", "jobs", "--count", "2", "--consumer", "w")...)
	if err != nil {
		t.Fatal(err)
	}
	type delivery struct {
		ID      string            `json:"id"`
		Entry   string            `json:"entry"`
		Attempt int               `json:"attempt"`
		Fields  map[string]string `json:"fields"`
	}
	var ds []delivery
	for _, l := range lines(out) {
		var d delivery
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("claim printed %q", out)
		}
		ds = append(ds, d)
	}
	if len(ds) != 2 || ds[0].ID != jobIDs[0] || ds[1].Fields["task"] != "b" || ds[0].Attempt != 1 || ds[0].Entry == "" {
		t.Fatalf("claimed %+v", ds)
	}
	out, _, err = run(t, "", cmd("queue", "ack", "jobs", ds[0].Entry, ds[1].Entry)...)
	if err != nil || strings.TrimSpace(out) != `{"acked":2}` {
		t.Fatalf("ack: %q, %v", out, err)
	}
	// The third job fails once (MaxAttempts 1) and is dead.
	left, err := c.Claim(ctx, jobs, "w", 0)
	if err != nil || len(left) != 1 {
		t.Fatalf("claim: %v, %v", left, err)
	}
	if _, err := c.Fail(ctx, jobs, "w", left[0], "it broke"); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(t, "", cmd("queue", "dead", "jobs")...)
	var dl struct {
		Entry    string            `json:"entry"`
		ID       string            `json:"id"`
		Attempts int               `json:"attempts"`
		Error    string            `json:"error"`
		Fields   map[string]string `json:"fields"`
	}
	if err != nil || json.Unmarshal([]byte(out), &dl) != nil || dl.ID != jobIDs[2] || dl.Error != "it broke" || dl.Attempts != 1 {
		t.Fatalf("dead: %q, %v", out, err)
	}
	if st := status(); st["dead"] != 1.0 || st["length"] != 0.0 {
		t.Fatalf("status %v", st)
	}
	if _, _, err := run(t, "", cmd("queue", "redrive", "jobs")...); err == nil {
		t.Fatal("redrive with neither entries nor --all succeeded")
	}
	out, _, err = run(t, "", cmd("queue", "redrive", "jobs", dl.Entry)...)
	if err != nil || !strings.HasPrefix(out, `{"redriven":1,"entries":["`) {
		t.Fatalf("redrive: %q, %v", out, err)
	}
	if st := status(); st["dead"] != 0.0 || st["length"] != 1.0 {
		t.Fatalf("status after redrive %v", st)
	}
	out, _, err = run(t, "", cmd("queue", "claim", "jobs")...)
	var d delivery
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.ID != jobIDs[2] || d.Attempt != 1 {
		t.Fatalf("claim after redrive: %q, %v", out, err)
	}
	// Nothing left: claim prints nothing and succeeds.
	if out, _, err := run(t, "", cmd("queue", "claim", "jobs")...); err != nil || out != "" {
		t.Fatalf("claim on an empty queue: %q, %v", out, err)
	}
}
