package faults

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/crashtest"
)

// randomField is an incompressible field value of about n bytes, so that
// what Pebble writes is as large as what was committed.
func randomField(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n*3/4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// startServe starts the serve child on data and returns its client.
func startServe(t *testing.T, data, redis string) *serveClient {
	t.Helper()
	p := crashtest.Start(t, "TestServeDiskFullChild", data+"|"+redis)
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(line, "A ")
	if !ok {
		t.Fatalf("child: %q", line)
	}
	return &serveClient{t: t, base: "http://" + addr, p: p, http: &http.Client{Timeout: time.Minute}}
}

// appendBig appends n records of about size bytes to q/st and returns their ids.
func appendBig(t *testing.T, c *serveClient, q, st string, n, size int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		a := c.do("POST", "/v1/streams/"+q+"/"+st, map[string]any{"fields": map[string]string{"a": randomField(t, size), "i": fmt.Sprint(i)}})
		if a.code != http.StatusOK {
			t.Fatalf("append %d: %d %.300s", i, a.code, a.raw)
		}
		for _, id := range a.body["ids"].([]any) {
			ids = append(ids, id.(string))
		}
	}
	return ids
}

// readAll fails unless a merge-read of q/st returns every id.
func readAll(t *testing.T, c *serveClient, q, st string, ids []string) {
	t.Helper()
	a := c.do("GET", "/v1/streams/"+q+"/"+st+"?limit=100000", nil)
	if a.code != http.StatusOK {
		t.Fatalf("merge-read: %d %.300s", a.code, a.raw)
	}
	got := map[string]bool{}
	for l := range strings.Lines(a.raw) {
		var rec struct{ ID string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("merge-read: line %.100q: %v", l, err)
		}
		got[rec.ID] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("merge-read: acknowledged record %s missing (%d read, %d appended)", id, len(got), len(ids))
		}
	}
}

// leaveFree fills the filesystem of dir with path and then shrinks path
// until about free bytes are left.
func leaveFree(t *testing.T, path string, free int64) {
	t.Helper()
	fill(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, max(0, fi.Size()-free)); err != nil {
		t.Fatal(err)
	}
}

// TestServeDiskFullLargeFold: a fold larger than the free space (100
// records of 60 KB, folded in one commit, with 3 MB free on a 16 MiB data
// dir) is refused with 507 before Pebble sees it, instead of Pebble's fatal
// commit error (a reset for the client, and on the next cycle the process's
// end); serve stays up, and once space is freed the same cycle folds and
// every record reads back.
func TestServeDiskFullLargeFold(t *testing.T) {
	if _, ok := crashtest.Child("TestServeDiskFullChild"); ok {
		return
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, data, 16)
	redis := servers.Redis(t).URL
	q, st := queueName(t), "big"
	c := startServe(t, data, redis)
	ids := appendBig(t, c, q, st, 100, 60000)
	filler := filepath.Join(data, "filler")
	leaveFree(t, filler, 3<<20)
	cycle := func() apiAnswer { return c.do("POST", "/v1/streams/"+q+"/"+st+"/cycle?keep=10", nil) }
	want507(t, "a cycle folding more than the free space", cycle())
	want507(t, "the same cycle again", cycle())
	if a := c.do("GET", "/healthz", nil); a.code != http.StatusOK {
		t.Fatalf("healthz after the refused fold: %d %s", a.code, a.raw)
	}
	readAll(t, c, q, st, ids)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		a := cycle()
		if a.code == http.StatusOK {
			break
		}
		if a.code != http.StatusInsufficientStorage {
			t.Fatalf("cycle once space is freed: %d %s", a.code, a.raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("cycle still refused a minute after space was freed: %s", a.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := c.do("GET", "/v1/streams/"+q+"/"+st+"/archive", nil); a.code != http.StatusOK {
		t.Fatalf("archive status: %d %s", a.code, a.raw)
	}
	readAll(t, c, q, st, ids)
}

// countingWriter counts the bytes and lines written to it.
type countingWriter struct{ bytes, lines atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes.Add(int64(len(p)))
	w.lines.Add(int64(strings.Count(string(p), "\n")))
	return len(p), nil
}

// TestServeDiskFullRestart: serve killed with a write-ahead log of 3 MB
// (folded, incompressible records) that the flush at start must write, and
// restarted on a full data dir, must not spin (Pebble retries the failed
// flush at once, forever, and logged a line each time: gigabytes, and no
// listen until space came back): within 30 s it listens or ends with an
// error that says the disk is full, having written at most 64 KiB to
// stderr (its log); once space is freed it starts and every record reads back.
func TestServeDiskFullRestart(t *testing.T) {
	if _, ok := crashtest.Child("TestServeDiskFullChild"); ok {
		return
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, data, 16)
	redis := servers.Redis(t).URL
	q, st := queueName(t), "big"
	c := startServe(t, data, redis)
	ids := appendBig(t, c, q, st, 60, 60000)
	if a := c.do("POST", "/v1/streams/"+q+"/"+st+"/cycle?keep=10", nil); a.code != http.StatusOK {
		t.Fatalf("cycle with room: %d %s", a.code, a.raw)
	}
	if err := c.p.Kill(); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(data, "filler")
	fill(t, filler)
	fill(t, filler+"2")

	// The child, its stderr counted (crashtest keeps only the first MiB).
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeDiskFullChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), "ECHOSTORE_CRASHTEST_CHILD=TestServeDiskFullChild", "ECHOSTORE_CRASHTEST_ARG="+data+"|"+redis)
	stderr := &countingWriter{}
	head := &limitedBuilder{n: 4096}
	cmd.Stderr = io.MultiWriter(stderr, head)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	came := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "crashtest: "); ok {
				came <- l
				return
			}
			_, _ = fmt.Fprintln(head, sc.Text()) // the child's test failure
		}
		close(came)
	}()
	var listened bool
	select {
	case l, ok := <-came:
		listened = ok && strings.HasPrefix(l, "A ")
	case <-time.After(30 * time.Second):
		t.Fatalf("serve on a full data dir neither listened nor ended in 30 s; %d bytes, %d lines of stderr so far, beginning: %s",
			stderr.bytes.Load(), stderr.lines.Load(), head.String())
	}
	took := time.Since(start)
	if !listened {
		_ = cmd.Wait()
	} else {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Logf("start on a full data dir: listened=%v after %v, %d bytes and %d lines of stderr", listened, took, stderr.bytes.Load(), stderr.lines.Load())
	if n := stderr.bytes.Load(); n > 64<<10 {
		t.Fatalf("serve wrote %d bytes (%d lines) to stderr starting on a full data dir, want at most 64 KiB; beginning: %s", n, stderr.lines.Load(), head.String())
	}
	if !listened && !strings.Contains(head.String(), "no space left on device") {
		t.Fatalf("serve ended on a full data dir without saying it is full: %s", head.String())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler + "2"); err != nil {
		t.Fatal(err)
	}
	c = startServe(t, data, redis)
	readAll(t, c, q, st, ids)
}

// limitedBuilder keeps the first n bytes written to it.
type limitedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

func (l *limitedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *limitedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
