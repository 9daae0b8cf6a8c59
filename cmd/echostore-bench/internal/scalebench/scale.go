// Package scalebench measures one serve with many archived streams: its
// resident memory and goroutines, Redis's connections, and the Redis
// commands per second of its beat with every stream idle (the figures of
// server's TestScaleArchivedStreams and docs/BENCHMARKS.md, "Ten thousand
// archived streams on one serve"). serve runs in a child process (the
// caller's Serve), so its resident memory is its own.
package scalebench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/server"
)

// Goals of one serve with 10,000 archived streams (issue 19).
const (
	GoalRSSMB     = 500
	GoalClients   = 64
	GoalIdleOps   = 100
	DefaultCount  = 10000
	settleTimeout = 3 * time.Minute
	settledOps    = 200
)

// Config is one run.
type Config struct {
	// Streams is the number of archived streams (default DefaultCount).
	Streams int
	// Dir holds the run's data dir (default os.TempDir()); removed after.
	Dir string
	// Serve returns the command of the child serve process over data dir
	// and Redis redisURL with room for n streams; it prints "A <addr>
	// <pid>" on its stdout once it serves (ServeChild).
	Serve func(data, redisURL string, n int) *exec.Cmd
}

// Report is what a run measured.
type Report struct {
	Streams       int     `json:"streams"`
	RSSStartMB    float64 `json:"rss_start_mb"` // serve with one stream
	RSSMB         float64 `json:"rss_mb"`
	Goroutines    int     `json:"goroutines"`
	RedisClients  int     `json:"redis_clients"`
	IdleOps       float64 `json:"idle_redis_ops_per_s"` // total_commands_processed, scripts' calls included
	IdleCycles    float64 `json:"idle_cycles"`          // archive cycles in the quiet window
	MadeSeconds   float64 `json:"made_s"`               // one append to each new stream
	SettleSeconds float64 `json:"settle_s"`             // from the appends' end to a beat's time with under 200 Redis commands/s
	Beat          string  `json:"beat"`
}

