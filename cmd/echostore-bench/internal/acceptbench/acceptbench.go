// Package acceptbench measures the accept tier's outbox beside the seed's
// published figures and the seed's algorithm (a whole-snapshot baseline),
// through accept's exported API: record throughput at each loss window K,
// the disk's raw fsync rate, recovery time and replay rate (Bench, what
// `bench champ` and `bench all` run), and the push time of sync enqueues
// (TimedReplicator). docs/ACCEPT.md shows its tables.
package acceptbench

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/names"
)

// The seed's published figures (§1 of the two-tier seed, N = 20,000):
// records per second by checkpoint_every K, recovery time by intent count,
// and replay rate.

// seedRecPerSec is the seed's rate at K, or 0 if it published none.
func seedRecPerSec(k int) float64 {
	switch k {
	case 100:
		return 5225
	case 1000:
		return 36889
	case 10000:
		return 102529
	}
	return 0
}

// seedRecoveryMs is the seed's recovery time for n intents, if published.
func seedRecoveryMs(n int) (float64, bool) {
	switch n {
	case 1000:
		return 3.63, true
	case 10000:
		return 8.53, true
	case 50000:
		return 33.59, true
	}
	return 0, false
}

const seedReplayPerSec = 1044659.0

// BenchOptions configure Bench. Zero fields take the defaults shown.
type BenchOptions struct {
	N             int   // intents per throughput run (20,000)
	Ks            []int // loss windows to measure (100, 1,000, 10,000)
	PayloadSize   int   // bytes per payload (64)
	RecoverySizes []int // intent counts for recovery (1,000, 10,000, 50,000)
	Runs          int   // repetitions of the seed's algorithm and the fsync rate; medians are reported (3)
	// RecordRuns is the repetitions of the outbox's own record rate at each
	// K, whole and half blocks (9): a run of 20,000 records takes about
	// 10 ms and two fsyncs at K = 10,000, so that a median of three
	// followed one slow fsync of a disk shared with other work.
	RecordRuns int
	// OpenRuns is the repetitions of each recovery and replay measurement
	// (21): one accept.Open takes milliseconds, so a median of a few would
	// follow the noise of the minute on a shared machine.
	OpenRuns int
	FsyncOps int // appends in the raw fsync loop (200)
	// Progress, if set, is called before each measurement.
	Progress func(what string)
}

// Results are Bench's medians.
type Results struct {
	N            int                `json:"n"`              // intents per throughput run
	Runs         int                `json:"runs"`           // runs per median of the seed's algorithm and the fsync rate
	RecordRuns   int                `json:"record_runs"`    // runs per median of the outbox's record rates
	OpenRuns     int                `json:"open_runs"`      // runs per recovery and replay median
	FsyncPerSec  float64            `json:"fsync_per_sec"`  // 4 KiB append + fsync
	Throughput   []ThroughputResult `json:"throughput"`     // one per K
	Recovery     []RecoveryResult   `json:"recovery"`       // one per size
	ReplayPerSec float64            `json:"replay_per_sec"` // log records replayed per second by accept.Open
	// ReplayAfterWorkPerSec is the replay rate of the Opens timed before the
	// preparation's garbage is collected (RecoveryTimes).
	ReplayAfterWorkPerSec float64 `json:"replay_after_work_per_sec"`
	SeedReplay            float64 `json:"seed_replay_per_sec"` // the seed's replay rate
	ReplayVsSeed          float64 `json:"replay_vs_seed"`      // ReplayPerSec / SeedReplay
	ReplayIntents         int     `json:"replay_intents"`      // log records replayed
}

// ThroughputResult is the record rate at one K: the Outbox (whole blocks
// of K, and half blocks so that one fills while the other is fsynced), the
// seed's algorithm measured in the same run, and the seed's figure.
type ThroughputResult struct {
	K                 int     `json:"k"`                          // the loss window
	RecPerSec         float64 `json:"rec_per_sec"`                // BlockMax = K (the default)
	HalfBlockPerSec   float64 `json:"half_block_rec_per_sec"`     // BlockMax = K/2
	WholeSnapPerSec   float64 `json:"whole_snapshot_rec_per_sec"` // the seed's algorithm, this run
	SeedRecPerSec     float64 `json:"seed_rec_per_sec"`           // the seed's published figure (0: none)
	VsSeed            float64 `json:"vs_seed"`                    // RecPerSec / SeedRecPerSec
	VsWholeSnapshot   float64 `json:"vs_whole_snapshot"`          // RecPerSec / WholeSnapPerSec
	FsyncsPerRecord   float64 `json:"fsyncs_per_record"`          // outbox blocks per intent
	BlocksPerRun      float64 `json:"blocks_per_run"`             // outbox blocks (one fsync each) per run
	WholeSnapMBPerRun float64 `json:"whole_snapshot_mb_per_run"`  // bytes the baseline wrote per run
	// AppendOnlyPerSec is the append-only reference at this K
	// (AppendOnlyRate), one run before each of the outbox's; VsAppendOnly
	// is RecPerSec / AppendOnlyPerSec.
	AppendOnlyPerSec float64 `json:"append_only_rec_per_sec"`
	VsAppendOnly     float64 `json:"vs_append_only"`
}

