package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/server"
)

// drillConf is what the disk-loss drill's serve child runs.
type drillConf struct {
	Data, Redis, Remote, Queue string
	Keep                       int64
}

// drillStreams are the streams the drill's serve declares.
var drillStreams = []string{"s0", "s1"}

// TestDiskLossServeChild runs `echostore serve` as the drill configures it
// (restore: true, trim_after: remote, the drill's streams declared, a beat
// of 100 ms): it opens the node as serve does (echostore.Open of the
// configuration's node part, then server.New), reports "R <open ms> <the
// restore's report as JSON>" and "A <addr>", and serves until it is
// killed.
func TestDiskLossServeChild(t *testing.T) {
	arg, ok := crashtest.Child("TestDiskLossServeChild")
	if !ok {
		t.Skip("the child of TestDiskLoss")
	}
	var c drillConf
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		t.Fatal(err)
	}
	var streams []server.StreamConfig
	for _, s := range drillStreams {
		streams = append(streams, server.StreamConfig{Name: s})
	}
	cfg, err := server.Config{
		Listen: "127.0.0.1:0", Redis: c.Redis, Data: c.Data, Remote: c.Remote, Beat: 100 * time.Millisecond, Restore: true,
		Defaults: server.StreamConfig{Keep: c.Keep, TrimAfter: "remote"},
		Queues:   []server.QueueConfig{{Name: c.Queue, Streams: streams}},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}.Checked()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	node, err := echostore.Open(ctx, cfg.NodeConfig())
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	s, err := server.New(ctx, node, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := json.Marshal(node.Restored())
	if err != nil {
		t.Fatal(err)
	}
	crashtest.Report("R %d %s", took.Milliseconds(), rep)
	crashtest.Report("A %s", s.Addr())
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// startDrillServe starts the drill's serve child and returns its client,
// its restore report and how long its open took.
func startDrillServe(t *testing.T, c drillConf) (*serveClient, *echostore.RestoreResult, time.Duration) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	p := crashtest.Start(t, "TestDiskLossServeChild", string(b))
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	var ms int64
	var js string
	if _, err := fmt.Sscanf(line, "R %d %s", &ms, &js); err != nil {
		t.Fatalf("child: %q: %v", line, err)
	}
	var rep *echostore.RestoreResult
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("child's restore report %q: %v", js, err)
	}
	line, err = p.Next()
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(line, "A ")
	if !ok {
		t.Fatalf("child: %q", line)
	}
	return &serveClient{t: t, base: "http://" + addr, p: p, http: &http.Client{Timeout: time.Minute}}, rep, time.Duration(ms) * time.Millisecond
}

