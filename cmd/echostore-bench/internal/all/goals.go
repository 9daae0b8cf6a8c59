package all

import (
	"fmt"

	"github.com/echostore/echostore/internal/bench"
)

// Goal is one goal of the project's issues checked against a figure of the
// run.
type Goal struct {
	Suite  string  `json:"suite"`
	Figure string  `json:"figure"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Goal   string  `json:"goal"`
	Met    bool    `json:"met"`
}

// goals checks the figures that have a goal (issues 4, 6, 7 and 19): the
// graft rows that carry one, the outbox's rates by K, recovery and replay,
// sync enqueue's lone caller and 64 callers, merge-read against XRANGE,
// Redis memory held flat, the accept tier against asynq.
func (r *Report) goals() []Goal {
	var gs []Goal
	add := func(suite, figure string, v float64, unit string, limit float64, atMost bool) {
		g := Goal{Suite: suite, Figure: figure, Value: v, Unit: unit}
		if atMost {
			g.Goal, g.Met = "≤ "+bench.FormatValue(limit)+" "+unit, v <= limit
		} else {
			g.Goal, g.Met = "≥ "+bench.FormatValue(limit)+" "+unit, v >= limit
		}
		gs = append(gs, g)
	}
	if r.Graft != nil {
		for _, row := range r.Graft.Rows {
			if row.Met == nil {
				continue
			}
			v, unit := row.Value, row.Unit
			if row.Anchor != "" {
				v, unit = row.Ratio, "× "+row.Anchor
			}
			gs = append(gs, Goal{Suite: "graft", Figure: row.Name, Value: v, Unit: unit, Goal: row.Goal, Met: *row.Met})
		}
	}
	for _, sr := range []struct {
		suite string
		rep   *bench.Report
	}{{"resp", r.RESP}, {"http append", r.HTTP}, {"peers", r.Peers}} {
		if sr.rep == nil {
			continue
		}
		for _, row := range sr.rep.Rows {
			if row.Met == nil {
				continue
			}
			v, unit := row.Value, row.Unit
			if row.Anchor != "" {
				v, unit = row.Ratio, "× "+row.Anchor
			}
			gs = append(gs, Goal{Suite: sr.suite, Figure: row.Name, Value: v, Unit: unit, Goal: row.Goal, Met: *row.Met})
		}
	}
	if r.Peers != nil {
		// Issue 26: one caller keeping 64 sync jobs in flight to MinIO.
		for _, row := range r.Peers.Rows {
			if row.Name == peerSyncBatch+", MinIO: jobs/s" {
				add("peers", row.Name, row.Value, "jobs/s", 10_000, false)
			}
		}
	}
	if a := r.Accept; a != nil {
		want := map[int]float64{100: 150_000, 1000: 1_000_000, 10_000: 1_500_000}
		for _, t := range a.Results.Throughput {
			if w, ok := want[t.K]; ok {
				add("accept", fmt.Sprintf("outbox, K = %s", n(t.K)), t.RecPerSec, "rec/s", w, false)
			}
			if t.K == 1000 && t.AppendOnlyPerSec > 0 {
				add("accept", "outbox, K = 1,000, ÷ the append-only reference (one block and one fsync per K, no map)", t.VsAppendOnly, "×", 0.8, false)
			}
		}
		for _, rr := range a.Results.Recovery {
			if rr.Intents == 50_000 {
				add("accept", "recovery of 50,000 from a snapshot", rr.SnapshotMs, "ms", 10, true)
			}
		}
		add("accept", "replay", a.Results.ReplayPerSec, "intents/s", 5_000_000, false)
	}
	if s := r.Sync; s != nil {
		for _, rem := range s.Remotes {
			for _, lv := range rem.Levels {
				switch lv.Callers {
				case 1:
					add("sync enqueue", rem.Name+": lone caller p50", lv.P50, "ms", 5, true)
					add("sync enqueue", rem.Name+": lone caller p99", lv.P99, "ms", 20, true)
				case 64:
					add("sync enqueue", rem.Name+": 64 callers", lv.JobsPerSec, "jobs/s", 10_000, false)
				}
			}
		}
	}
	if a := r.Archive; a != nil {
		for _, d := range a.Depths {
			limit := 1.0
			if d.Records >= 10_000_000 {
				limit = 3 // issue 19: ten million records of history
			}
			add("archive", fmt.Sprintf("merge-read of %s records, ÷ XRANGE of the same", n(d.Records)), d.Ratio, "×", limit, false)
		}
		if kc := a.KeyCycle; kc != nil {
			// As fast as a queue stream's cycle: the two run the same
			// code, and 0.9× allows the runs' spread on a shared machine.
			add("archive", fmt.Sprintf("cycle of %s records of a key stream, ÷ a queue stream's", n(kc.Records)), kc.Ratio, "×", 0.9, false)
		}
	}
	if m := r.RedisMemory; m != nil && len(m.Samples) >= 2 && m.Archived > 0 {
		// Flat: from round 2 on (the first fold and trim, which also load
		// their scripts) used_memory grows by less than one window of live
		// records, priced by the same history kept live.
		window := float64(m.LiveHistory) / float64(m.Archived+int64(m.Window)) * float64(m.Window)
		add("redis memory", fmt.Sprintf("used_memory growth from round 2 to the most of rounds 2–%d (history %d× the window)", m.Rounds, m.Rounds),
			float64(m.MaxFrom2-m.Round2), "B", window, true)
	}
	if q := r.Requests; q != nil {
		add("remote requests", "per idle hour", q.PerIdleHour, "requests", 0, true)
	}
	return gs
}