// RecoveryResult is the time accept.Open takes for a directory holding Intents
// intents: from a snapshot (after Compact) and from the log alone.
type RecoveryResult struct {
	Intents    int     `json:"intents"`     // live intents recovered
	SnapshotMs float64 `json:"snapshot_ms"` // accept.Open with everything in one snapshot
	LogMs      float64 `json:"log_ms"`      // accept.Open with everything in log blocks of 1,000
	// SnapshotAfterWorkMs and LogAfterWorkMs are the same Opens timed right
	// after the preparation, before its garbage is collected (RecoveryTimes),
	// as SnapshotMs and LogMs were measured until 2026-11-30.
	SnapshotAfterWorkMs float64 `json:"snapshot_after_work_ms"`
	LogAfterWorkMs      float64 `json:"log_after_work_ms"`
	SeedMs              float64 `json:"seed_ms"`   // the seed's published figure
	VsSeed              float64 `json:"vs_seed"`   // SeedMs / SnapshotMs
	HaveSeedData        bool    `json:"have_seed"` // whether the seed published this size
}

func (b BenchOptions) withDefaults() BenchOptions {
	if b.N == 0 {
		b.N = 20000
	}
	if len(b.Ks) == 0 {
		b.Ks = []int{100, 1000, 10000}
	}
	if b.PayloadSize == 0 {
		b.PayloadSize = 64
	}
	if len(b.RecoverySizes) == 0 {
		b.RecoverySizes = []int{1000, 10000, 50000}
	}
	if b.Runs == 0 {
		b.Runs = 3
	}
	if b.RecordRuns == 0 {
		b.RecordRuns = 9
	}
	if b.OpenRuns == 0 {
		b.OpenRuns = 21
	}
	if b.FsyncOps == 0 {
		b.FsyncOps = 200
	}
	if b.Progress == nil {
		b.Progress = func(string) {}
	}
	return b
}

// Steps is the number of times Bench calls Progress with these options.
func (b BenchOptions) Steps() int {
	b = b.withDefaults()
	return 1 + len(b.Ks)*(b.RecordRuns+b.Runs) + len(b.RecoverySizes) + 1
}

