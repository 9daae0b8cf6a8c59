package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/internal/testserver"
)

// Scale goals of one serve (docs/BENCHMARKS.md, "Scale").
const (
	scaleMaxClients = 64 // Redis connected_clients with every stream archived
	// scaleMaxGoroutines bounds serve's goroutines whatever the number of
	// streams (they were one per archived stream).
	scaleMaxGoroutines = 400
	// scaleMaxIdleOps bounds the Redis commands per second (scripts' own
	// calls included) of serve's beat with every stream idle.
	scaleMaxIdleOps = 100
	// settledOps: below this many Redis commands a second, no beat is
	// cycling streams (a cycle is 10–18 commands, a beat cycles 1,000 or
	// more a second).
	settledOps = 200
)

// TestScaleServeChild runs serve (server.Open and Run, the default beat)
// on the data dir and Redis its parent names, with room for the streams it
// says, reports "A <addr> <pid>", and serves until it is killed.
func TestScaleServeChild(t *testing.T) {
	arg, ok := crashtest.Child("TestScaleServeChild")
	if !ok {
		t.Skip("the child of TestScaleArchivedStreams")
	}
	f := strings.Split(arg, "|")
	n, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Open(ctx, Config{
		Listen: "127.0.0.1:0", Redis: f[1], Data: f[0], MaxStreams: n + 10, MetricsPublic: true,
		Defaults: StreamConfig{Keep: 10},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		t.Fatal(err)
	}
	crashtest.Report("A %s %d", s.Addr(), os.Getpid())
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// scaleFigures are what TestScaleArchivedStreams measures of serve and its
// Redis at one point.
type scaleFigures struct {
	rssKB, goroutines, clients int
	commands                   int64
	cycles                     float64  // archive cycles run, of every stream
	beat                       []string // the echostore_beat_streams lines
}

func measureScale(t *testing.T, base string, pid int, addr string) scaleFigures {
	t.Helper()
	var f scaleFigures
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f.rssKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			f.goroutines, _ = strconv.Atoi(v)
		}
		if strings.HasPrefix(l, "echostore_beat_streams{") {
			f.beat = append(f.beat, l)
		}
		if strings.HasPrefix(l, "echostore_cycles_total{") && strings.Contains(l, `kind="archive"`) {
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				c, _ := strconv.ParseFloat(l[i+1:], 64)
				f.cycles += c
			}
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	info, err := testserver.Do(context.Background(), addr, "INFO")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "connected_clients:"); ok {
			f.clients, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(l, "total_commands_processed:"); ok {
			f.commands, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return f
}

// TestScaleArchivedStreams: N archived streams (ECHOSTORE_SCALE_STREAMS,
// 300 by default; docs/BENCHMARKS.md has 10,000) with a window of 10 on one
// serve process, made by one append each and then appended to at random
// across several beats: serve's goroutines stay under scaleMaxGoroutines,
// Redis's connections under scaleMaxClients and the idle beat's Redis
// commands under scaleMaxIdleOps a second, whatever N. It logs serve's
// resident memory, goroutines, Redis connections and the idle Redis
// commands per second (total_commands_processed over a quiet window of two
// beats), at the start and at N, and per stream.
func TestScaleArchivedStreams(t *testing.T) {
	if _, ok := crashtest.Child("TestScaleServeChild"); ok {
		return
	}
	n := 300
	if v := os.Getenv("ECHOSTORE_SCALE_STREAMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("ECHOSTORE_SCALE_STREAMS=%q: want a number of streams", v)
		}
	}
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	p := crashtest.Start(t, "TestScaleServeChild", t.TempDir()+"|"+r.URL+"|"+strconv.Itoa(n))
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	var pid int
	if _, err := fmt.Sscanf(line, "A %s %d", &addr, &pid); err != nil {
		t.Fatalf("child: %q: %v", line, err)
	}
	base := "http://" + addr
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	post := func(path, body string) {
		resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	parallel := func(count int, f func(i int)) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					f(i)
				}
			}()
		}
		for i := range count {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	post("/v1/streams/scale/s0", `{"fields":{"n":"0"}}`)
	var idleCycles float64 // archive cycles in the last quiet window
	idle := func() (scaleFigures, float64) {
		// A quiet window of two beats: what the server does with no input.
		a := measureScale(t, base, pid, r.Addr)
		window := 2 * DefaultBeat
		time.Sleep(window)
		b := measureScale(t, base, pid, r.Addr)
		idleCycles = b.cycles - a.cycles
		// measureScale's own INFO is one command.
		return b, float64(b.commands-a.commands-1) / window.Seconds()
	}
	start, startOps := idle()

	made := time.Now()
	parallel(n, func(i int) { post(fmt.Sprintf("/v1/streams/scale/s%d", i+1), `{"fields":{"n":"0"}}`) })
	madeIn := time.Since(made)
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	picks := make([]int, 4*n)
	for i := range picks {
		picks[i] = 1 + rng.IntN(n)
	}
	parallel(len(picks), func(i int) {
		post(fmt.Sprintf("/v1/streams/scale/s%d", picks[i]), fmt.Sprintf(`{"fields":{"n":"%d"}}`, i+1))
	})
	if t.Failed() {
		t.FailNow()
	}
	// Two beats pass with the appends cycled, and then beats until Redis
	// runs fewer than settledOps commands a second over a beat's time (a
	// beat with every stream due takes longer than the beat, and its
	// cycles are counted at its end: Redis's commands are what shows it
	// running; at most three minutes), then the quiet window.
	time.Sleep(2 * DefaultBeat)
	settled := time.Now()
	for deadline := time.Now().Add(3 * time.Minute); ; {
		a := measureScale(t, base, pid, r.Addr)
		time.Sleep(DefaultBeat)
		b := measureScale(t, base, pid, r.Addr)
		if float64(b.commands-a.commands) < settledOps*DefaultBeat.Seconds() {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("the beat still cycles after three minutes (%d Redis commands in the last beat)", b.commands-a.commands)
			break
		}
	}
	t.Logf("the beat settled %s after the appends' two beats", time.Since(settled).Round(time.Second))
	if _, err := testserver.Do(context.Background(), r.Addr, "CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	at, atOps := idle()
	if stats, err := testserver.Do(context.Background(), r.Addr, "INFO", "commandstats"); err == nil {
		var calls []string
		for _, l := range strings.Split(stats, "\n") {
			if name, rest, ok := strings.Cut(strings.TrimSpace(l), ":calls="); ok {
				calls = append(calls, strings.TrimPrefix(name, "cmdstat_")+" "+strings.SplitN(rest, ",", 2)[0])
			}
		}
		t.Logf("Redis commands of the quiet window (and the measures' own): %s", strings.Join(calls, ", "))
	}
	t.Logf("serve at start (1 stream): %d MB resident, %d goroutines, %d Redis clients, idle %.0f Redis commands/s",
		start.rssKB/1024, start.goroutines, start.clients, startOps)
	t.Logf("serve with %d archived streams (made in %s, then %d appends at random): %d MB resident, %d goroutines, %d Redis clients, idle %.0f Redis commands/s",
		n, madeIn.Round(time.Millisecond), len(picks), at.rssKB/1024, at.goroutines, at.clients, atOps)
	t.Logf("per stream: %.1f KB resident, %.3f goroutines, %.4f Redis clients, %.3f idle Redis commands/s",
		float64(at.rssKB-start.rssKB)/float64(n), float64(at.goroutines-start.goroutines)/float64(n),
		float64(at.clients-start.clients)/float64(n), (atOps-startOps)/float64(n))
	t.Logf("the last beat: %s", strings.Join(at.beat, "; "))
	if idleCycles > 0 {
		t.Logf("idle beat: %.0f archive cycles in the quiet window of %s (%.0f cycles/s; each stream cycled every %.1fs), %.1f Redis commands per idle cycle",
			idleCycles, 2*DefaultBeat, idleCycles/(2*DefaultBeat).Seconds(), float64(n+1)/(idleCycles/(2*DefaultBeat).Seconds()),
			atOps*(2*DefaultBeat).Seconds()/idleCycles)
	}
	if at.goroutines > scaleMaxGoroutines {
		t.Errorf("serve has %d goroutines with %d archived streams, want at most %d", at.goroutines, n, scaleMaxGoroutines)
	}
	if atOps > scaleMaxIdleOps {
		t.Errorf("Redis ran %.0f commands/s for an idle serve with %d archived streams, want at most %d", atOps, n, scaleMaxIdleOps)
	}
	if at.clients > scaleMaxClients {
		t.Errorf("Redis has %d clients with %d archived streams on one serve, want at most %d", at.clients, n, scaleMaxClients)
	}
}
