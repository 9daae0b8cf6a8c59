package accept

import (
	"context"
	"runtime"
	"testing"

	"github.com/echostore/echostore/brand"
)

// The outbox's benchmarks against the seed's table are in
// internal/bench/acceptbench; this is the cost of Record alone.

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
// earlier garbage collected before each Open:
//
//	go test -run='^$' -bench=Replay -benchtime=50x ./accept/
func BenchmarkReplay(b *testing.B) {
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
	if err := o.Close(ctx); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		o, err := Open(ctx, dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if o.Len() != n {
			b.Fatalf("%d live, want %d", o.Len(), n)
		}
		if err := o.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "intents/s")
}
