package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
)

// replaySetup gives a test a redis-server and a data dir whose stream q
// orders holds n records {"n": i}, all but the newest 10 archived, and
// returns the global flags and the records' Redis ids.
func replaySetup(t *testing.T, n int) (*testserver.Redis, []string, []string) {
	t.Helper()
	r := startRedis(t)
	dir := t.TempDir()
	g := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--remote", "file://" + filepath.Join(dir, "remote")}
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"fields":{"n":"%d"}}`+"\n", i)
	}
	if _, stderr, err := run(t, in.String(), append(g, "stream", "append", "q", "orders", "--jsonl", "-")...); err != nil {
		t.Fatalf("append: %v\n%s", err, stderr)
	}
	out := mustRun(t, g)("archive", "cycle", "q", "orders", "--keep", "10")
	if !strings.Contains(out, fmt.Sprintf(`"folded":%d,`, n-10)) {
		t.Fatalf("cycle: %s", out)
	}
	var ids []string
	for _, line := range lines(mustRun(t, g)("stream", "read", "q", "orders")) {
		var rec struct{ ID string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		id, err := brand.EVT.Parse(rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id.RedisID())
	}
	if len(ids) != n {
		t.Fatalf("read %d records, want %d", len(ids), n)
	}
	return r, g, ids
}

// checkReplayed checks that key holds exactly the records of ids, in
// order, each once, with their fields.
func checkReplayed(t *testing.T, r *testserver.Redis, key string, ids []string) {
	t.Helper()
	opt, err := goredis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	msgs, err := rdb.XRange(context.Background(), key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(ids) {
		t.Fatalf("%s holds %d entries, want %d", key, len(msgs), len(ids))
	}
	for i, m := range msgs {
		if m.ID != ids[i] || len(m.Values) != 1 || m.Values["n"] != strconv.Itoa(i) {
			t.Fatalf("entry %d: %s %v, want %s n=%d", i, m.ID, m.Values, ids[i], i)
		}
	}
}

// TestReplayKilled: a replay whose process is killed (SIGKILL) mid-way,
// run directly and through serve, is resumed by running it again: the
// target ends with the whole range, no gap, no duplicate.
func TestReplayKilled(t *testing.T) {
	for _, mode := range []string{"direct", "serve"} {
		t.Run(mode, func(t *testing.T) {
			const n = 300
			r, g, ids := replaySetup(t, n)
			if mode == "serve" {
				startServe(t, r.URL, g[3], g[5], "")
			}
			// 50 records a second, 5 a batch: six seconds for the range.
			child := exec.Command(childBinary(t, false), append(g, "stream", "replay", "q", "orders", "--into", "orders-replay", "--rate", "50")...)
			child.Env = childEnviron("echostore")
			var stderr bytes.Buffer
			child.Stderr = &stderr
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- child.Wait() }()
			ctx := context.Background()
			var got int
			for deadline := time.Now().Add(30 * time.Second); got < 20; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the replay copied %d records in 30s\n%s", got, stderr.String())
				}
				v, err := testserver.Do(ctx, r.Addr, "XLEN", "orders-replay")
				if err != nil {
					t.Fatal(err)
				}
				got, _ = strconv.Atoi(v)
			}
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err == nil {
				t.Fatalf("the replay finished before it was killed\n%s", stderr.String())
			}
			v, err := testserver.Do(ctx, r.Addr, "XLEN", "orders-replay")
			if err != nil {
				t.Fatal(err)
			}
			if left, _ := strconv.Atoi(v); left >= n {
				t.Fatalf("the killed replay copied all %d records", left)
			}

			out := mustRun(t, g)("stream", "replay", "q", "orders", "--into", "orders-replay")
			var res echostore.ReplayResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			if !res.Done || res.ResumedAfter == nil || res.Copied == 0 || res.Copied >= n || *res.Last != ids[n-1] {
				t.Fatalf("resumed replay: %s", out)
			}
			checkReplayed(t, r, "orders-replay", ids)
			// And once more: nothing.
			out = mustRun(t, g)("stream", "replay", "q", "orders", "--into", "orders-replay")
			if !strings.Contains(out, `"copied":0,`) {
				t.Fatalf("third replay: %s", out)
			}
			checkReplayed(t, r, "orders-replay", ids)
		})
	}
}

// TestReplayExitStatus: a refused target or a conflict exits 1 with its
// reason, a bad command line 2; neither writes anything.
func TestReplayExitStatus(t *testing.T) {
	r, g, ids := replaySetup(t, 20)
	if _, err := testserver.Do(context.Background(), r.Addr, "XADD", "foreign", ids[15], "x", "y"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--from", ids[3], "--into", "foreign"}, exitFailure, "nothing was copied"},
		{[]string{"--into", "emq:{q}:stream:orders", "--force"}, exitFailure, "is the source stream itself"},
		{[]string{"--into", "emq:x"}, exitFailure, "own namespace"},
		{[]string{}, exitUsage, "give --into KEY"},
		{[]string{"--into", "k", "--rate", "-5"}, exitUsage, "--rate"},
		{[]string{"--into", "k", "--to", "nonsense"}, exitUsage, "--to"},
	} {
		var stdout, stderr bytes.Buffer
		args := append(append(append([]string{}, g...), "stream", "replay", "q", "orders"), tc.args...)
		code := execute(context.Background(), args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.msg) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d with %q", tc.args, code, stderr.String(), stdout.String(), tc.code, tc.msg)
		}
	}
	if v, _ := testserver.Do(context.Background(), r.Addr, "XLEN", "foreign"); v != "1" {
		t.Errorf("the conflicting target holds %s entries, want its 1", v)
	}
	if v, _ := testserver.Do(context.Background(), r.Addr, "EXISTS", "k"); v != "0" {
		t.Errorf("a refused replay created its target")
	}
}