// Bench measures the accept tier in dir (created if needed; it leaves
// nothing behind): record throughput at each K beside the seed's
// algorithm, the raw fsync rate of the disk, recovery time and replay
// rate. It is what `echostore bench champ` runs.
func Bench(ctx context.Context, dir string, opts BenchOptions) (Results, error) {
	opts = opts.withDefaults()
	res := Results{N: opts.N, Runs: opts.Runs, RecordRuns: opts.RecordRuns, OpenRuns: opts.OpenRuns, SeedReplay: seedReplayPerSec}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("acceptbench: %w", err)
	}
	scratch, err := os.MkdirTemp(dir, "accept-bench-")
	if err != nil {
		return res, fmt.Errorf("acceptbench: %w", err)
	}
	defer os.RemoveAll(scratch)
	run := 0
	fresh := func() string {
		run++
		return filepath.Join(scratch, strconv.Itoa(run))
	}
	payload := make([]byte, opts.PayloadSize)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}

	opts.Progress("raw fsync rate")
	var fs []float64
	for range opts.Runs {
		r, err := FsyncRate(ctx, fresh(), opts.FsyncOps)
		if err != nil {
			return res, err
		}
		fs = append(fs, r)
	}
	res.FsyncPerSec = median(fs)

	for _, k := range opts.Ks {
		tr := ThroughputResult{K: k, SeedRecPerSec: seedRecPerSec(k)}
		var ours, half, whole, blocks, mb, ref []float64
		// The outbox's runs and the baseline's are interleaved.
		for i := range max(opts.RecordRuns, opts.Runs) {
			if i < opts.RecordRuns {
				opts.Progress(fmt.Sprintf("record %d intents, K=%d", opts.N, k))
				a, err := AppendOnlyRate(ctx, fresh(), k, opts.N, payload)
				if err != nil {
					return res, err
				}
				ref = append(ref, a)
				r, st, err := RecordRate(ctx, fresh(), accept.Options{K: k}, opts.N, payload)
				if err != nil {
					return res, err
				}
				ours = append(ours, r)
				blocks = append(blocks, float64(st.Blocks))
				r, _, err = RecordRate(ctx, fresh(), accept.Options{K: k, BlockMax: max(1, k/2)}, opts.N, payload)
				if err != nil {
					return res, err
				}
				half = append(half, r)
			}
			if i < opts.Runs {
				opts.Progress(fmt.Sprintf("whole-snapshot baseline, K=%d", k))
				r, bytes, err := WholeSnapshotRate(ctx, fresh(), k, opts.N, payload)
				if err != nil {
					return res, err
				}
				whole = append(whole, r)
				mb = append(mb, float64(bytes)/1e6)
			}
		}
		tr.RecPerSec, tr.HalfBlockPerSec, tr.WholeSnapPerSec = median(ours), median(half), median(whole)
		tr.BlocksPerRun, tr.WholeSnapMBPerRun = median(blocks), median(mb)
		tr.FsyncsPerRecord = tr.BlocksPerRun / float64(opts.N)
		if tr.SeedRecPerSec > 0 {
			tr.VsSeed = tr.RecPerSec / tr.SeedRecPerSec
		}
		tr.VsWholeSnapshot = tr.RecPerSec / tr.WholeSnapPerSec
		tr.AppendOnlyPerSec = median(ref)
		tr.VsAppendOnly = tr.RecPerSec / tr.AppendOnlyPerSec
		res.Throughput = append(res.Throughput, tr)
	}

	for _, n := range opts.RecoverySizes {
		opts.Progress(fmt.Sprintf("recovery of %d intents", n))
		rr := RecoveryResult{Intents: n}
		rr.SeedMs, rr.HaveSeedData = seedRecoveryMs(n)
		var snap, logOnly, snapWork, logWork []float64
		for range opts.OpenRuns {
			d, w, _, err := RecoveryTimes(ctx, fresh(), n, payload, true)
			if err != nil {
				return res, err
			}
			snap, snapWork = append(snap, ms(d)), append(snapWork, ms(w))
			d, w, _, err = RecoveryTimes(ctx, fresh(), n, payload, false)
			if err != nil {
				return res, err
			}
			logOnly, logWork = append(logOnly, ms(d)), append(logWork, ms(w))
		}
		rr.SnapshotMs, rr.LogMs = median(snap), median(logOnly)
		rr.SnapshotAfterWorkMs, rr.LogAfterWorkMs = median(snapWork), median(logWork)
		if rr.HaveSeedData {
			rr.VsSeed = rr.SeedMs / rr.SnapshotMs
		}
		res.Recovery = append(res.Recovery, rr)
	}

	n := slices.Max(opts.RecoverySizes)
	opts.Progress(fmt.Sprintf("replay of %d log records", n))
	var rates, workRates []float64
	for range opts.OpenRuns {
		d, w, replayed, err := RecoveryTimes(ctx, fresh(), n, payload, false)
		if err != nil {
			return res, err
		}
		rates = append(rates, float64(replayed)/d.Seconds())
		workRates = append(workRates, float64(replayed)/w.Seconds())
	}
	res.ReplayIntents = n
	res.ReplayPerSec = median(rates)
	res.ReplayAfterWorkPerSec = median(workRates)
	res.ReplayVsSeed = res.ReplayPerSec / seedReplayPerSec
	return res, nil
}

// RecordRate opens a fresh Outbox in dir, records n intents with ids 1..n
// and the given payload, flushes, and returns intents per second (accept.Open and
// Close excluded) and the Outbox's stats. The garbage of whatever ran
// before (the previous run, the seed's algorithm, which allocates a
// snapshot every K records) is collected before the timed part, so that
// the run pays for its own collections only. dir is removed afterwards.
func RecordRate(ctx context.Context, dir string, opts accept.Options, n int, payload []byte) (float64, accept.Stats, error) {
	defer os.RemoveAll(dir)
	o, err := accept.Open(ctx, dir, opts)
	if err != nil {
		return 0, accept.Stats{}, err
	}
	runtime.GC()
	start := time.Now()
	for i := 1; i <= n; i++ {
		if err := o.Record(ctx, accept.Intent{ID: brand.ID(i), Queue: jobsQueue(), Payload: payload}); err != nil {
			o.Close(ctx)
			return 0, accept.Stats{}, err
		}
	}
	if err := o.Flush(ctx); err != nil {
		o.Close(ctx)
		return 0, accept.Stats{}, err
	}
	d := time.Since(start)
	st := o.Stats()
	if err := o.Close(ctx); err != nil {
		return 0, st, err
	}
	return float64(n) / d.Seconds(), st, nil
}

