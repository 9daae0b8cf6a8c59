// Package graftbench is the `echostore-bench graft` suite: the local engine's
// commit rates beside the disk's raw fsync rate measured in the same run,
// group commit, bulk pages, point reads at a million pages, range scans and
// Open latency.
package graftbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/names"
)

// Config sizes the suite.
type Config struct {
	Dir        string        // parent of the suite's temporary directory
	Pages      int           // pages in the read volume (the documented run: 1,000,000)
	Runs       int           // repeats of every figure; the report shows the median
	Duration   time.Duration // length of each timed rate run
	Committers int           // concurrent committers for the group-commit figure
	Gets       int           // point reads timed per run
	Command    string        // the command line, for the report
	Progress   *bench.Progress
}

// Steps is how many Progress steps Run takes for cfg.
func Steps(cfg Config) int { return 6*cfg.Runs + 2 }

// Figures and their names in the report.
const (
	RowFsync     = "raw fsync (4 KiB append + fdatasync)"
	RowSynced1   = "synced 1-page commits, 1 writer"
	RowSyncedN   = "synced 1-page commits, %d writers on %d volumes"
	RowPerSync   = "commits per WAL fsync, %d writers"
	RowSync1     = "mean WAL fsync, 1 writer"
	RowSyncN     = "mean WAL fsync, %d writers"
	RowSyncBusy  = "WAL time in fsync, %d writers"
	RowPages64   = "pages in synced 64-page commits"
	RowLoad      = "bulk load (unsynced 10,000-page commits)"
	RowGetP50    = "Get p50 at %s pages"
	RowGetP99    = "Get p99 at %s pages"
	RowScan      = "range scan, forward, 150-byte pages"
	RowScanRev   = "range scan, reverse, 150-byte pages"
	RowOpenEmpty = "Open, empty store"
	RowOpenFull  = "Open, %s-page store"
	RowOpenRO    = "Open read-only, %s-page store"
)

const commitPageSize = 4096

