package acceptbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/names"
)

// Benchmarks against the seed's table, each iteration one whole run:
//
//	go test -run='^$' -bench=. -benchtime=3x ./cmd/echostore-bench/internal/acceptbench/
//
// rec/s is the metric to compare; ns/op is the time of one run.

var benchPayload = make([]byte, 64)

func BenchmarkRecord(b *testing.B) {
	const n = 20000
	for _, k := range []int{100, 1000, 10000} {
		for _, half := range []bool{false, true} {
			name := fmt.Sprintf("K=%d", k)
			opts := accept.Options{K: k}
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
		if tr.RecPerSec <= 0 || tr.WholeSnapPerSec <= 0 || tr.HalfBlockPerSec <= 0 || tr.AppendOnlyPerSec <= 0 {
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
//	ACCEPT_BENCH=1 go test -run='^TestBenchReport$' -v -timeout=30m ./cmd/echostore-bench/internal/acceptbench/
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

// TestTimedReplicator: every Push through it is timed once and passed on;
// Take returns the durations and forgets them.
func TestTimedReplicator(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	st, err := remote.Open(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "remote")), file.Driver{})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := graft.Open(ctx, filepath.Join(dir, "graft"), graft.Options{Remote: st})
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	vol, err := gs.CreateVolume(ctx, volName("timed"))
	if err != nil {
		t.Fatal(err)
	}
	var r accept.Replicator = &TimedReplicator{Replicator: graft.Replication{}}
	for i := range 3 {
		txn := vol.Begin()
		if err := txn.Put(uint64(i), []byte("page")); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx, graft.Unsynced); err != nil {
			t.Fatal(err)
		}
		sp, err := r.Push(ctx, vol)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Remote != uint64(i+1) {
			t.Fatalf("push %d: remote LSN %d, want %d", i, sp.Remote, i+1)
		}
	}
	tr := r.(*TimedReplicator)
	if d := tr.Take(); len(d) != 3 || d[0] > d[2] {
		t.Fatalf("Take after 3 pushes: %v, want 3 sorted durations", d)
	}
	if d := tr.Take(); len(d) != 0 {
		t.Fatalf("a second Take: %v, want none", d)
	}
}

// volName returns volume name s checked; it panics if s is not a valid
// volume name (test names are made valid).
func volName(s string) names.Volume {
	v, err := names.ParseVolume(s)
	if err != nil {
		panic(err)
	}
	return v
}
