package all

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// ArchiveReport is fold and merge-read throughput against history depth,
// beside Redis XRANGE of the same records kept live.
type ArchiveReport struct {
	Fields string `json:"fields"` // what a record holds
	Runs   int    `json:"runs"`
	// CacheSize is the archive store's block cache in bytes (graft's, as
	// opened: Config.ArchiveCacheSize with graft's default and floor).
	CacheSize int64          `json:"cache_bytes"`
	Depths    []ArchiveDepth `json:"depths"`
	// KeyCycle is a cycle of a stream at a Redis key beside one of a
	// stream of a queue (nil: not measured).
	KeyCycle *KeyCycle `json:"key_cycle,omitempty"`
}

// KeyCycle is one fold-then-trim cycle of N records of a stream at a Redis
// key (names.KeyRef) beside one of the same N records of a stream of a
// queue, runs interleaved (the order alternating), medians.
type KeyCycle struct {
	Records   int       `json:"records"`
	Runs      int       `json:"runs"`
	QueuePS   float64   `json:"queue_records_per_s"`
	KeyPS     float64   `json:"key_records_per_s"`
	Ratio     float64   `json:"key_vs_queue"` // KeyPS / QueuePS
	QueueRuns []float64 `json:"queue_runs"`
	KeyRuns   []float64 `json:"key_runs"`
}

// ArchiveDepth is one history depth.
type ArchiveDepth struct {
	Records    int       `json:"records"`              // records read (archive + live)
	Live       int       `json:"live"`                 // of which live (Keep of the cycle)
	AppendPS   float64   `json:"append_records_per_s"` // AppendBatch of 1,000, filling the stream
	FoldPS     float64   `json:"fold_records_per_s"`   // one fold-then-trim cycle over the history
	MergePS    float64   `json:"merge_read_records_per_s"`
	XrangePS   float64   `json:"xrange_records_per_s"` // mq Read (XRANGE pages of 512) of the same records, all live
	Ratio      float64   `json:"merge_vs_xrange"`      // MergePS / XrangePS
	MergeRuns  []float64 `json:"merge_runs"`
	XrangeRuns []float64 `json:"xrange_runs"`
}

// MemoryReport is Redis's used_memory while the history grows and the
// window stays: append a window, cycle with Keep = window, round after
// round; then the same history appended to a stream that keeps it all.
type MemoryReport struct {
	Window      int     `json:"window"`
	Rounds      int     `json:"rounds"`
	Samples     []int64 `json:"used_memory"` // after each round
	Round2      int64   `json:"after_round_2"`
	Last        int64   `json:"after_last_round"`
	MaxFrom2    int64   `json:"max_from_round_2"`
	Archived    int64   `json:"archived_records"`
	LiveHistory int64   `json:"same_history_live_bytes"` // used_memory added by the same records kept live
	GraftBytes  int64   `json:"graft_disk_bytes"`        // the archive's store on disk (Pebble's estimate)
}

func recordFields(i int) []mq.Field {
	return []mq.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: strconv.Itoa(i)}}
}

