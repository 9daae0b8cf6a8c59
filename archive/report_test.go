package archive

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
)

// The reports below are measurements, not checks of speed: they run only
// with ARCHIVE_BENCH=1 and print their figures (docs/BENCHMARKS.md).

func benchGate(t *testing.T) {
	if os.Getenv("ARCHIVE_BENCH") != "1" {
		t.Skip("a report: run with ARCHIVE_BENCH=1 (docs/BENCHMARKS.md)")
	}
}

// usedMemory returns INFO memory's used_memory of the server at addr.
func usedMemory(ctx context.Context, t *testing.T, addr string) int64 {
	t.Helper()
	info, err := testserver.Do(ctx, addr, "INFO", "memory")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory: %q", info)
	return 0
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func benchBatch(n int) [][]mq.Field {
	batch := make([][]mq.Field, n)
	for i := range batch {
		batch[i] = []mq.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: strconv.Itoa(i)}}
	}
	return batch
}

// TestMemoryFlat appends a window's worth of records and runs a cycle with
// Keep = window, round after round, until the history is 100 windows, on a
// redis-server of its own, and samples used_memory after each round: Redis
// holds the window, the archive holds the history. It fails if used_memory
// grows, from the first round that trims on, by more than one window of
// live records takes.
func TestMemoryFlat(t *testing.T) {
	benchGate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	const window, rounds = 1000, 100
	dir := t.TempDir()
	e := newEnv(t, r.URL, Options{Chunk: window})
	e.st.Close()
	st, err := graft.Open(ctx, dir, graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	if e.a, err = New(Options{Store: st, Live: e.live, Logger: quietLog(), Chunk: window}); err != nil {
		t.Fatal(err)
	}
	batch := benchBatch(window)
	var mem []int64
	var afterFirst int64
	for i := range rounds {
		if _, err := e.live.AppendBatch(ctx, e.ref(), batch); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			afterFirst = usedMemory(ctx, t, r.Addr)
		}
		if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: window}); err != nil {
			t.Fatal(err)
		}
		mem = append(mem, usedMemory(ctx, t, r.Addr))
	}
	// One more round with no cycle: what a window of live records costs.
	if _, err := e.live.AppendBatch(ctx, e.ref(), batch); err != nil {
		t.Fatal(err)
	}
	perWindow := usedMemory(ctx, t, r.Addr) - mem[len(mem)-1]
	vol := e.volume(ctx)
	fr, err := Frontier(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	first, last := mem[0], mem[len(mem)-1]
	t.Logf("window %d records, %d rounds: history %d records (%d archived + %d live)",
		window, rounds, window*rounds, fr.Pages, window*rounds-int(fr.Pages))
	t.Logf("used_memory after round 1: %d bytes (before its cycle %d), after round %d: %d, min %d, max %d; one window live costs %d bytes",
		first, afterFirst, rounds, last, slices.Min(mem), slices.Max(mem), perWindow)
	var trend []string
	for _, i := range []int{1, 2, 5, 10, 25, 50, 75, 100} {
		trend = append(trend, fmt.Sprintf("%d:%d", i, mem[i-1]))
	}
	t.Logf("used_memory by round: %s", strings.Join(trend, " "))
	t.Logf("archive: %d pages, graft dir %d bytes (%.0f bytes/record)", fr.Pages, dirBytes(t, dir), float64(dirBytes(t, dir))/float64(fr.Pages))
	// Round 1 folds nothing (the stream is one window); round 2 is the
	// first fold and trim, which also loads their scripts: the baseline.
	if grew := slices.Max(mem[1:]) - mem[1]; grew > perWindow {
		t.Fatalf("used_memory grew by %d bytes from round 2 to %d, more than a window of live records (%d)", grew, rounds, perWindow)
	}
}

// countingWriter counts the lines written to it.
type countingWriter struct{ lines int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// TestWholeProcessRead builds bin/echostore, fills one stream with N
// records (ARCHIVE_BENCH_N, default 100,000; a comma list runs several)
// and archives 99% of it, fills a second with the same N records kept live,
// and times whole processes (start-up included, output to a line counter):
// `echostore stream read Q archived` (merge-read) beside
// `echostore stream read Q live --live-only` (XRANGE pages), 5 runs each,
// interleaved; it prints the medians and their ratio.
func TestWholeProcessRead(t *testing.T) {
	benchGate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sizes := []int{100_000}
	if s := os.Getenv("ARCHIVE_BENCH_N"); s != "" {
		sizes = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 100 {
				t.Fatalf("ARCHIVE_BENCH_N=%q: want record counts ≥ 100", s)
			}
			sizes = append(sizes, n)
		}
	}
	bin := filepath.Join(t.TempDir(), "echostore")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/echostore").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) { wholeProcessRead(ctx, t, bin, n) })
	}
}

func wholeProcessRead(ctx context.Context, t *testing.T, bin string, n int) {
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	data := t.TempDir()
	live := connect(t, r.URL)
	st, err := graft.Open(ctx, filepath.Join(data, "graft"), graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Store: st, Live: live, Logger: quietLog(), Chunk: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	batch := benchBatch(1000)
	for _, s := range []string{"archived", "live"} {
		for left := n; left > 0; left -= len(batch) {
			if _, err := live.AppendBatch(ctx, mustRef(t, "bench", s), batch[:min(left, len(batch))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := a.Cycle(ctx, mustRef(t, "bench", "archived"), Window{Keep: int64(n / 100)})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	runOnce := func(args ...string) time.Duration {
		w := &countingWriter{}
		cmd := exec.CommandContext(ctx, bin, append([]string{"--redis", r.URL, "--data", data}, args...)...)
		cmd.Stdout = w
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		d := time.Since(start)
		if err != nil || w.lines != n {
			t.Fatalf("%v: %v, %d lines, want %d\n%s", args, err, w.lines, n, stderr.Bytes())
		}
		return d
	}
	var merge, xrange []time.Duration
	for range 5 {
		merge = append(merge, runOnce("stream", "read", "bench", "archived"))
		xrange = append(xrange, runOnce("stream", "read", "bench", "live", "--live-only"))
	}
	slices.Sort(merge)
	slices.Sort(xrange)
	m, x := merge[len(merge)/2], xrange[len(xrange)/2]
	t.Logf("N=%d (%d archived, %d live): whole-process merge-read median %v (min %v, max %v), live XRANGE read median %v (min %v, max %v), ratio %.2f",
		n, res.Folded, n-int(res.Folded), m.Round(time.Millisecond), merge[0].Round(time.Millisecond), merge[len(merge)-1].Round(time.Millisecond),
		x.Round(time.Millisecond), xrange[0].Round(time.Millisecond), xrange[len(xrange)-1].Round(time.Millisecond), float64(m)/float64(x))
}
