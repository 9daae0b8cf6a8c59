package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/server"
)

// TestServeReplicateChild runs `echostore serve` (server.Open and Run)
// with its default configuration but for a short beat, on the data dir,
// Redis and remote its parent names; it reports "A <addr>" and serves until
// it is killed.
func TestServeReplicateChild(t *testing.T) {
	arg, ok := crashtest.Child("TestServeReplicateChild")
	if !ok {
		t.Skip("the child of TestServeReplicatesByDefault")
	}
	f := strings.Split(arg, "|")
	ctx := context.Background()
	s, err := server.Open(ctx, server.Config{
		Listen: "127.0.0.1:0", Data: f[0], Redis: f[1], Remote: f[2], Beat: 200 * time.Millisecond,
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

// TestServeReplicatesByDefault runs a real serve (a child process) on a real
// Redis and a MinIO remote with serve's default replication settings
// (trim_after: local, replicate_every 1s). After appends, async and sync
// jobs and a cycle, every volume reaches remote LSN = local LSN by itself
// (the test never calls push), and the bucket holds each volume's log up to
// that LSN. Then, quiet, the node makes no request to the remote at all
// over many beats and several replicate intervals, counted by serve's own
// metering of the remote store on /metrics.
func TestServeReplicatesByDefault(t *testing.T) {
	if _, ok := crashtest.Child("TestServeReplicateChild"); ok {
		return
	}
	_, rurl := ownMinIO(t, "replicate")
	data := t.TempDir()
	// A Redis of its own: on the package's shared one, serve's discovery
	// adopts the archived streams of the tests running beside it, whose
	// volumes and remote requests are not this test's to count.
	red, err := testserver.StartRedis(t.Context(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { red.Stop() })
	p := crashtest.Start(t, "TestServeReplicateChild", data+"|"+red.URL+"|"+rurl)
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(line, "A ")
	if !ok {
		t.Fatalf("child: %q", line)
	}
	c := &serveClient{t: t, base: "http://" + addr, p: p, http: &http.Client{Timeout: time.Minute}}
	q := queueName(t)

	for i := range 60 {
		if a := c.do("POST", "/v1/streams/"+q+"/s", map[string]any{"fields": map[string]string{"i": fmt.Sprint(i)}}); a.code != http.StatusOK {
			t.Fatalf("append %d: %d %s", i, a.code, a.raw)
		}
	}
	for i := range 5 {
		for _, mode := range []string{"async", "sync"} {
			if a := c.do("POST", "/v1/queues/"+q+"/jobs?mode="+mode, map[string]any{"payload": fmt.Sprint(mode, " ", i)}); a.code != http.StatusOK {
				t.Fatalf("%s enqueue %d: %d %s", mode, i, a.code, a.raw)
			}
		}
	}
	if a := c.do("POST", "/v1/streams/"+q+"/s/cycle?keep=10", nil); a.code != http.StatusOK {
		t.Fatalf("cycle: %d %s", a.code, a.raw)
	}
	arch := "archive." + q + ".s"

	// Every volume reaches remote LSN = local LSN with no push call: at
	// most replicate_every (1s) plus one push after its last commit; the
	// deadline only bounds the wait.
	start := time.Now()
	var vols []echostore.VolumeStatus
	defer func() {
		if t.Failed() {
			t.Logf("the volumes last seen: %+v\nthe child's stderr:\n%s", vols, p.Stderr())
		}
	}()
	waitDeadline(t, 90*time.Second, "every volume pushed in the background", func() bool {
		vols = volumes(c)
		found := false
		for _, v := range vols {
			found = found || v.Volume.String() == arch
			if v.LocalLSN == 0 || v.RemoteLSN == 0 || v.SyncLSN != v.LocalLSN {
				return false
			}
		}
		return found && len(vols) >= 2 // the archive volume and the queue's accept volume
	})
	t.Logf("every volume (%d) at remote LSN = local LSN %v after the cycle (replicate_every 1s)", len(vols), time.Since(start).Round(time.Millisecond))
	rs, err := remote.Open(t.Context(), rurl, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for _, v := range vols {
		if v.Lag.Commits != 0 || v.Lag.Seconds != 0 {
			t.Errorf("volume %s at its remote LSN reports a lag of %+v", v.Volume, v.Lag)
		}
		if v.Lag.Records == nil || *v.Lag.Records != 0 {
			t.Errorf("volume %s: lag records %v, want 0 (an archive or accept volume)", v.Volume, v.Lag.Records)
		}
		l, err := remote.NewLog(rs, v.Volume)
		if err != nil {
			t.Fatal(err)
		}
		if head, err := l.Head(t.Context()); err != nil || head != v.RemoteLSN {
			t.Errorf("volume %s: the bucket's log ends at %d (%v), the volume's remote LSN is %d", v.Volume, head, err, v.RemoteLSN)
		}
	}

	m := scrape(c)
	for _, want := range []string{
		`echostore_remote_requests_total{op="put_if_absent",result="ok"}`,
		`echostore_remote_bytes_total{direction="out"}`,
		`echostore_replication_pushes_total{result="ok"}`,
	} {
		if m[want] <= 0 {
			t.Errorf("/metrics: %s = %v, want > 0", want, m[want])
		}
	}
	for _, want := range []string{
		`echostore_volume_replication_lag_commits{volume="` + arch + `"}`,
		`echostore_volume_replication_lag_records{volume="` + arch + `"}`,
		`echostore_volume_replication_lag_seconds{volume="` + arch + `"}`,
		`echostore_replication_outage`,
		`echostore_remote_requests_total{op="list",result="ok"}`,
		`echostore_remote_bytes_total{direction="in"}`,
	} {
		if v, ok := m[want]; !ok || (strings.Contains(want, "lag") && v != 0) {
			t.Errorf("/metrics: %s = %v (present %v), want present (a lag of 0)", want, v, ok)
		}
	}

	// Quiet: a beat every 200ms and nothing new comes in. Over 25 beats
	// (5 replicate intervals) the remote sees no request.
	before := scrape(c)
	beats := func(m map[string]float64) float64 { return m["echostore_beats_total"] }
	waitDeadline(t, time.Minute, "25 beats", func() bool { return beats(scrape(c)) >= beats(before)+25 })
	after := scrape(c)
	if r0, r1 := sumOf(before, "echostore_remote_requests_total{"), sumOf(after, "echostore_remote_requests_total{"); r1 != r0 {
		t.Errorf("a quiet node made %v remote requests over %v beats (%v before, %v after)", r1-r0, beats(after)-beats(before), r0, r1)
	}
	if p0, p1 := before[`echostore_replication_pushes_total{result="ok"}`], after[`echostore_replication_pushes_total{result="ok"}`]; p1 != p0 {
		t.Errorf("a quiet node pushed %v times", p1-p0)
	}
	for _, v := range volumes(c) {
		if v.SyncLSN != v.LocalLSN || v.Lag.Commits != 0 {
			t.Errorf("quiet volume %s: local %d sync %d lag %+v", v.Volume, v.LocalLSN, v.SyncLSN, v.Lag)
		}
	}
}

// volumes returns GET /v1/volumes.
func volumes(c *serveClient) []echostore.VolumeStatus {
	c.t.Helper()
	a := c.do("GET", "/v1/volumes", nil)
	if a.code != http.StatusOK {
		c.t.Fatalf("GET /v1/volumes: %d %s", a.code, a.raw)
	}
	var out echostore.VolumeList
	if err := json.Unmarshal([]byte(a.raw), &out); err != nil {
		c.t.Fatalf("GET /v1/volumes: %v: %s", err, a.raw)
	}
	return out.Volumes
}

// scrape returns the samples of GET /metrics by series ("name{labels}").
func scrape(c *serveClient) map[string]float64 {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		c.t.Fatalf("GET /metrics: %v", err)
	}
	return out
}

// sumOf sums the samples whose series starts with prefix.
func sumOf(m map[string]float64, prefix string) float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// waitDeadline polls cond until it holds, failing the test with what once
// within has passed.
func waitDeadline(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