// fillStream appends n records in batches of 1,000; records/s.
func fillStream(ctx context.Context, c *mq.Client, ref names.StreamRef, n int) (float64, error) {
	batch := make([][]mq.Field, 1000)
	t0 := time.Now()
	for done := 0; done < n; {
		b := batch[:min(len(batch), n-done)]
		for i := range b {
			b[i] = recordFields(done + i)
		}
		if _, err := c.AppendBatch(ctx, ref, b); err != nil {
			return 0, err
		}
		done += len(b)
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

func countRead(seq func(func(mq.Record, error) bool), want int) (float64, error) {
	t0 := time.Now()
	n := 0
	for _, err := range seq {
		if err != nil {
			return 0, err
		}
		n++
	}
	d := time.Since(t0)
	if n != want {
		return 0, fmt.Errorf("read %d records, want %d", n, want)
	}
	return float64(n) / d.Seconds(), nil
}

// openArchiver connects to the run's Redis and opens a graft store in dir
// and an Archiver over both; done closes them.
func openArchiver(ctx context.Context, e *env, dir string) (live *mq.Client, st *graft.Store, a *archive.Archiver, done func(), err error) {
	if live, err = e.connect(ctx); err != nil {
		return nil, nil, nil, nil, err
	}
	if st, err = graft.Open(ctx, dir, graft.Options{CacheSize: e.archiveCache}); err != nil {
		live.Close()
		return nil, nil, nil, nil, err
	}
	done = func() { _ = st.Close(); live.Close() }
	if a, err = archive.New(archive.Options{Store: st, Live: live, Logger: slog.New(slog.DiscardHandler), Chunk: 10_000}); err != nil {
		done()
		return nil, nil, nil, nil, err
	}
	return live, st, a, done, nil
}

func runArchive(ctx context.Context, e *env, dir string, cfg Config, p *bench.Progress) (*ArchiveReport, error) {
	live, st, a, done, err := openArchiver(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	defer done()
	r := &ArchiveReport{Fields: "3 small fields (user, kind, n)", Runs: cfg.ArchiveRuns, CacheSize: st.CacheSize()}
	q := e.queue
	for _, n := range cfg.ArchiveDepths {
		keep := max(n/100, 1)
		d := ArchiveDepth{Records: n, Live: keep}
		arc, liv := fmt.Sprintf("arc%d", n), fmt.Sprintf("live%d", n)
		arcRef, err := names.ParseStreamRef(q, arc) // the queue comes from the config
		if err != nil {
			return nil, err
		}
		livRef, err := names.ParseStreamRef(q, liv)
		if err != nil {
			return nil, err
		}
		p.Step(fmt.Sprintf("%d records: fill", n))
		if d.AppendPS, err = fillStream(ctx, live, arcRef, n); err != nil {
			return nil, err
		}
		if _, err = fillStream(ctx, live, livRef, n); err != nil {
			return nil, err
		}
		p.Step(fmt.Sprintf("%d records: fold", n))
		t0 := time.Now()
		cr, err := a.Cycle(ctx, arcRef, archive.Window{Keep: int64(keep)})
		if err != nil {
			return nil, err
		}
		d.FoldPS = float64(cr.Folded) / time.Since(t0).Seconds()
		vol, err := st.Volume(ctx, arcRef.Volume())
		if err != nil {
			return nil, err
		}
		src := archive.Source{Ref: arcRef, Live: live, Volume: vol}
		for k := 0; k < cfg.ArchiveRuns; k++ {
			p.Step(fmt.Sprintf("%d records: merge-read and XRANGE", n))
			m, err := countRead(archive.MergeRead(ctx, src, archive.All()), n)
			if err != nil {
				return nil, fmt.Errorf("merge-read: %w", err)
			}
			x, err := countRead(live.Read(ctx, livRef, xid.Min, xid.Max, 0, false), n)
			if err != nil {
				return nil, fmt.Errorf("XRANGE: %w", err)
			}
			d.MergeRuns, d.XrangeRuns = append(d.MergeRuns, m), append(d.XrangeRuns, x)
		}
		d.MergePS, d.XrangePS = bench.Median(d.MergeRuns), bench.Median(d.XrangeRuns)
		if d.XrangePS > 0 {
			d.Ratio = d.MergePS / d.XrangePS
		}
		r.Depths = append(r.Depths, d)
		// Free Redis for the next depth.
		if err := e.deleteKeys(ctx, "emq:{"+q+"}:stream:"+liv); err != nil {
			return nil, err
		}
		if err := e.deleteKeys(ctx, "emq:{"+q+"}:stream:"+arc+"*"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// runKeyCycle measures KeyCycle on one stream of the queue and one stream
// at a key: after an untimed warm-up cycle of each (the scripts load, the
// volumes are created), each run appends n records to both and times one
// cycle of each keeping one record live, the order alternating run to run.
func runKeyCycle(ctx context.Context, e *env, dir string, cfg Config, p *bench.Progress) (*KeyCycle, error) {
	live, _, a, done, err := openArchiver(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	defer done()
	kc := &KeyCycle{Records: cfg.KeyCycleRecords, Runs: cfg.ArchiveRuns}
	q := e.queue + "-keycycle"
	qref, err := names.ParseStreamRef(q, "s") // the queue comes from the config
	if err != nil {
		return nil, err
	}
	kref, err := names.ParseKeyRef(q + ".key")
	if err != nil {
		return nil, err
	}
	defer e.deleteKeys(context.WithoutCancel(ctx), "emq:{"+q+"}*")     //nolint:errcheck // best effort
	defer e.deleteKeys(context.WithoutCancel(ctx), mq.StreamKey(kref)) //nolint:errcheck // best effort
	cycle := func(ref names.StreamRef, records int, timed bool) (float64, error) {
		if _, err := fillStream(ctx, live, ref, records); err != nil {
			return 0, err
		}
		t0 := time.Now()
		cr, err := a.Cycle(ctx, ref, archive.Window{Keep: 1})
		if err != nil {
			return 0, err
		}
		if timed && cr.Folded != int64(records) {
			return 0, fmt.Errorf("cycle of %s folded %d records, want %d", ref, cr.Folded, records)
		}
		return float64(cr.Folded) / time.Since(t0).Seconds(), nil
	}
	for _, ref := range []names.StreamRef{qref, kref} {
		if _, err := cycle(ref, 100, false); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	for k := 0; k < kc.Runs; k++ {
		p.Step(fmt.Sprintf("cycle of %s records, key and queue streams, run %d", n(kc.Records), k+1))
		refs := []names.StreamRef{qref, kref}
		if k%2 == 1 {
			refs[0], refs[1] = kref, qref
		}
		for _, ref := range refs {
			ps, err := cycle(ref, kc.Records, true)
			if err != nil {
				return nil, err
			}
			if ref.IsKey() {
				kc.KeyRuns = append(kc.KeyRuns, ps)
			} else {
				kc.QueueRuns = append(kc.QueueRuns, ps)
			}
		}
	}
	kc.QueuePS, kc.KeyPS = bench.Median(kc.QueueRuns), bench.Median(kc.KeyRuns)
	if kc.QueuePS > 0 {
		kc.Ratio = kc.KeyPS / kc.QueuePS
	}
	return kc, nil
}

func runMemory(ctx context.Context, e *env, dir string, cfg Config, p *bench.Progress) (*MemoryReport, error) {
	live, st, a, done, err := openArchiver(ctx, e, dir)
	if err != nil {
		return nil, err
	}
	defer done()
	q := e.queue + "-mem"
	events, err := names.ParseStreamRef(q, "events") // the queue comes from the config
	if err != nil {
		return nil, err
	}
	kept, err := names.ParseStreamRef(q, "kept")
	if err != nil {
		return nil, err
	}
	defer e.deleteKeys(context.WithoutCancel(ctx), "emq:{"+q+"}*") //nolint:errcheck // best effort
	r := &MemoryReport{Window: cfg.MemoryWindow, Rounds: cfg.MemoryRounds}
	for k := 0; k < cfg.MemoryRounds; k++ {
		p.Step(fmt.Sprintf("round %d of %d", k+1, cfg.MemoryRounds))
		if _, err := fillStream(ctx, live, events, cfg.MemoryWindow); err != nil {
			return nil, err
		}
		cr, err := a.Cycle(ctx, events, archive.Window{Keep: int64(cfg.MemoryWindow)})
		if err != nil {
			return nil, err
		}
		r.Archived += cr.Folded
		m, err := e.usedMemory(ctx)
		if err != nil {
			return nil, err
		}
		r.Samples = append(r.Samples, m)
	}
	if len(r.Samples) >= 2 {
		r.Round2, r.Last = r.Samples[1], r.Samples[len(r.Samples)-1]
		for _, m := range r.Samples[1:] {
			r.MaxFrom2 = max(r.MaxFrom2, m)
		}
	}
	r.GraftBytes = int64(st.DiskUsage())
	p.Step("the same history kept live")
	before, err := e.usedMemory(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := fillStream(ctx, live, kept, int(r.Archived)+cfg.MemoryWindow); err != nil {
		return nil, err
	}
	after, err := e.usedMemory(ctx)
	if err != nil {
		return nil, err
	}
	r.LiveHistory = after - before
	return r, nil
}
