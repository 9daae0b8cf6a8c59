package graft

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/internal/bench"
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
	benchOpens(b, dir, Options{}, "v")
}

// benchOpens opens the store in dir with opts, loads volume vol and closes
// it, b.N times.
func benchOpens(b *testing.B, dir string, opts Options, vol string) {
	ctx := context.Background()
	for b.Loop() {
		s, err := Open(ctx, dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Volume(ctx, volName(vol)); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// pebbleTunings are the Pebble options TestPebbleTunings can compare with
// the store's own ("base"). None of them is kept: docs/BENCHMARKS.md
// (## graft) has the figures.
var pebbleTunings = map[string]func(*pebble.Options){
	"base": nil,
	// Value separation: pages ≥ 1 KiB go to blob files, so compactions
	// move references instead of 4 KiB values.
	"vsep": func(o *pebble.Options) {
		o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
			return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 1024, MaxBlobReferenceDepth: 10,
				RewriteMinimumAge: 5 * time.Minute, TargetGarbageRatio: 0.2}
		}
	},
	"l0":    func(o *pebble.Options) { o.L0CompactionThreshold, o.L0StopWritesThreshold = 8, 24 },
	"stop4": func(o *pebble.Options) { o.MemTableStopWritesThreshold = 4 },
	"mem64": func(o *pebble.Options) { o.MemTableSize, o.MemTableStopWritesThreshold = 64<<20, 4 },
	"bps0":  func(o *pebble.Options) { o.BytesPerSync = 1 << 30 }, // no incremental sstable syncs
}

// tunedCommitRate is synced 1-page commits/s of writers goroutines, each on
// its own volume of a fresh store in dir opened with tune, for d.
func tunedCommitRate(t *testing.T, dir string, tune func(*pebble.Options), writers int, d time.Duration) float64 {
	t.Helper()
	tunePebble = tune
	defer func() { tunePebble = nil }()
	ctx := context.Background()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	defer s.Close()
	page := make([]byte, 4096)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(page)
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for k := range writers {
		v := mustCreate(t, s, fmt.Sprintf("bench.%d", k))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Since(start) < d; n++ {
				txn := v.Begin()
				_ = txn.Put(uint64(n%100_000), page)
				if _, err := txn.Commit(ctx, Synced); err != nil {
					t.Error(err)
					return
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// TestPebbleTunings compares Pebble tunings on synced 1-page commits, one
// writer and 16 writers on 16 volumes, round by round (the order rotated
// each round) so that every tuning sees the same minutes of a noisy disk:
//
//	GRAFT_TUNINGS=base,vsep,l0 GRAFT_TUNING_ROUNDS=5 go test -run='^TestPebbleTunings$' -v ./graft/
func TestPebbleTunings(t *testing.T) {
	names := os.Getenv("GRAFT_TUNINGS")
	if names == "" {
		t.Skip("a measurement: set GRAFT_TUNINGS=base,vsep,l0,stop4,mem64,bps0")
	}
	rounds, _ := strconv.Atoi(os.Getenv("GRAFT_TUNING_ROUNDS"))
	rounds = max(rounds, 1)
	const d = 2 * time.Second
	list := strings.Split(names, ",")
	for _, n := range list {
		if _, ok := pebbleTunings[n]; !ok {
			t.Fatalf("no tuning %q", n)
		}
	}
	root := t.TempDir()
	one, many := map[string][]float64{}, map[string][]float64{}
	var fsync []float64
	for r := range rounds {
		f, err := bench.RawFsyncRate(context.Background(), root, d/2)
		if err != nil {
			t.Fatal(err)
		}
		fsync = append(fsync, f)
		for k := range list {
			n := list[(k+r)%len(list)]
			o := tunedCommitRate(t, filepath.Join(root, fmt.Sprintf("one-%s-%d", n, r)), pebbleTunings[n], 1, d)
			m := tunedCommitRate(t, filepath.Join(root, fmt.Sprintf("many-%s-%d", n, r)), pebbleTunings[n], 16, d)
			one[n], many[n] = append(one[n], o), append(many[n], m)
			t.Logf("round %d %-6s 1 writer %6.0f/s, 16 writers %6.0f/s: %.2f×", r, n, o, m, m/o)
		}
	}
	t.Logf("raw fsync %.0f/s (median of %v)", bench.Median(fsync), fsync)
	for _, n := range list {
		t.Logf("%-6s 1 writer %6.0f/s, 16 writers %6.0f/s (medians): %.2f×", n, bench.Median(one[n]), bench.Median(many[n]), bench.Median(many[n])/bench.Median(one[n]))
	}
}

// BenchmarkOpenReadOnly is what every CLI read pays: a read-only Open of a
// closed store with 8 volumes, one volume loaded, Close.
func BenchmarkOpenReadOnly(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 8 {
		v := mustCreate(b, s, fmt.Sprintf("v%d", i))
		commitPages(b, v, map[uint64][]byte{1: []byte("x")}, nil)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	benchOpens(b, dir, Options{ReadOnly: true}, "v0")
}
