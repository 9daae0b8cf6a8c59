package accept

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
)

// The outbox's benchmarks against the seed's table are in
// cmd/echostore-bench/internal/acceptbench; this is the cost of Record alone.

var benchPayload = make([]byte, 64)

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
		if err := o.Record(ctx, Intent{ID: id, Queue: qn("jobs"), Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := o.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReplay is Open of a log of 50,000 accepted intents of 64 bytes
// in blocks of 1,000 (no snapshot), as bench all's replay figure, the
// earlier garbage collected before each Open. Beside the rate over all
// Opens it reports the median Open's wall time and process CPU time
// (every thread: the collector's work during Open included), which a
// machine shared with other work moves less:
//
//	go test -run='^$' -bench='^BenchmarkReplay$' -benchtime=40x -benchmem ./accept/
func BenchmarkReplay(b *testing.B) {
	benchOpen(b, false)
}

// BenchmarkRecoverSnapshot is BenchmarkReplay with the 50,000 intents in
// one snapshot (after Compact) instead of the log, as bench all's
// "recovery of 50,000 from a snapshot":
//
//	go test -run='^$' -bench='^BenchmarkRecoverSnapshot$' -benchtime=40x -benchmem ./accept/
func BenchmarkRecoverSnapshot(b *testing.B) {
	benchOpen(b, true)
}

func benchOpen(b *testing.B, compact bool) {
	ctx := context.Background()
	const n = 50000
	dir := b.TempDir()
	opts := Options{K: 1000, CompactMin: 1 << 30}
	o, err := Open(ctx, dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if err := o.Record(ctx, Intent{ID: brand.ID(i), Queue: qn("jobs"), Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
	if compact {
		if err := o.Compact(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := o.Close(ctx); err != nil {
		b.Fatal(err)
	}
	var wall, cpu []float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		t0, c0 := time.Now(), processCPU()
		o, err := Open(ctx, dir, opts)
		c1, t1 := processCPU(), time.Now()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		wall, cpu = append(wall, float64(t1.Sub(t0).Microseconds())/1e3), append(cpu, float64((c1-c0).Microseconds())/1e3)
		if o.Len() != n {
			b.Fatalf("%d live, want %d", o.Len(), n)
		}
		if st := o.Stats(); compact && st.Replayed != 0 {
			b.Fatalf("%d records replayed after the snapshot, want 0", st.Replayed)
		}
		if err := o.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "intents/s")
	slices.Sort(wall)
	slices.Sort(cpu)
	b.ReportMetric(wall[len(wall)/2], "ms/open")
	b.ReportMetric(cpu[len(cpu)/2], "cpu-ms/open")
}
