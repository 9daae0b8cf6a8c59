package archive

import (
	"context"
	"fmt"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// BenchmarkFold folds chunks of 1000 records of 3 small fields (synced
// commits) and reports records/s.
func BenchmarkFold(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, b.TempDir())
	v, err := st.CreateVolume(ctx, volName("archive.bench.fold"))
	if err != nil {
		b.Fatal(err)
	}
	const chunk = 1000
	next := brand.ID(1)
	slice := make([]mq.Record, chunk)
	b.ResetTimer()
	for b.Loop() {
		for i := range slice {
			slice[i] = mq.Record{ID: next.XID(), Fields: []mq.Field{
				{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: fmt.Sprint(uint64(next))}}}
			next++
		}
		if _, err := Fold(ctx, v, slice); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*chunk)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkRead100k reads 100,000 records: merge-read of a stream 99%
// archived (1,000 live), and the same number read live from Redis with
// XRANGE (mq.Client.Read) from a stream that keeps them all.
func BenchmarkRead100k(b *testing.B) {
	ctx := context.Background()
	const n = 100_000
	e := newEnv(b, servers.Redis(b).URL, Options{Chunk: 10_000})
	fill := func(s string) {
		batch := make([][]mq.Field, 1000)
		for i := range batch {
			batch[i] = []mq.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: fmt.Sprint(i)}}
		}
		for range n / len(batch) {
			if _, err := e.live.AppendBatch(ctx, mustRef(b, e.q, s), batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	fill(e.s)
	fill("live")
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: n / 100}); err != nil {
		b.Fatal(err)
	}
	count := func(b *testing.B, seq func(func(mq.Record, error) bool)) {
		got := 0
		for _, err := range seq {
			if err != nil {
				b.Fatal(err)
			}
			got++
		}
		if got != n {
			b.Fatalf("read %d records, want %d", got, n)
		}
	}
	b.Run("merge-99pct-archived", func(b *testing.B) {
		src := e.source(ctx)
		for b.Loop() {
			count(b, MergeRead(ctx, src, All()))
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("live-xrange", func(b *testing.B) {
		for b.Loop() {
			count(b, e.live.Read(ctx, mustRef(b, e.q, "live"), xid.Min, xid.Max, 0, false))
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
	})
}
