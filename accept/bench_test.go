package accept

import (
	"context"
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