// post sends a JSON body to serve and decodes the answer into out; any
// failure (serve killed under it) is returned, not fatal: the load runs
// in goroutines of its own.
func post(ctx context.Context, hc *http.Client, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %.200s", url, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// drillLoad is the drill's load and what serve acknowledged of it.
type drillLoad struct {
	mu      sync.Mutex
	records map[string][]string // stream → acknowledged ids
	sync    map[string]bool     // acknowledged sync jobs
	async   map[string]bool     // acknowledged async jobs
}

// run appends batches of 20 records to each stream (one batch every 10
// ms) and enqueues jobs (one in two sync) until ctx ends or serve stops
// answering.
func (l *drillLoad) run(ctx context.Context, base, q string) {
	hc := &http.Client{Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for _, s := range drillStreams {
		wg.Go(func() {
			pace := time.NewTicker(10 * time.Millisecond) // at most 2,000 records a second per stream
			defer pace.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				select {
				case <-ctx.Done():
					return
				case <-pace.C:
				}
				var body bytes.Buffer
				for k := range 20 {
					fmt.Fprintf(&body, "{\"fields\":{\"i\":\"%d\",\"k\":\"%d\",\"pad\":\"%s\"}}\n", i, k, strings.Repeat("r", 1500))
				}
				var res struct{ IDs []string }
				if err := post(ctx, hc, base+"/v1/streams/"+q+"/"+s, body.String(), &res); err != nil {
					return // killed: the outcome of this batch is unknown
				}
				l.mu.Lock()
				l.records[s] = append(l.records[s], res.IDs...)
				l.mu.Unlock()
			}
		})
	}
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				mode := []string{"sync", "async"}[(i+w)%2]
				var rc struct{ ID string }
				if err := post(ctx, hc, base+"/v1/queues/"+q+"/jobs?mode="+mode, fmt.Sprintf(`{"payload":{"w":%d,"i":%d}}`, w, i), &rc); err != nil {
					return
				}
				l.mu.Lock()
				if mode == "sync" {
					l.sync[rc.ID] = true
				} else {
					l.async[rc.ID] = true
				}
				l.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// archived returns how many records of stream s serve reports archived
// (0 while the stream does not exist yet: serve answers its status with an
// error until the first append).
func archived(c *serveClient, q, s string) int64 {
	a := c.do("GET", "/v1/streams/"+q+"/"+s+"/archive", nil)
	if a.code != http.StatusOK {
		return 0
	}
	n, _ := a.body["archived"].(float64)
	return int64(n)
}

// TestDiskLoss is the disk-loss drill: a real serve (restore: true,
// trim_after: remote, a real Redis, a real MinIO) under load — appends with
// their acknowledgements recorded, the archive driver cycling, sync and
// async enqueues — is SIGKILLed and its data dir deleted under that load,
// then started again on the empty data dir. It must restore from the
// remote alone, lazily (bytes fetched before the first read well below the
// archive's bytes), read back every acknowledged record by merge-read,
// dispatch every acknowledged sync job, and resume cycling: its streams are
// bounded to the window again. The figures (open with the restore, first
// read, bytes fetched, async jobs lost) are logged for RELIABILITY.md.
func TestDiskLoss(t *testing.T) {
	if _, ok := crashtest.Child("TestDiskLossServeChild"); ok {
		return
	}
	mi := servers.MinIO(t)
	for _, kv := range mi.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	bucket := fmt.Sprintf("diskloss-%d-%d", os.Getpid(), queueSeq.Add(1)) // a bucket of its own per run
	if err := mi.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	redis := servers.Redis(t).URL
	live := connect(t, redis)
	q := queueName(t)
	conf := drillConf{Data: filepath.Join(t.TempDir(), "data"), Redis: redis, Remote: mi.URL(bucket), Queue: q, Keep: 100}

	c, rep, _ := startDrillServe(t, conf)
	if rep != nil && (rep.Restored && len(rep.Volumes) != 0) {
		t.Fatalf("first start on an empty remote restored %+v", rep)
	}
	load := &drillLoad{records: map[string][]string{}, sync: map[string]bool{}, async: map[string]bool{}}
	lctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan struct{})
	go func() { defer close(done); load.run(lctx, c.base, q) }()
	// Load until every stream has archived records and sync jobs are in.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		load.mu.Lock()
		nsync := len(load.sync)
		load.mu.Unlock()
		if archived(c, q, "s0") >= 2000 && archived(c, q, "s1") >= 2000 && nsync >= 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("load: %d and %d records archived, %d sync jobs after 2 minutes", archived(c, q, "s0"), archived(c, q, "s1"), nsync)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The disk is lost under load.
	if err := c.p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(conf.Data); err != nil {
		t.Fatal(err)
	}
	stop()
	<-done
	load.mu.Lock()
	defer load.mu.Unlock()
	total := len(load.records["s0"]) + len(load.records["s1"])
	t.Logf("before the loss: %d records, %d sync and %d async jobs acknowledged", total, len(load.sync), len(load.async))

	c, rep, opened := startDrillServe(t, conf)
	if rep == nil || !rep.Restored {
		t.Fatalf("restart on the deleted data dir did not restore: %+v", rep)
	}
	var archBytes uint64
	restored := map[string]echostore.RestoredVolume{}
	for _, v := range rep.Volumes {
		restored[v.Volume] = v
		archBytes += v.Bytes
	}
	for _, v := range []string{"archive." + q + ".s0", "archive." + q + ".s1", "accept." + q + ".0"} {
		if restored[v].RemoteLSN == 0 {
			t.Fatalf("volume %s not restored: %+v", v, rep)
		}
	}
	if rep.BytesFetched*4 > int64(archBytes) {
		t.Fatalf("restore fetched %d bytes before the first read, the volumes hold %d: not lazy", rep.BytesFetched, archBytes)
	}
	readStart := time.Now()
	if a := c.do("GET", "/v1/streams/"+q+"/s0?limit=1", nil); a.code != http.StatusOK {
		t.Fatalf("first read after the restore: %d %s", a.code, a.raw)
	}
	firstRecord := time.Since(readStart)
	readStart = time.Now()
	for _, s := range drillStreams {
		readAll(t, c, q, s, load.records[s])
	}
	firstRead := time.Since(readStart)
	d := waitDispatched(t, live, q, load.sync)
	asyncLost := 0
	for id := range load.async {
		bid, err := brand.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(d[bid.ID]) == 0 {
			asyncLost++
		}
	}
	// It resumes its work: new records are folded and the streams bounded.
	for _, s := range drillStreams {
		var body bytes.Buffer
		for k := range 300 {
			fmt.Fprintf(&body, "{\"fields\":{\"after\":\"%d\"}}\n", k)
		}
		var res struct{ IDs []string }
		if err := post(t.Context(), c.http, c.base+"/v1/streams/"+q+"/"+s, body.String(), &res); err != nil || len(res.IDs) != 300 {
			t.Fatalf("append after the restore: %+v, %v", res, err)
		}
	}
	deadline = time.Now().Add(time.Minute)
	for _, s := range drillStreams {
		for {
			in, err := live.Info(t.Context(), mustRef(t, q, s))
			if err != nil {
				t.Fatal(err)
			}
			if in.Length <= conf.Keep {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream %s holds %d live entries a minute after the restore, window %d: not cycled", s, in.Length, conf.Keep)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("restore: %d volumes, %d requests, %d bytes fetched before the first read (the volumes hold %d bytes), restore %d ms, open %v; "+
		"first record read %v, merge-read of all %d records %v; %d sync jobs all dispatched; %d of %d async jobs lost",
		len(rep.Volumes), rep.Requests, rep.BytesFetched, archBytes, rep.TookMs, opened.Round(time.Millisecond),
		firstRecord.Round(time.Millisecond), total, firstRead.Round(time.Millisecond), len(load.sync), asyncLost, len(load.async))
	for _, v := range rep.Volumes {
		t.Logf("  %s: remote LSN %d, %d pages, %d bytes, %d frames left in the remote", v.Volume, v.RemoteLSN, v.Pages, v.Bytes, v.UnfetchedFrames)
	}
}