// WholeSnapshotRate runs the seed's algorithm, the baseline: intents go
// into an in-memory map, and every k records (and at the end) the whole
// map is written as a snapshot file: encode, write a temporary file, fsync,
// rename over the previous one. It returns intents per second and the
// bytes written. As in RecordRate, earlier garbage is collected before
// the timed part. dir is removed afterwards.
func WholeSnapshotRate(ctx context.Context, dir string, k, n int, payload []byte) (float64, int64, error) {
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	runtime.GC()
	live := map[brand.ID]accept.Intent{}
	var written int64
	var seq uint64
	checkpoint := func() error {
		seq++
		all := make([]accept.Intent, 0, len(live))
		for _, in := range live {
			all = append(all, in)
		}
		slices.SortFunc(all, func(a, b accept.Intent) int { return cmp.Compare(a.ID, b.ID) })
		data := accept.EncodeSnapshot(seq, all)
		written += int64(len(data))
		return writeFileAtomic(dir, "checkpoint", data)
	}
	start := time.Now()
	for i := 1; i <= n; i++ {
		p := append([]byte(nil), payload...)
		live[brand.ID(i)] = accept.Intent{ID: brand.ID(i), Queue: jobsQueue(), Payload: p}
		if i%k == 0 {
			if err := ctx.Err(); err != nil {
				return 0, written, err
			}
			if err := checkpoint(); err != nil {
				return 0, written, fmt.Errorf("acceptbench: whole-snapshot baseline: %w", err)
			}
		}
	}
	if n%k != 0 {
		if err := checkpoint(); err != nil {
			return 0, written, fmt.Errorf("acceptbench: whole-snapshot baseline: %w", err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), written, nil
}

// FsyncRate appends 4 KiB and fsyncs, ops times, to a file in dir and
// returns fsyncs per second. dir is removed afterwards.
func FsyncRate(ctx context.Context, dir string, ops int) (float64, error) {
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	start := time.Now()
	for range ops {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	return float64(ops) / time.Since(start).Seconds(), nil
}

// RecoveryTime prepares an outbox in dir holding n intents (written in
// blocks of 1,000; compacted to a snapshot if compact) and returns how
// long accept.Open takes to recover it and how many log records it replayed. As
// a restarted process recovers with a heap of its own, the garbage of the
// preparation is collected first. dir is removed afterwards.
func RecoveryTime(ctx context.Context, dir string, n int, payload []byte, compact bool) (time.Duration, int, error) {
	fresh, _, replayed, err := RecoveryTimes(ctx, dir, n, payload, compact)
	return fresh, replayed, err
}

// RecoveryTimes is RecoveryTime measured twice on the same directory:
// first right after the preparation, with its garbage (and whatever the
// process did before) still to be collected, as Bench measured until
// 2026-11-30 ("after work"); then, after a garbage collection, as a
// restarted process recovers ("fresh"). It returns both and the log
// records replayed.
func RecoveryTimes(ctx context.Context, dir string, n int, payload []byte, compact bool) (fresh, afterWork time.Duration, replayed int, err error) {
	defer os.RemoveAll(dir)
	// A large CompactMin keeps background compaction out of the log-only case.
	opts := accept.Options{K: 1000, CompactMin: 1 << 30}
	o, err := accept.Open(ctx, dir, opts)
	if err != nil {
		return 0, 0, 0, err
	}
	for i := 1; i <= n; i++ {
		if err := o.Record(ctx, accept.Intent{ID: brand.ID(i), Queue: jobsQueue(), Payload: payload}); err != nil {
			o.Close(ctx)
			return 0, 0, 0, err
		}
	}
	if compact {
		err = o.Compact(ctx)
	}
	if cerr := o.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, 0, err
	}
	open := func() (time.Duration, int, error) {
		start := time.Now()
		o, err := accept.Open(ctx, dir, opts)
		d := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		st := o.Stats()
		if err := o.Close(ctx); err != nil {
			return 0, 0, err
		}
		if st.Live != n {
			return 0, 0, fmt.Errorf("acceptbench: recovered %d intents, want %d: %w", st.Live, n, accept.ErrCorrupt)
		}
		return d, st.Replayed, nil
	}
	if afterWork, _, err = open(); err != nil {
		return 0, 0, 0, err
	}
	runtime.GC()
	if fresh, replayed, err = open(); err != nil {
		return 0, 0, 0, err
	}
	return fresh, afterWork, replayed, nil
}

// writeFileAtomic writes data to dir/name as the outbox writes a snapshot:
// through a temporary file, write, fsync, rename, fsync the directory.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteText writes r as the tables docs/ACCEPT.md shows.
func (r Results) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "raw fsync (4 KiB append + fsync): %.0f/s; N = %d intents per run; medians of %d runs of the outbox, %d of the baseline (recovery and replay: %d)\n\n", r.FsyncPerSec, r.N, r.RecordRuns, r.Runs, r.OpenRuns)
	fmt.Fprintf(&b, "| K | outbox rec/s | × seed | whole-snapshot baseline rec/s | outbox ÷ baseline | half blocks rec/s | blocks (fsyncs) per run | baseline MB written per run | seed rec/s | append-only reference rec/s | outbox ÷ reference |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range r.Throughput {
		fmt.Fprintf(&b, "| %d | %.0f | %.1f× | %.0f | %.1f× | %.0f | %.0f | %.1f | %.0f | %.0f | %.2f× |\n",
			t.K, t.RecPerSec, t.VsSeed, t.WholeSnapPerSec, t.VsWholeSnapshot, t.HalfBlockPerSec, t.BlocksPerRun, t.WholeSnapMBPerRun, t.SeedRecPerSec, t.AppendOnlyPerSec, t.VsAppendOnly)
	}
	fmt.Fprintf(&b, "\n| intents | recovery from a snapshot, ms | × faster than seed | recovery from the log alone, ms | seed ms | snapshot / log, timed before collecting the preparation's garbage, ms |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|\n")
	for _, rr := range r.Recovery {
		seed, vs := "–", "–"
		if rr.HaveSeedData {
			seed, vs = fmt.Sprintf("%.2f", rr.SeedMs), fmt.Sprintf("%.1f×", rr.VsSeed)
		}
		fmt.Fprintf(&b, "| %d | %.2f | %s | %.2f | %s | %.2f / %.2f |\n", rr.Intents, rr.SnapshotMs, vs, rr.LogMs, seed, rr.SnapshotAfterWorkMs, rr.LogAfterWorkMs)
	}
	fmt.Fprintf(&b, "\nreplay: %.0f log records/s over %d intents (seed %.0f/s, %.1f×); %.0f/s timed before collecting the preparation's garbage\n", r.ReplayPerSec, r.ReplayIntents, r.SeedReplay, r.ReplayVsSeed, r.ReplayAfterWorkPerSec)
	_, err := io.WriteString(w, b.String())
	return err
}

