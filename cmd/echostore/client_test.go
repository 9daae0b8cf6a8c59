package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/server"
)

// startServe runs `echostore serve`'s server in-process on the data dir
// and returns a function that stops it (and fails the test if Run failed);
// the test's end stops it too.
func startServe(t *testing.T, redisURL, data, remoteURL, token string) func() {
	t.Helper()
	_, stop := startServeConfig(t, server.Config{Redis: redisURL, Data: data, Remote: remoteURL, Token: token})
	return stop
}

// startServeConfig runs serve in-process with cfg (its Listen, Beat,
// eviction and logger filled in) and returns it and a function that stops
// it, as startServe does.
func startServeConfig(t *testing.T, cfg server.Config) (*server.Server, func()) {
	t.Helper()
	cfg.Listen, cfg.Beat, cfg.AllowEviction = "127.0.0.1:0", time.Hour, true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("serve: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

// mustRun returns a function that runs the command line with the global
// flags g and returns its stdout, failing the test on an error.
func mustRun(t *testing.T, g []string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, stderr, err := run(t, "", append(append([]string{}, g...), args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		return out
	}
}

// jobIDs and lsns in enqueue receipts, which differ from run to run.
var (
	jobIDRe = regexp.MustCompile(`JOB_[0-9A-Z]{13}`)
	lsnRe   = regexp.MustCompile(`"lsn":[0-9]+`)
	hashRe  = regexp.MustCompile(`"hash":"[^"]*"`)
)

// TestCLIThroughServe: while serve holds the data dir, the commands that
// need it go through its socket and print exactly what they print when they
// open the data dir themselves; the commands that need only Redis run as
// ever; a stale socket file is ignored.
func TestCLIThroughServe(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	remoteURL := "file://" + filepath.Join(dir, "remote")
	g := []string{"--redis", r.URL, "--data", data, "--remote", remoteURL}
	cli := mustRun(t, g)

	var ids []string
	for i := range 20 {
		ids = append(ids, strings.TrimSpace(cli("stream", "append", "q", "s", "n="+string(rune('a'+i)))))
	}
	// Archive retention drops the 3 oldest: status shows low and retained.
	cli("archive", "cycle", "q", "s", "--keep", "5", "--trim-after", "remote", "--retain-count", "12")
	cli("enqueue", "jobs", "--payload", `{"n":0}`, "--mode", "sync")

	// The commands that only read, run directly and through serve.
	reads := [][]string{
		{"stream", "read", "q", "s"},
		{"stream", "read", "q", "s", "--from", ids[3], "--to", ids[17], "--reverse", "--limit", "9"},
		{"stream", "read", "q", "s", "--archive-only", "--limit", "3"},
		{"stream", "read", "q", "s", "--live-only"},
		{"archive", "status", "q", "s"},
		{"archive", "cycle", "q", "s", "--keep", "5"}, // nothing left to fold: a no-op
		{"volume", "ls"},
		{"volume", "info", "archive.q.s"},
		{"volume", "info", "accept.jobs.0"},
		{"queue", "status", "jobs"},
	}
	direct := make([]string, len(reads))
	for i, args := range reads {
		direct[i] = cli(args...)
	}

	if !strings.Contains(direct[4], `"low":3,"retained":12}`) {
		t.Fatalf("status after retention: %s", direct[4])
	}

	stop := startServe(t, r.URL, data, remoteURL, "")
	// The data dir is serve's: opening it directly fails.
	if n, err := echostore.Open(t.Context(), echostore.Config{Data: data}); err == nil {
		n.Close(t.Context())
		t.Fatal("the data dir opened while serve holds it")
	}
	for i, args := range reads {
		if got := cli(args...); got != direct[i] {
			t.Errorf("%v through serve printed\n%s\nwant (direct)\n%s", args, got, direct[i])
		}
	}

	// Commands that change state: through serve, then the same directly.
	changes := [][]string{
		{"stream", "append", "q", "s", "n=z"},
		{"archive", "cycle", "q", "s", "--keep", "2", "--trim-after", "remote"},
		{"volume", "push", "archive.q.s"},
		{"volume", "pull", "archive.q.s"},
		{"volume", "hydrate", "archive.q.s"},
		{"volume", "reset", "archive.q.s", "--to-remote"},
		{"enqueue", "jobs", "--payload", `{"n":1}`, "--mode", "sync"},
		{"enqueue", "jobs", "--payload", `{"n":2}`},
	}
	viaServe := make([]string, len(changes))
	for i, args := range changes {
		viaServe[i] = cli(args...)
	}
	if want := `{"folded":4,"trimmed":4,"watermark":"` + ids[18] + "\"}\n"; viaServe[1] != want {
		t.Errorf("cycle through serve printed %q, want %q", viaServe[1], want)
	}
	// The sync job reaches the job stream: its dispatch follows the push
	// that acknowledged it (docs/ACCEPT.md), so the claim is retried until
	// it appears or a deadline passes.
	if id := jobIDRe.FindString(viaServe[6]); id == "" {
		t.Errorf("no job id in %q", viaServe[6])
	} else {
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(cli("queue", "claim", "jobs", "--count", "10"), id) {
			if time.Now().After(deadline) {
				t.Errorf("job of %q not on the job stream after 20 s", viaServe[6])
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Bad input is refused by serve with its message.
	if _, _, err := run(t, "", append(append([]string{}, g...), "volume", "info", "archive.no.such")...); err == nil ||
		!strings.Contains(err.Error(), "volume ls") {
		t.Errorf("volume info of a missing volume through serve: %v", err)
	}
	stop()

	for i, args := range changes {
		got := cli(args...)
		norm := func(s string) string {
			s = jobIDRe.ReplaceAllString(s, "JOB_X")
			s = lsnRe.ReplaceAllString(s, `"lsn":N`)
			s = hashRe.ReplaceAllString(s, `"hash":"H"`)
			var m map[string]any
			if json.Unmarshal([]byte(s), &m) == nil && m["volume"] != nil && m["local_lsn"] != nil {
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				return strings.Join(keys, ",") // a volume's info: the same fields
			}
			if strings.HasPrefix(s, "EVT_") {
				return "EVT"
			}
			if strings.HasPrefix(s, `{"folded"`) {
				return `{"folded"`
			}
			return s
		}
		if norm(got) != norm(viaServe[i]) {
			t.Errorf("%v: through serve printed\n%s\ndirectly\n%s", args, viaServe[i], got)
		}
	}

	// The async job through serve is dispatched by now: serve's shutdown or
	// the direct enqueues after it committed what was pending.
	claimed := cli("queue", "claim", "jobs", "--count", "10")
	if id := jobIDRe.FindString(viaServe[7]); id == "" || !strings.Contains(claimed, id) {
		t.Errorf("job of %q not on the job stream:\n%s", viaServe[7], claimed)
	}

	// A socket file nobody listens on (a serve killed) is ignored.
	ln, err := net.Listen("unix", filepath.Join(data, server.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(filepath.Join(data, server.SocketName)); err != nil {
		t.Fatal(err)
	}
	if got := cli(reads[4]...); !strings.Contains(got, `"volume":"archive.q.s"`) {
		t.Errorf("status beside a stale socket: %s", got)
	}
}

// TestCLIThroughServeToken: a serve with a token answers the CLI of its
// own user through the socket without a token (the socket knows the
// peer's uid), with ECHOSTORE_TOKEN set to the token, and refuses a wrong
// ECHOSTORE_TOKEN, saying how to give the right one.
func TestCLIThroughServeToken(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	g := []string{"--redis", r.URL, "--data", data}
	startServe(t, r.URL, data, "", "cli-token-0123456789abcdef")
	t.Setenv("ECHOSTORE_TOKEN", "")
	if out, _, err := run(t, "", append(g, "volume", "ls")...); err != nil || !strings.HasPrefix(out, "[") {
		t.Fatalf("without a token: %q %v", out, err)
	}
	t.Setenv("ECHOSTORE_TOKEN", "not-the-token-0123456789abcdef")
	_, _, err := run(t, "", append(g, "volume", "ls")...)
	if err == nil || !strings.Contains(err.Error(), "ECHOSTORE_TOKEN") {
		t.Fatalf("with a wrong token: %v", err)
	}
	t.Setenv("ECHOSTORE_TOKEN", "cli-token-0123456789abcdef")
	out, _, err := run(t, "", append(g, "volume", "ls")...)
	if err != nil || !strings.HasPrefix(out, "[") {
		t.Fatalf("with the token: %q %v", out, err)
	}
}

// TestServeCommand runs `echostore serve` itself (the cobra command, its
// flags) in-process, then the CLI beside it through its socket, then stops
// it as SIGTERM does: it returns nil, removes its socket and frees the data
// dir for direct commands.
func TestServeCommand(t *testing.T) {
	r := startRedis(t)
	data := filepath.Join(t.TempDir(), "data")
	g := []string{"--redis", r.URL, "--data", data}
	logs, logw := io.Pipe()
	root := newRootCmd(io.Discard, logw)
	root.SetArgs(append(append([]string{}, g...), "serve", "--listen", "127.0.0.1:0", "--beat", "1h"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		logw.Close()
		done <- err
	}()
	sc := bufio.NewScanner(logs)
	for !strings.Contains(sc.Text(), "serve: listening") {
		if !sc.Scan() {
			t.Fatalf("serve ended before it listened: %v", <-done)
		}
	}
	go io.Copy(io.Discard, logs) // the rest of serve's log

	cli := mustRun(t, g)
	for i := range 5 {
		cli("stream", "append", "q", "s", fmt.Sprintf("n=%d", i))
	}
	cycled := cli("archive", "cycle", "q", "s", "--keep", "1")
	viaServe := cli("archive", "status", "q", "s")
	read := cli("stream", "read", "q", "s")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after its context ended (SIGTERM): %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, server.SocketName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket after serve stopped: %v", err)
	}
	if !strings.HasPrefix(cycled, `{"folded":4,"trimmed":4,`) {
		t.Fatalf("cycle through serve: %s", cycled)
	}
	if got := cli("archive", "status", "q", "s"); got != viaServe {
		t.Fatalf("status directly\n%s\nthrough serve\n%s", got, viaServe)
	}
	if got := cli("stream", "read", "q", "s"); got != read || len(lines(read)) != 5 {
		t.Fatalf("read directly\n%s\nthrough serve\n%s", got, read)
	}
}

// TestCLIThroughDegradedServe: a serve whose Redis is down answers /healthz
// "degraded" but still holds the data dir and serves what needs no Redis:
// the commands go through it (they used to take it for a serve shutting
// down, open the data dir themselves and fail, locked out, after waiting).
func TestCLIThroughDegradedServe(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	remoteURL := "file://" + filepath.Join(dir, "remote")
	cli := mustRun(t, []string{"--redis", r.URL, "--data", data, "--remote", remoteURL})
	for i := range 5 {
		cli("stream", "append", "q", "s", "n="+strconv.Itoa(i))
	}
	cli("archive", "cycle", "q", "s", "--keep", "1")
	want := cli("stream", "read", "q", "s", "--archive-only")
	if strings.Count(want, "\n") != 4 {
		t.Fatalf("archive-only read before serve: %q, want 4 records", want)
	}
	startServe(t, r.URL, data, remoteURL, "")
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	// Until serve's health answer (cached for a while) says so.
	c := client.Unix(filepath.Join(data, server.SocketName), client.Options{})
	for deadline := time.Now().Add(time.Minute); ; {
		if h, err := c.Health(t.Context()); err == nil && h.Status == "degraded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve's /healthz never said degraded after its Redis was killed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := cli("stream", "read", "q", "s", "--archive-only"); got != want {
		t.Fatalf("archive-only read through a degraded serve: %q, want %q", got, want)
	}
	if got := cli("volume", "info", "archive.q.s"); !strings.Contains(got, `"volume":"archive.q.s"`) {
		t.Fatalf("volume info through a degraded serve: %q", got)
	}
}
