package graft

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// The benchmarks run on the disk under the test's temp dir. The figures in
// docs/BENCHMARKS.md come from `echostore bench graft`, which also measures
// the raw fsync rate beside them; these are for profiling and benchstat.

func benchStore(b *testing.B, opts Options) *Store {
	b.Helper()
	s, err := Open(context.Background(), b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchCommits(b *testing.B, writers, pagesPer int, d Durability) {
	ctx := context.Background()
	s := benchStore(b, benchOpts)
	page := make([]byte, 4096)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(page) // incompressible, like the CLI suite's
	vols := make([]*Volume, writers)
	for k := range vols {
		vols[k] = mustCreate(b, s, fmt.Sprintf("bench.%d", k))
	}
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				txn := v.Begin()
				for p := 0; p < pagesPer; p++ {
					if err := txn.Put(uint64((int(n)*pagesPer+p)%100_000), page); err != nil {
						b.Error(err)
						return
					}
				}
				if _, err := txn.Commit(ctx, d); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*pagesPer)/b.Elapsed().Seconds(), "pages/s")
}

var benchOpts = Options{}

func BenchmarkCommitSynced1Page(b *testing.B)          { benchCommits(b, 1, 1, Synced) }
func BenchmarkCommitSynced1Page16Volumes(b *testing.B) { benchCommits(b, 16, 1, Synced) }
func BenchmarkCommitSynced64Pages(b *testing.B)        { benchCommits(b, 1, 64, Synced) }
func BenchmarkCommitUnsynced1Page(b *testing.B)        { benchCommits(b, 1, 1, Unsynced) }

// benchVolume is a volume of n 150-byte pages, loaded unsynced and
// compacted; it returns a snapshot at its head.
func benchVolume(b *testing.B, n int) *Snapshot {
	b.Helper()
	ctx := context.Background()
	s := benchStore(b, Options{})
	v := mustCreate(b, s, "bench.read")
	page := make([]byte, 150)
	for i := 0; i < n; i += 10_000 {
		txn := v.Begin()
		for p := i; p < min(i+10_000, n); p++ {
			page[0], page[1] = byte(p), byte(p>>8)
			if err := txn.Put(uint64(p), page); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := txn.Commit(ctx, Unsynced); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Compact(ctx); err != nil {
		b.Fatal(err)
	}
	snap, err := v.Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = snap.Close() })
	return snap
}

func BenchmarkGet(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	snap := benchVolume(b, n)
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		if _, err := snap.Get(ctx, uint64(k*7919)%n); err != nil {
			b.Fatal(err)
		}
	}
}

func benchScan(b *testing.B, reverse bool) {
	const n = 100_000
	ctx := context.Background()
	snap := benchVolume(b, n)
	scan := snap.Scan
	if reverse {
		scan = snap.ScanReverse
	}
	b.ResetTimer()
	pages := 0
	for b.Loop() {
		it := scan(ctx, 0, n-1)
		for it.Next() {
			pages++
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
}

func BenchmarkScanForward(b *testing.B) { benchScan(b, false) }
func BenchmarkScanReverse(b *testing.B) { benchScan(b, true) }

func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	v := mustCreate(b, s, "v")
	commitPages(b, v, map[uint64][]byte{1: []byte("x")}, nil)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := Open(ctx, dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Volume(ctx, "v"); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
