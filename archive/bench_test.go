package archive

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
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

// BenchmarkMergeReadArchive merge-reads a volume of N archived records (3
// small fields, folded in chunks of 10,000 as a cycle folds them) with no
// live tier: the archive part of a merge-read, which is 99% of the records
// of the bench all suite's depths. N is ARCHIVE_BENCH_READ_N (default
// 100,000; e.g. 1000000 for the suite's deepest default depth), and
// ARCHIVE_BENCH_CACHE the block cache in bytes (default graft's); with
// ARCHIVE_BENCH_COMPACT set, the store is compacted before the reads.
func BenchmarkMergeReadArchive(b *testing.B) {
	ctx := context.Background()
	n := 100_000
	if s := os.Getenv("ARCHIVE_BENCH_READ_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("ARCHIVE_BENCH_READ_N=%q: want a positive count", s)
		}
	}
	var cache int64
	if s := os.Getenv("ARCHIVE_BENCH_CACHE"); s != "" {
		var err error
		if cache, err = strconv.ParseInt(s, 10, 64); err != nil {
			b.Fatalf("ARCHIVE_BENCH_CACHE=%q: want bytes", s)
		}
	}
	st, err := graft.Open(ctx, b.TempDir(), graft.Options{CacheSize: cache})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ref := mustRef(b, "bench", "events")
	v, err := st.CreateVolume(ctx, ref.Volume())
	if err != nil {
		b.Fatal(err)
	}
	const chunk = 10_000
	slice := make([]mq.Record, 0, chunk)
	for i := range n {
		id := brand.ID(i + 1)
		slice = append(slice, mq.Record{ID: id.XID(), Fields: []mq.Field{
			{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: strconv.Itoa(i)}}})
		if len(slice) == chunk || i == n-1 {
			if _, err := Fold(ctx, v, slice); err != nil {
				b.Fatal(err)
			}
			slice = slice[:0]
		}
	}
	if os.Getenv("ARCHIVE_BENCH_COMPACT") != "" {
		if err := st.Compact(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d records: %d bytes on disk", n, st.DiskUsage())
	src := Source{Ref: ref, Volume: v}
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for b.Loop() {
		got := 0
		for _, err := range MergeRead(ctx, src, All()) {
			if err != nil {
				b.Fatal(err)
			}
			got++
		}
		if got != n {
			b.Fatalf("read %d records, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
	// CPU time of the process (user and system) per record: on a shared
	// machine a steadier figure than the wall clock's.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N*n), "cpu-ns/record")
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
