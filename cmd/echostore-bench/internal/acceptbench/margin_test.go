package acceptbench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
)

// TestAppendOnlyReport prints the outbox's rate at K = 1,000 beside the
// append-only reference, interleaved, and their ratio per pair:
//
//	ACCEPT_MARGIN=31 go test -run='^TestAppendOnlyReport$' -v ./cmd/echostore-bench/internal/acceptbench/
func TestAppendOnlyReport(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("ACCEPT_MARGIN"))
	if runs < 1 {
		t.Skip("set ACCEPT_MARGIN to the number of pairs to run")
	}
	ctx := context.Background()
	payload := make([]byte, 100)
	var ours, ref, ratio, oursCPU, refCPU []float64
	for i := range runs {
		dir := filepath.Join(t.TempDir(), strconv.Itoa(i))
		runtime.GC()
		c0 := processCPU()
		a, err := AppendOnlyRate(ctx, dir+"a", 1000, 20000, payload)
		if err != nil {
			t.Fatal(err)
		}
		c1 := processCPU()
		o, cpu, err := recordTimed(ctx, dir+"o", 1000, 20000, payload)
		if err != nil {
			t.Fatal(err)
		}
		ours, ref, ratio = append(ours, o), append(ref, a), append(ratio, o/a)
		refCPU, oursCPU = append(refCPU, float64(c1-c0)/20000), append(oursCPU, float64(cpu)/20000)
	}
	t.Logf("K=1000, process CPU (user+system, every thread) per record of the timed part: outbox %.0f ns, append-only %.0f ns", median(oursCPU), median(refCPU))
	t.Logf("K=1000, %d pairs: outbox %.0f rec/s, append-only %.0f rec/s, ratio of medians %.2f, median of the pairs' ratios %.2f",
		runs, median(ours), median(ref), median(ours)/median(ref), median(ratio))
}

// processCPU is the user and system time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// recordTimed is RecordRate at loss window k that also returns the
// process CPU time of its timed part (the records and the Flush).
func recordTimed(ctx context.Context, dir string, k, n int, payload []byte) (float64, time.Duration, error) {
	defer os.RemoveAll(dir)
	o, err := accept.Open(ctx, dir, accept.Options{K: k})
	if err != nil {
		return 0, 0, err
	}
	defer o.Close(ctx)
	runtime.GC()
	c0, start := processCPU(), time.Now()
	for i := 1; i <= n; i++ {
		if err := o.Record(ctx, accept.Intent{ID: brand.ID(i), Queue: jobsQueue(), Payload: payload}); err != nil {
			return 0, 0, err
		}
	}
	if err := o.Flush(ctx); err != nil {
		return 0, 0, err
	}
	d, cpu := time.Since(start), processCPU()-c0
	return float64(n) / d.Seconds(), cpu, nil
}
