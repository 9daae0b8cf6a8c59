package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/server"
)

// mountTmpfs mounts a tmpfs of sizeMiB on dir for the test, or skips the
// test, loudly, where this process may not mount (not root, no
// CAP_SYS_ADMIN); under CI=true it fails instead.
func mountTmpfs(t *testing.T, dir string, sizeMiB int) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0700", sizeMiB), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("SKIPPED, NOT RUN: %s needs to mount a tmpfs (root): mount: %v: %s", t.Name(), err, bytes.TrimSpace(out))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fill writes path with zeros until the filesystem is full (ENOSPC) and
// returns how many bytes it wrote.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 256<<10)
	var n int64
	for {
		m, err := f.Write(chunk)
		n += int64(m)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// TestServeDiskFullChild runs `echostore serve` (server.New and Run) on the
// data dir, Redis and remote (optional) its parent names, reports "A <addr>", and serves until
// it is killed.
func TestServeDiskFullChild(t *testing.T) {
	arg, ok := crashtest.Child("TestServeDiskFullChild")
	if !ok {
		t.Skip("the child of TestServeDiskFull")
	}
	f := strings.Split(arg, "|")
	data, redis, rurl := f[0], f[1], ""
	if len(f) > 2 {
		rurl = f[2]
	}
	ctx := context.Background()
	s, err := server.Open(ctx, server.Config{
		Listen: "127.0.0.1:0", Redis: redis, Data: data, Remote: rurl, Beat: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	crashtest.Report("A %s", s.Addr())
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// serveClient talks to the child serve; a request the server does not
// answer (a reset, a refused connection) fails the test with what the child
// wrote before it died.
type serveClient struct {
	t    *testing.T
	base string
	p    *crashtest.Process
	http *http.Client
}

type apiAnswer struct {
	code int
	body map[string]any
	raw  string
}

func (c *serveClient) do(method, path string, body any) apiAnswer {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json") // serve refuses a state change without it
	}
	resp, err := c.http.Do(req)
	if err != nil {
		_, perr := c.p.Next()
		c.t.Fatalf("%s %s: serve did not answer: %v (the child: %v)", method, path, err, perr)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	a := apiAnswer{code: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// errCode is the error code of an error answer, "" if none.
func (a apiAnswer) errCode() string {
	e, _ := a.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// want507 fails unless a is 507 insufficient_storage.
func want507(t *testing.T, what string, a apiAnswer) {
	t.Helper()
	if a.code != http.StatusInsufficientStorage || a.errCode() != "insufficient_storage" {
		t.Fatalf("%s on a full data dir: %d %s, want 507 insufficient_storage", what, a.code, a.raw)
	}
}

// TestServeDiskFull runs a real serve (a child process, a real Redis) on a
// small tmpfs data dir and fills it: first through the API (async jobs of
// 64 KiB until the server refuses), then with a filler file up to ENOSPC.
// Writes must answer 507 insufficient_storage (not 500, not a reset); the
// process stays up and reads go on (/healthz, merge-read, archive status,
// queue status); once the filler is deleted writes succeed again without a
// restart; and no acknowledged job or record is lost.
func TestServeDiskFull(t *testing.T) {
	if _, ok := crashtest.Child("TestServeDiskFullChild"); ok {
		return
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, data, 160)
	redis := servers.Redis(t).URL
	q, st := queueName(t), "s"
	p := crashtest.Start(t, "TestServeDiskFullChild", data+"|"+redis)
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(line, "A ")
	if !ok {
		t.Fatalf("child: %q", line)
	}
	c := &serveClient{t: t, base: "http://" + addr, p: p, http: &http.Client{Timeout: time.Minute}}

	acked := map[string]bool{} // job ids answered 200
	records := map[string]bool{}
	pad := strings.Repeat("p", 64<<10)
	enqueue := func(mode string, payload string) apiAnswer {
		a := c.do("POST", "/v1/queues/"+q+"/jobs?mode="+mode, map[string]any{"payload": payload})
		if a.code == http.StatusOK {
			id, _ := a.body["id"].(string)
			acked[id] = true
		}
		return a
	}
	appendRecs := func(n int) apiAnswer {
		var a apiAnswer
		for i := range n {
			a = c.do("POST", "/v1/streams/"+q+"/"+st, map[string]any{"fields": map[string]string{"i": fmt.Sprint(i)}})
			if a.code != http.StatusOK {
				return a
			}
			for _, id := range a.body["ids"].([]any) {
				records[id.(string)] = true
			}
		}
		return a
	}
	cycle := func() apiAnswer { return c.do("POST", "/v1/streams/"+q+"/"+st+"/cycle?keep=1", nil) }

	// With room: jobs both ways, records archived.
	for i := range 20 {
		if a := enqueue("sync", fmt.Sprint("sync ", i)); a.code != http.StatusOK {
			t.Fatalf("sync enqueue with room: %d %s", a.code, a.raw)
		}
		if a := enqueue("async", fmt.Sprint("async ", i)); a.code != http.StatusOK {
			t.Fatalf("async enqueue with room: %d %s", a.code, a.raw)
		}
	}
	if a := appendRecs(50); a.code != http.StatusOK {
		t.Fatalf("append with room: %d %s", a.code, a.raw)
	}
	if a := cycle(); a.code != http.StatusOK {
		t.Fatalf("cycle with room: %d %s", a.code, a.raw)
	}

	// Leave 24 MiB, and let the API fill most of it.
	filler := filepath.Join(data, "filler")
	fill(t, filler)
	fi, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, max(0, fi.Size()-24<<20)); err != nil {
		t.Fatal(err)
	}
	refused := false
	for i := 0; i < 2000 && !refused; i++ {
		a := enqueue("async", pad)
		switch a.code {
		case http.StatusOK:
		case http.StatusInsufficientStorage:
			want507(t, "async enqueue", a)
			refused = true
		default:
			t.Fatalf("async enqueue %d as the disk fills: %d %s, want 200 or 507", i, a.code, a.raw)
		}
	}
	if !refused {
		t.Fatal("2000 async enqueues of 64 KiB on a 24 MiB-free disk: none was refused")
	}
	// Then the rest of the disk, from outside. Pebble may free space of its
	// own (an obsolete log or table) between the fill and the request: a
	// write that was accepted with room back on the disk is tried again.
	whenFull := func(what string, write func() apiAnswer) {
		t.Helper()
		for range 5 {
			fill(t, filler)
			a := write()
			if a.code == http.StatusOK {
				var fs syscall.Statfs_t
				if err := syscall.Statfs(data, &fs); err != nil {
					t.Fatal(err)
				}
				if free := fs.Bavail * uint64(fs.Bsize); free >= 1<<20 {
					t.Logf("%s accepted: %d bytes came free", what, free)
					continue
				}
			}
			want507(t, what, a)
			return
		}
		t.Fatalf("%s: the disk never stayed full", what)
	}
	whenFull("sync enqueue", func() apiAnswer { return enqueue("sync", "sync when full") })
	whenFull("async enqueue", func() apiAnswer { return enqueue("async", "async when full") })
	whenFull("cycle", func() apiAnswer {
		if a := appendRecs(10); a.code != http.StatusOK { // Redis has room: the records wait there
			t.Fatalf("append on a full data dir: %d %s", a.code, a.raw)
		}
		return cycle()
	})

	// Reads go on.
	if a := c.do("GET", "/healthz", nil); a.code != http.StatusOK {
		t.Fatalf("healthz on a full data dir: %d %s", a.code, a.raw)
	}
	checkRead := func(when string) {
		t.Helper()
		a := c.do("GET", "/v1/streams/"+q+"/"+st+"?limit=10000", nil)
		if a.code != http.StatusOK {
			t.Fatalf("merge-read %s: %d %s", when, a.code, a.raw)
		}
		got := map[string]bool{}
		for l := range strings.Lines(a.raw) {
			var rec struct{ ID string }
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("merge-read %s: line %q: %v", when, l, err)
			}
			got[rec.ID] = true
		}
		for id := range records {
			if !got[id] {
				t.Fatalf("merge-read %s: acknowledged record %s missing (%d of %d read): %.300s", when, id, len(got), len(records), a.raw)
			}
		}
	}
	checkRead("on a full data dir")
	for _, path := range []string{"/v1/streams/" + q + "/" + st + "/archive", "/v1/queues/" + q} {
		if a := c.do("GET", path, nil); a.code != http.StatusOK {
			t.Fatalf("GET %s on a full data dir: %d %s", path, a.code, a.raw)
		}
	}

	// Room again: writes succeed without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		a := enqueue("sync", "sync after")
		if a.code == http.StatusOK {
			break
		}
		if a.code != http.StatusInsufficientStorage {
			t.Fatalf("sync enqueue once room returns: %d %s", a.code, a.raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve still refuses writes a minute after the disk has room: %s", a.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := enqueue("async", "async after"); a.code != http.StatusOK {
		t.Fatalf("async enqueue after recovery: %d %s", a.code, a.raw)
	}
	if a := cycle(); a.code != http.StatusOK {
		t.Fatalf("cycle after recovery: %d %s", a.code, a.raw)
	}
	checkRead("after recovery")

	// Every acknowledged job reaches the job stream, once.
	d := waitDispatched(t, connect(t, redis), q, acked)
	for id, entries := range d {
		if len(entries) != 1 {
			t.Fatalf("job %s dispatched from %d entries", brand.JOB.Format(id), len(entries))
		}
	}
	t.Logf("%d jobs and %d records acknowledged, none lost", len(acked), len(records))
}
