package all

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/echostore/echostore/internal/bench"
)

// writePlots draws the report's SVG plots under out and returns their paths
// relative to out (a suite that did not run has no plot).
func (r *Report) writePlots(out string) ([]string, error) {
	var done []string
	save := func(p *plot.Plot, rel string) error {
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(out, rel)); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		done = append(done, rel)
		return nil
	}
	if r.Accept != nil && len(r.Accept.Results.Throughput) > 0 {
		if err := save(r.acceptPlot(), PlotAccept); err != nil {
			return done, err
		}
	}
	if r.Archive != nil && len(r.Archive.Depths) > 0 {
		if err := save(r.mergePlot(), PlotMerge); err != nil {
			return done, err
		}
	}
	if r.Sync != nil && len(r.Sync.Remotes) > 0 {
		if err := save(r.syncPlot(), PlotSync); err != nil {
			return done, err
		}
	}
	if r.Peers != nil && len(r.Peers.Rows) > 0 {
		pp, err := r.peersPlot()
		if err != nil {
			return done, err
		}
		if err := save(pp, PlotPeers); err != nil {
			return done, err
		}
	}
	return done, nil
}

// peersPlot draws the peers suite's jobs/s: enqueue at each level and
// processing, asynq's bars beside echostore's (and River's, when the run
// has them).
func (r *Report) peersPlot() (*plot.Plot, error) {
	p := plot.New()
	sub := r.subtitle()
	if strings.HasPrefix(r.Command, "echostore-bench peers") {
		sub = strings.Replace(sub, "echostore-bench all", "echostore-bench peers", 1)
	}
	p.Title.Text = "echostore beside asynq on the same Redis, and River on Postgres (jobs/s, medians)\n" + sub
	p.Y.Label.Text = "jobs/s"
	p.Y.Tick.Marker = humanTicks{linear: true}
	p.Add(plotter.NewGrid())
	callers := peersCallers(r.Peers)
	var cats []string
	for _, c := range callers {
		cats = append(cats, strings.TrimSuffix(peerRow("enqueue", c, ""), ": "))
	}
	cats = append(cats, "processing")
	val := func(name string) float64 {
		if row := r.Peers.Row(name); row != nil {
			return row.Value
		}
		return 0
	}
	series := []struct {
		label, sys, proc string
	}{
		{"asynq (Client.Enqueue; Server, no-op handler)", peerAsynqEnqueue, peerAsynqServer},
		{"asynq on a Redis with appendfsync always (Client.Enqueue)", peerAsynqDurable, ""},
		{"echostore async enqueue; claim + ack", peerAsync, peerClaimAck},
		{"echostore sync enqueue, file://", peerSyncFile, ""},
		{"echostore sync enqueue, MinIO", peerSyncMinIO, ""},
	}
	if slices.ContainsFunc(r.Peers.Rows, func(row bench.Row) bool {
		return strings.HasPrefix(row.Name, peerRiverInsert) || row.Name == peerRiverProcess
	}) {
		series = append(series, struct{ label, sys, proc string }{"River on Postgres (Client.Insert; Client, no-op Worker)", peerRiverInsert, peerRiverProcess})
	}
	w := vg.Points(14)
	for k, s := range series {
		var vs plotter.Values
		for _, c := range callers {
			vs = append(vs, val(peerRow(s.sys, c, "jobs/s")))
		}
		if s.proc != "" {
			vs = append(vs, val(s.proc))
		} else {
			vs = append(vs, 0)
		}
		bars, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return nil, err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(k)
		bars.Offset = w * vg.Length(float64(k)-float64(len(series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.label, bars)
	}
	p.NominalX(cats...)
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min = 0
	p.Y.Max *= 1.3 + 0.1*float64(len(series)) // room for the legend's lines
	return p, nil
}

func logAxes(p *plot.Plot, x, y bool) {
	if x {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = humanTicks{}
	}
	if y {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = humanTicks{}
	} else {
		p.Y.Tick.Marker = humanTicks{linear: true}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
}

// headroom raises the top of the Y axis so that the legend, top left,
// stays clear of the lines: by factor (a log axis) or by the fraction
// factor-1 of the range (a linear one).
func headroom(p *plot.Plot, factor float64) {
	p.Y.Max *= factor
}

// humanTicks marks an axis at 1, 2 and 5 times the powers of ten (log), or
// at plot.DefaultTicks (linear), labelled 500, 2k, 1.5M.
type humanTicks struct{ linear bool }

func (h humanTicks) Ticks(lo, hi float64) []plot.Tick {
	if h.linear {
		ts := plot.DefaultTicks{}.Ticks(lo, hi)
		for k := range ts {
			if ts[k].Label != "" {
				ts[k].Label = human(ts[k].Value)
			}
		}
		return ts
	}
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 3, 4, 5, 6, 7, 8, 9} {
			v := m * math.Pow(10, e)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = human(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// human prints v briefly: 0.5, 20, 1.5k, 2M.
func human(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// subtitle says which run a plot comes from.
func (r *Report) subtitle() string {
	s := fmt.Sprintf("echostore-bench all, %s, %d CPUs, load %s", r.Started.Format("2006-01-02 15:04 MST"), r.Machine.CPUs, orNA(r.Machine.LoadStart))
	if r.Quick {
		s += " (--quick)"
	}
	return s
}

func (r *Report) acceptPlot() *plot.Plot {
	p := plot.New()
	p.Title.Text = "Accept throughput vs K (loss window)\n" + r.subtitle()
	p.X.Label.Text = "K: records per fsync (loss window)"
	p.Y.Label.Text = "records/s"
	logAxes(p, true, true)
	var ours, whole, seed plotter.XYs
	for _, t := range r.Accept.Results.Throughput {
		ours = append(ours, plotter.XY{X: float64(t.K), Y: t.RecPerSec})
		whole = append(whole, plotter.XY{X: float64(t.K), Y: t.WholeSnapPerSec})
		if t.SeedRecPerSec > 0 {
			seed = append(seed, plotter.XY{X: float64(t.K), Y: t.SeedRecPerSec})
		}
	}
	args := []any{"outbox (this run)", positive(ours), "seed's algorithm, whole snapshot (this run)", positive(whole)}
	if len(seed) > 0 {
		args = append(args, "seed's published table", seed)
	}
	_ = plotutil.AddLinePoints(p, args...)
	headroom(p, 6)
	return p
}

func (r *Report) mergePlot() *plot.Plot {
	p := plot.New()
	p.Title.Text = "Merge-read vs history depth (99% archived)\n" + r.subtitle()
	p.X.Label.Text = "records read (history depth)"
	p.Y.Label.Text = "records/s"
	logAxes(p, true, false)
	var merge, xr plotter.XYs
	for _, d := range r.Archive.Depths {
		merge = append(merge, plotter.XY{X: float64(d.Records), Y: d.MergePS})
		xr = append(xr, plotter.XY{X: float64(d.Records), Y: d.XrangePS})
	}
	_ = plotutil.AddLinePoints(p, "merge-read: archive + live tail", merge, "Redis XRANGE, the same records all live", xr)
	p.Y.Min = 0
	p.Y.Max *= 1.35
	return p
}

func (r *Report) syncPlot() *plot.Plot {
	p := plot.New()
	p.Title.Text = "Sync enqueue latency vs concurrent callers\n" + r.subtitle()
	p.X.Label.Text = "concurrent callers"
	p.Y.Label.Text = "latency per call, ms"
	logAxes(p, true, true)
	var args []any
	for _, rem := range r.Sync.Remotes {
		var p50, p99, put plotter.XYs
		for _, lv := range rem.Levels {
			p50 = append(p50, plotter.XY{X: float64(lv.Callers), Y: lv.P50})
			p99 = append(p99, plotter.XY{X: float64(lv.Callers), Y: lv.P99})
			put = append(put, plotter.XY{X: float64(lv.Callers), Y: rem.PutP50})
		}
		args = append(args, rem.Name+" p50", positive(p50), rem.Name+" p99", positive(p99), rem.Name+": one 8 KiB conditional PUT, p50", positive(put))
	}
	_ = plotutil.AddLinePoints(p, args...)
	headroom(p, 12)
	return p
}

// positive keeps the points a log scale can draw.
func positive(xys plotter.XYs) plotter.XYs {
	out := xys[:0:0]
	for _, xy := range xys {
		if xy.X > 0 && xy.Y > 0 {
			out = append(out, xy)
		}
	}
	return out
}

// peersCallers returns the enqueue levels of a peers report, from its
// asynq rows.
func peersCallers(pr *bench.Report) []int {
	var cs []int
	for _, row := range pr.Rows {
		var c int
		if _, err := fmt.Sscanf(strings.TrimPrefix(row.Name, peerAsynqEnqueue+", "), "%d", &c); err == nil &&
			strings.HasPrefix(row.Name, peerAsynqEnqueue+", ") && strings.HasSuffix(row.Name, ": jobs/s") {
			cs = append(cs, c)
		}
	}
	return cs
}

// WritePeersPlot draws the peers suite's plot of rep (a run of
// `echostore-bench peers`) into the SVG file path.
func WritePeersPlot(rep *bench.Report, path string) error {
	r := &Report{Command: rep.Command, Started: rep.Started.UTC(), Machine: machine(), Peers: rep}
	p, err := r.peersPlot()
	if err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