// jobsQueue returns the queue the benchmarks record on, "jobs".
func jobsQueue() names.Queue {
	q, err := names.ParseQueue("jobs")
	if err != nil {
		panic(err) // a valid literal
	}
	return q
}

// AppendOnlyRate is the outbox's floor at loss window k, the append-only
// reference: n records (ids 1..n, queue "jobs", the given payload) encoded
// as the outbox's log blocks (docs/ACCEPT.md's format: one frame of a
// length, a CRC-32C and the body per block) in the calling goroutine, and
// every k records (and at the end) the block written to a log segment
// with one write and one fsync. No map, no second goroutine, no payload
// copy: what the outbox does beyond this is its own cost. It returns
// records per second; as in RecordRate, earlier garbage is collected
// before the timed part, and dir is removed afterwards.
func AppendOnlyRate(ctx context.Context, dir string, k, n int, payload []byte) (float64, error) {
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	queue := jobsQueue().String()
	recLen := 1 + 8 + 1 + len(queue) + 4 + len(payload)
	buf := make([]byte, 0, 8+12+min(k, n)*recLen)
	var seq uint64
	write := func(count int) error {
		seq++
		body := buf[8:]
		binary.LittleEndian.PutUint32(buf[0:], uint32(len(body)))
		binary.LittleEndian.PutUint64(body[0:], seq)
		binary.LittleEndian.PutUint32(body[8:], uint32(count))
		crc := crc32.Update(crc32.Checksum(buf[:4], durable.Castagnoli), durable.Castagnoli, body)
		binary.LittleEndian.PutUint32(buf[4:], crc)
		if _, err := f.Write(buf); err != nil {
			return err
		}
		return f.Sync()
	}
	runtime.GC()
	start := time.Now()
	count := 0
	buf = buf[:8+12]
	for i := 1; i <= n; i++ {
		buf = append(buf, 1)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(i))
		buf = append(buf, byte(len(queue)))
		buf = append(buf, queue...)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
		buf = append(buf, payload...)
		count++
		if count == k || i == n {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if err := write(count); err != nil {
				return 0, fmt.Errorf("acceptbench: append-only reference: %w", err)
			}
			count, buf = 0, buf[:8+12]
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
