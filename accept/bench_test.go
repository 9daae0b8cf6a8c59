package accept

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/echostore/echostore/brand"
)

// Benchmarks against the seed's table, each iteration one whole run:
//
//	go test -run='^$' -bench=. -benchtime=3x ./accept/
//
// rec/s is the metric to compare; ns/op is the time of one run.

var benchPayload = make([]byte, 64)

func BenchmarkRecord(b *testing.B) {
	const n = 20000
	for _, k := range []int{100, 1000, 10000} {
		for _, half := range []bool{false, true} {
			name := fmt.Sprintf("K=%d", k)
			opts := Options{K: k}
			if half {
				name += "/half-blocks"
				opts.BlockMax = k / 2
			}
			b.Run(name, func(b *testing.B) {
				var rates []float64
				i := 0
				for b.Loop() {
					i++
					r, _, err := RecordRate(context.Background(), filepath.Join(b.TempDir(), strconv.Itoa(i)), opts, n, benchPayload)
					if err != nil {
						b.Fatal(err)
					}
					rates = append(rates, r)
				}
				b.ReportMetric(median(rates), "rec/s")
				b.ReportMetric(median(rates)/seedRecPerSec(k), "x-seed")
			})
		}
	}
}

// BenchmarkWholeSnapshot is the seed's algorithm: the whole map written
// and fsynced every K records.
func BenchmarkWholeSnapshot(b *testing.B) {
	const n = 20000
	for _, k := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			var rates []float64
			for b.Loop() {
				r, _, err := WholeSnapshotRate(context.Background(), filepath.Join(b.TempDir(), "w"), k, n, benchPayload)
				if err != nil {
					b.Fatal(err)
				}
				rates = append(rates, r)
			}
			b.ReportMetric(median(rates), "rec/s")
			b.ReportMetric(median(rates)/seedRecPerSec(k), "x-seed")
		})
	}
}

func BenchmarkFsync(b *testing.B) {
	var rates []float64
	for b.Loop() {
		r, err := FsyncRate(context.Background(), filepath.Join(b.TempDir(), "f"), 200)
		if err != nil {
			b.Fatal(err)
		}
		rates = append(rates, r)
	}
	b.ReportMetric(median(rates), "fsync/s")
}

func BenchmarkRecover(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		for _, compact := range []bool{true, false} {
			name := fmt.Sprintf("n=%d/log", n)
			if compact {
				name = fmt.Sprintf("n=%d/snapshot", n)
			}
			b.Run(name, func(b *testing.B) {
				var times, rates []float64
				for b.Loop() {
					d, replayed, err := RecoveryTime(context.Background(), filepath.Join(b.TempDir(), "r"), n, benchPayload, compact)
					if err != nil {
						b.Fatal(err)
					}
					times = append(times, ms(d))
					if replayed > 0 {
						rates = append(rates, float64(replayed)/d.Seconds())
					}
				}
				b.ReportMetric(median(times), "ms/recovery")
				if !compact {
					b.ReportMetric(median(rates), "replay/s")
				}
			})
		}
	}
}

// TestBench runs Bench at a tiny size: the harness works and every figure
// is filled in.
func TestBench(t *testing.T) {
	res, err := Bench(context.Background(), t.TempDir(), BenchOptions{N: 300, Ks: []int{10, 100}, RecoverySizes: []int{50, 200}, Runs: 1, FsyncOps: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.FsyncPerSec <= 0 || len(res.Throughput) != 2 || len(res.Recovery) != 2 || res.ReplayPerSec <= 0 {
		t.Fatalf("incomplete results: %+v", res)
	}
	for _, tr := range res.Throughput {
		if tr.RecPerSec <= 0 || tr.WholeSnapPerSec <= 0 || tr.HalfBlockPerSec <= 0 {
			t.Fatalf("incomplete throughput: %+v", tr)
		}
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil || !strings.Contains(b.String(), "| 100 |") {
		t.Fatalf("WriteText: %v\n%s", err, b.String())
	}
}

// TestBenchReport prints the figures docs/ACCEPT.md records (the full
// sizes, 5 runs each, paired in one process):
//
//	ACCEPT_BENCH=1 go test -run='^TestBenchReport$' -v -timeout=30m ./accept/
func TestBenchReport(t *testing.T) {
	if os.Getenv("ACCEPT_BENCH") != "1" {
		t.Skip("set ACCEPT_BENCH=1 to run the full benchmark")
	}
	res, err := Bench(context.Background(), t.TempDir(), BenchOptions{Runs: 5, Progress: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteText(os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRecordInHeap is the cost of Record alone: K is large enough and
// the time bound off, so nothing is written until the run ends.
func BenchmarkRecordInHeap(b *testing.B) {
	ctx := context.Background()
	o, err := Open(ctx, b.TempDir(), Options{K: 1 << 30, BlockMax: 1 << 30, FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	id := brand.ID(0)
	for b.Loop() {
		id++
		if err := o.Record(ctx, Intent{ID: id, Queue: "jobs", Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := o.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