// ServeChild runs serve on data and redisURL with room for n streams (the
// default beat, defaults {keep: 10}), prints "A <addr> <pid>" on stdout and
// serves until ctx ends.
func ServeChild(ctx context.Context, data, redisURL string, n int, stdout io.Writer) error {
	s, err := server.Open(ctx, server.Config{
		Listen: "127.0.0.1:0", Redis: redisURL, Data: data, MaxStreams: n + 10, MetricsPublic: true,
		Defaults: server.StreamConfig{Keep: 10},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "A %s %d\n", s.Addr(), os.Getpid())
	return s.Run(ctx)
}

type figures struct {
	rssKB, goroutines, clients int
	commands                   int64
	cycles                     float64
}

// Run measures cfg on a private redis-server.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Streams <= 0 {
		cfg.Streams = DefaultCount
	}
	if cfg.Serve == nil {
		return nil, errors.New("bench scale: Config.Serve is required")
	}
	dir, err := os.MkdirTemp(cfg.Dir, "echostore-bench-scale-")
	if err != nil {
		return nil, fmt.Errorf("bench scale: %w", err)
	}
	defer os.RemoveAll(dir)
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		return nil, fmt.Errorf("bench scale: a private redis-server: %w", err)
	}
	defer r.Stop()
	cmd := cfg.Serve(dir, r.URL, cfg.Streams)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench scale: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench scale: start serve: %w", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("bench scale: serve did not start: %w", err)
	}
	var addr string
	var pid int
	if _, err := fmt.Sscanf(line, "A %s %d", &addr, &pid); err != nil {
		return nil, fmt.Errorf("bench scale: serve said %q: %w", line, err)
	}
	m := &meter{base: "http://" + addr, pid: pid, redis: r.Addr,
		client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	rep := &Report{Streams: cfg.Streams, Beat: server.DefaultBeat.String()}
	n := cfg.Streams
	if err := m.post(ctx, "/v1/streams/scale/s0", `{"fields":{"n":"0"}}`); err != nil {
		return nil, err
	}
	start, _, _, err := m.idle(ctx)
	if err != nil {
		return nil, err
	}
	rep.RSSStartMB = float64(start.rssKB) / 1024
	made := time.Now()
	if err := m.parallel(ctx, n, func(i int) error {
		return m.post(ctx, fmt.Sprintf("/v1/streams/scale/s%d", i+1), `{"fields":{"n":"0"}}`)
	}); err != nil {
		return nil, err
	}
	rep.MadeSeconds = time.Since(made).Seconds()
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	picks := make([]int, 4*n)
	for i := range picks {
		picks[i] = 1 + rng.IntN(n)
	}
	if err := m.parallel(ctx, len(picks), func(i int) error {
		return m.post(ctx, fmt.Sprintf("/v1/streams/scale/s%d", picks[i]), fmt.Sprintf(`{"fields":{"n":"%d"}}`, i+1))
	}); err != nil {
		return nil, err
	}
	settled := time.Now()
	if err := sleep(ctx, 2*server.DefaultBeat); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(settleTimeout); time.Now().Before(deadline); {
		a, err := m.measure(ctx)
		if err != nil {
			return nil, err
		}
		if err := sleep(ctx, server.DefaultBeat); err != nil {
			return nil, err
		}
		b, err := m.measure(ctx)
		if err != nil {
			return nil, err
		}
		// Below settledOps Redis commands a second no beat is cycling
		// (a beat's cycles are counted at its end).
		if float64(b.commands-a.commands) < settledOps*server.DefaultBeat.Seconds() {
			break
		}
	}
	rep.SettleSeconds = time.Since(settled).Seconds()
	at, ops, cycles, err := m.idle(ctx)
	if err != nil {
		return nil, err
	}
	rep.RSSMB, rep.Goroutines, rep.RedisClients = float64(at.rssKB)/1024, at.goroutines, at.clients
	rep.IdleOps, rep.IdleCycles = ops, cycles
	return rep, nil
}

// meter talks to the child serve and its Redis.
type meter struct {
	base, redis string
	pid         int
	client      *http.Client
}

func (m *meter) post(ctx context.Context, path, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("bench scale: POST %s: %w", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench scale: POST %s: %d %s", path, resp.StatusCode, b)
	}
	return nil
}

// parallel runs f(0…count-1) on 8 workers and returns the first error.
func (m *meter) parallel(ctx context.Context, count int, f func(i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range count {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return cmpErr(first, ctx.Err())
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// idle measures a quiet window of two beats: the figures at its end, the
// Redis commands per second and the archive cycles in it.
func (m *meter) idle(ctx context.Context) (figures, float64, float64, error) {
	a, err := m.measure(ctx)
	if err != nil {
		return figures{}, 0, 0, err
	}
	window := 2 * server.DefaultBeat
	if err := sleep(ctx, window); err != nil {
		return figures{}, 0, 0, err
	}
	b, err := m.measure(ctx)
	if err != nil {
		return figures{}, 0, 0, err
	}
	// measure's own INFO is one command.
	return b, float64(b.commands-a.commands-1) / window.Seconds(), b.cycles - a.cycles, nil
}

func (m *meter) measure(ctx context.Context) (figures, error) {
	var f figures
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.pid))
	if err != nil {
		return f, fmt.Errorf("bench scale: %w", err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f.rssKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/metrics", nil)
	if err != nil {
		return f, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return f, fmt.Errorf("bench scale: GET /metrics: %w", err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			f.goroutines, _ = strconv.Atoi(v)
		}
		if strings.HasPrefix(l, "echostore_cycles_total{") && strings.Contains(l, `kind="archive"`) {
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				c, _ := strconv.ParseFloat(l[i+1:], 64)
				f.cycles += c
			}
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	info, err := testserver.Do(ctx, m.redis, "INFO")
	if err != nil {
		return f, fmt.Errorf("bench scale: INFO: %w", err)
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
	return f, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