// Run measures the suite in a fresh directory under cfg.Dir, removed after.
func Run(ctx context.Context, cfg Config) (*bench.Report, error) {
	root, err := os.MkdirTemp(cfg.Dir, "echostore-bench-graft-")
	if err != nil {
		return nil, fmt.Errorf("bench graft: %w", err)
	}
	defer os.RemoveAll(root)
	r := bench.NewReport("graft: local engine", cfg.Command)
	step := func(what string) { cfg.Progress.Step(what) }

	// 1. The disk's own fsync rate, synced single-writer commits and group
	// commit, interleaved run by run so that the ratios compare the same
	// minutes of a shared, noisy disk.
	rowN := fmt.Sprintf(RowSyncedN, cfg.Committers, cfg.Committers)
	var fsync, single, many, perSync, sync1, syncN, busyN []float64
	for k := 0; k < cfg.Runs; k++ {
		step("raw fsync")
		f, err := bench.RawFsyncRate(ctx, root, cfg.Duration)
		if err != nil {
			return nil, err
		}
		step("synced commits, 1 writer")
		one, err := commitRate(ctx, filepath.Join(root, fmt.Sprintf("one-%d", k)), 1, 1, cfg.Duration)
		if err != nil {
			return nil, err
		}
		step(fmt.Sprintf("synced commits, %d writers", cfg.Committers))
		n, err := commitRate(ctx, filepath.Join(root, fmt.Sprintf("many-%d", k)), cfg.Committers, 1, cfg.Duration)
		if err != nil {
			return nil, err
		}
		fsync, single, many = append(fsync, f), append(single, one.rate), append(many, n.rate)
		perSync, busyN = append(perSync, n.perSync), append(busyN, 100*n.syncShare)
		sync1, syncN = append(sync1, us(one.meanSync)), append(syncN, us(n.meanSync))
	}
	r.Add(RowFsync, "ops/s", fsync, "same directory, runs interleaved with the commit runs")
	r.Add(RowSynced1, "commits/s", single, "4 KiB page, Synced, fresh store each run")
	r.Compare(RowSynced1, RowFsync, 0.5)
	r.Add(rowN, "commits/s", many, "4 KiB page each, Synced; Pebble's commit pipeline shares the fsyncs")
	r.Compare(rowN, RowSynced1, 4)
	r.Add(fmt.Sprintf(RowPerSync, cfg.Committers), "commits", perSync, "group commit at work: commits that shared one WAL fdatasync")
	r.Add(RowSync1, "µs", sync1, "Pebble's WAL fdatasync as timed inside the run")
	r.Add(fmt.Sprintf(RowSyncN, cfg.Committers), "µs", syncN, "larger syncs, beside flush and compaction writes")
	r.Add(fmt.Sprintf(RowSyncBusy, cfg.Committers), "%", busyN, "share of the run the WAL spent in fdatasync")

	// 3. Bulk pages in 64-page commits.
	bulk, err := bench.Repeat(cfg.Runs, func(k int) (float64, error) {
		step("64-page commits")
		st, err := commitRate(ctx, filepath.Join(root, fmt.Sprintf("bulk-%d", k)), 1, 64, cfg.Duration)
		return st.rate * 64, err
	})
	if err != nil {
		return nil, err
	}
	r.Add(RowPages64, "pages/s", bulk, "4 KiB pages, one writer, Synced")

	// 4. A volume of cfg.Pages 150-byte pages: load, Open, Get, scans.
	big := filepath.Join(root, "big")
	step("loading pages")
	loadRate, err := load(ctx, big, cfg.Pages, cfg.Progress)
	if err != nil {
		return nil, err
	}
	r.Add(RowLoad, "pages/s", []float64{loadRate}, "one run; includes Pebble flushes, not the final compaction")

	n := humanCount(cfg.Pages)
	var p50s, p99s, fwd, rev []float64
	for k := 0; k < cfg.Runs; k++ {
		step("Get latency")
		p50, p99, err := getLatency(ctx, big, cfg.Pages, cfg.Gets, int64(k))
		if err != nil {
			return nil, err
		}
		p50s, p99s = append(p50s, us(p50)), append(p99s, us(p99))
		step("range scans")
		f, rv, err := scanRates(ctx, big)
		if err != nil {
			return nil, err
		}
		fwd, rev = append(fwd, f), append(rev, rv)
	}
	gets := fmt.Sprintf("%d random pages a run, the store reopened (cold-ish block cache)", cfg.Gets)
	r.Add(fmt.Sprintf(RowGetP50, n), "µs", p50s, gets)
	r.Add(fmt.Sprintf(RowGetP99, n), "µs", p99s, "")
	r.Add(RowScan, "pages/s", fwd, "whole volume, head snapshot, after one untimed pass")
	r.Goal(RowScan, 1e6, false)
	r.Add(RowScanRev, "pages/s", rev, "")

	// 5. Open latency.
	step("Open latency")
	empty := filepath.Join(root, "empty")
	if _, err := openLatency(ctx, empty, 1, graft.Options{}); err != nil { // create it
		return nil, err
	}
	for _, o := range []struct {
		row, dir string
		opts     graft.Options
		note     string
	}{
		{RowOpenEmpty, empty, graft.Options{}, "read-write: Pebble writes and fsyncs a new WAL"},
		{fmt.Sprintf(RowOpenFull, n), big, graft.Options{}, ""},
		{fmt.Sprintf(RowOpenRO, n), big, graft.Options{ReadOnly: true}, "Options.ReadOnly, for CLI reads: no writes, no fsyncs"},
	} {
		ms, err := openLatency(ctx, o.dir, 7, o.opts)
		if err != nil {
			return nil, err
		}
		r.Add(o.row, "ms", ms, o.note)
	}
	cfg.Progress.Done()
	r.Finish()
	return r, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// commitStats is what one timed commit run measured.
type commitStats struct {
	rate      float64       // commits/s
	perSync   float64       // commits per WAL fsync
	meanSync  time.Duration // mean WAL fsync duration
	syncShare float64       // fraction of the run spent in WAL fsyncs
}

// commitRate runs writers goroutines, each committing pagesPer 4 KiB pages
// Synced to its own volume in a fresh store, for d.
func commitRate(ctx context.Context, dir string, writers, pagesPer int, d time.Duration) (commitStats, error) {
	var wal walTimer
	s, err := graft.Open(ctx, dir, graft.Options{FS: wal.fs()})
	if err != nil {
		return commitStats{}, err
	}
	defer os.RemoveAll(dir)
	defer s.Close()
	vols := make([]*graft.Volume, writers)
	for k := range vols {
		if vols[k], err = s.CreateVolume(ctx, benchVolume(fmt.Sprintf("bench.%d", k))); err != nil {
			return commitStats{}, err
		}
	}
	page := make([]byte, commitPageSize)
	fill(page, 1)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  []error
	)
	syncs0, nanos0 := wal.syncs.Load(), wal.nanos.Load()
	start := time.Now()
	deadline := start.Add(d)
	for _, v := range vols {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				txn := v.Begin()
				for p := 0; p < pagesPer; p++ {
					if err := txn.Put(uint64((n*pagesPer+p)%100_000), page); err != nil {
						txn.Discard()
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
				}
				if _, err := txn.Commit(ctx, graft.Synced); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return commitStats{}, err
	}
	syncs, nanos := wal.syncs.Load()-syncs0, wal.nanos.Load()-nanos0
	st := commitStats{rate: float64(total) / elapsed.Seconds()}
	if syncs > 0 {
		st.perSync = float64(total) / float64(syncs)
		st.meanSync = time.Duration(nanos / syncs)
		st.syncShare = float64(nanos) / float64(elapsed.Nanoseconds())
	}
	return st, nil
}

// load writes pages 150-byte pages in unsynced 10,000-page commits and
// closes the store cleanly; it returns pages/s.
func load(ctx context.Context, dir string, pages int, prog *bench.Progress) (float64, error) {
	s, err := graft.Open(ctx, dir, graft.Options{MemTableSize: 64 << 20})
	if err != nil {
		return 0, err
	}
	v, err := s.CreateVolume(ctx, benchVolume("bench.big"))
	if err != nil {
		_ = s.Close()
		return 0, err
	}
	const per = 10_000
	page := make([]byte, 150)
	start := time.Now()
	for i := 0; i < pages; i += per {
		txn := v.Begin()
		for p := i; p < min(i+per, pages); p++ {
			fill(page, uint64(p))
			if err := txn.Put(uint64(p), page); err != nil {
				txn.Discard()
				_ = s.Close()
				return 0, err
			}
		}
		if _, err := txn.Commit(ctx, graft.Unsynced); err != nil {
			_ = s.Close()
			return 0, err
		}
		if i%(20*per) == 0 {
			prog.Describe(fmt.Sprintf("loading pages (%d%%)", 100*i/pages))
		}
	}
	rate := float64(pages) / time.Since(start).Seconds()
	if err := s.Compact(ctx); err != nil { // settle the LSM so reads measure reads
		_ = s.Close()
		return 0, err
	}
	return rate, s.Close()
}

// getLatency reopens the store and times gets random Gets at the head.
func getLatency(ctx context.Context, dir string, pages, gets int, seed int64) (p50, p99 time.Duration, err error) {
	snap, done, err := openHead(ctx, dir)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	rng := rand.New(rand.NewPCG(uint64(seed), 42))
	lat := make([]time.Duration, gets)
	for k := range lat {
		i := uint64(rng.IntN(pages))
		t0 := time.Now()
		b, err := snap.Get(ctx, i)
		lat[k] = time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		if len(b) != 150 {
			return 0, 0, fmt.Errorf("bench graft: page %d has %d bytes", i, len(b))
		}
	}
	slices.Sort(lat)
	return bench.Percentile(lat, 50), bench.Percentile(lat, 99), nil
}

// scanRates scans the whole volume forward and in reverse; pages/s each.
func scanRates(ctx context.Context, dir string) (fwd, rev float64, err error) {
	snap, done, err := openHead(ctx, dir)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	want := snap.Volume().Info().Pages
	// The first pass warms the block cache and the OS page cache; the timed
	// passes follow.
	for _, reverse := range []bool{false, false, true} {
		start := time.Now()
		scan := snap.Scan
		if reverse {
			scan = snap.ScanReverse
		}
		it := scan(ctx, 0, graft.ArchiveBase-1)
		var n uint64
		var sum int
		for it.Next() {
			n++
			sum += len(it.Value())
		}
		if err := it.Close(); err != nil {
			return 0, 0, err
		}
		if n != want || sum != int(want)*150 {
			return 0, 0, fmt.Errorf("bench graft: scan saw %d pages (%d bytes), want %d", n, sum, want)
		}
		rate := float64(n) / time.Since(start).Seconds()
		if reverse {
			rev = rate
		} else {
			fwd = rate
		}
	}
	return fwd, rev, nil
}

// openHead opens the store in dir and a snapshot at the head of the bench
// volume; done closes both.
func openHead(ctx context.Context, dir string) (snap *graft.Snapshot, done func(), err error) {
	s, err := graft.Open(ctx, dir, graft.Options{})
	if err != nil {
		return nil, nil, err
	}
	v, err := s.Volume(ctx, benchVolume("bench.big"))
	if err == nil {
		snap, err = v.Snapshot(ctx)
	}
	if err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	return snap, func() { _ = snap.Close(); _ = s.Close() }, nil
}

// openLatency opens and closes the store in dir n times; each open in ms.
func openLatency(ctx context.Context, dir string, n int, opts graft.Options) ([]float64, error) {
	out := make([]float64, 0, n)
	for k := 0; k < n; k++ {
		t0 := time.Now()
		s, err := graft.Open(ctx, dir, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, float64(time.Since(t0).Microseconds())/1e3)
		if err := s.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fill writes deterministic, incompressible bytes derived from seed.
func fill(b []byte, seed uint64) {
	var s [32]byte
	for k := 0; k < 8; k++ {
		s[k] = byte(seed >> (8 * k))
	}
	_, _ = rand.NewChaCha8(s).Read(b)
}

// benchVolume returns the checked name of a benchmark volume; the names are
// made here, valid by construction.
func benchVolume(name string) names.Volume {
	v, err := names.ParseVolume(name)
	if err != nil {
		panic(err)
	}
	return v
}
