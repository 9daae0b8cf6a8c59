// Package bench is the plumbing the `echostore-bench` suites share: a
// Report of rows (a figure, its unit, the baseline it is compared to and the
// ratio), printed as a table or as JSON; medians and percentiles of
// repeated runs; and a progress bar that shows on a terminal only.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Row is one measured figure.
type Row struct {
	Name  string    `json:"name"`
	Value float64   `json:"value"` // the median of Runs
	Unit  string    `json:"unit"`
	Runs  []float64 `json:"runs,omitempty"` // every run, in order

	// Anchor names the baseline row (measured in the same run) that Value is
	// compared to; Ratio is Value / AnchorValue.
	Anchor      string  `json:"anchor,omitempty"`
	AnchorValue float64 `json:"anchor_value,omitempty"`
	Ratio       float64 `json:"ratio,omitempty"`

	// Goal states the target in words; Met says whether the figure reaches it.
	Goal string `json:"goal,omitempty"`
	Met  *bool  `json:"met,omitempty"`

	Note string `json:"note,omitempty"`
}

// ValueText is the row's value as a table shows it: "—" for a row that
// measured nothing (no runs and no value, as a left-out peer's).
func (row Row) ValueText() string {
	if len(row.Runs) == 0 && row.Value == 0 {
		return "—"
	}
	return FormatValue(row.Value)
}

// RatioText is the ratio as printed ("0.63×"), or "" without an anchor.
func (row Row) RatioText() string {
	if row.Anchor == "" {
		return ""
	}
	return fmt.Sprintf("%.2f×", row.Ratio)
}

// GoalText is the goal followed by ✓ when met or by missed when not.
func (row Row) GoalText(missed string) string {
	if row.Met == nil {
		return row.Goal
	}
	if *row.Met {
		return row.Goal + " ✓"
	}
	return row.Goal + " " + missed
}

// Host describes where a report was measured.
type Host struct {
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	CPUs   int    `json:"cpus"`
	Go     string `json:"go"`
}

// Report is the result of one suite.
type Report struct {
	Suite   string        `json:"suite"`
	Command string        `json:"command"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Host    Host          `json:"host"`
	Rows    []Row         `json:"rows"`
}

// NewReport starts a report for suite, run by command.
func NewReport(suite, command string) *Report {
	return &Report{
		Suite: suite, Command: command, Started: time.Now(),
		Host: Host{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()},
	}
}

// Add appends a row whose value is the median of runs, and returns its name.
func (r *Report) Add(name, unit string, runs []float64, note string) string {
	r.Rows = append(r.Rows, Row{Name: name, Value: Median(runs), Unit: unit, Runs: runs, Note: note})
	return name
}

// Row returns the named row, or nil.
func (r *Report) Row(name string) *Row {
	for k := range r.Rows {
		if r.Rows[k].Name == name {
			return &r.Rows[k]
		}
	}
	return nil
}

// Compare sets row name's anchor to row anchor and its ratio; with
// minRatio > 0 the goal is "≥ minRatio× anchor".
func (r *Report) Compare(name, anchor string, minRatio float64) {
	row, base := r.Row(name), r.Row(anchor)
	if row == nil || base == nil {
		return
	}
	row.Anchor, row.AnchorValue = anchor, base.Value
	if base.Value != 0 {
		row.Ratio = row.Value / base.Value
	}
	if minRatio > 0 {
		met := row.Ratio >= minRatio
		row.Goal, row.Met = fmt.Sprintf("≥ %g×", minRatio), &met
	}
}

// Goal sets an absolute goal on row name: at least min (at most, with atMost).
func (r *Report) Goal(name string, limit float64, atMost bool) {
	row := r.Row(name)
	if row == nil {
		return
	}
	met, op := row.Value >= limit, "≥"
	if atMost {
		met, op = row.Value <= limit, "≤"
	}
	row.Goal, row.Met = fmt.Sprintf("%s %s %s", op, FormatValue(limit), row.Unit), &met
}

// Finish records the elapsed time.
func (r *Report) Finish() { r.Elapsed = time.Since(r.Started) }

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "%s — %s\n%s/%s, %d CPUs, %s; each value is the median of its runs; took %s\n\n",
		r.Suite, r.Command, r.Host.GOOS, r.Host.GOARCH, r.Host.CPUs, r.Host.Go, r.Elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\tunit\truns\tvs\tratio\tgoal\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", row.Name, row.ValueText(), row.Unit, len(row.Runs), row.Anchor, row.RatioText(), row.GoalText("✗ missed"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	for _, row := range r.Rows {
		if row.Note != "" {
			notes = append(notes, fmt.Sprintf("  %s: %s", row.Name, row.Note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nnotes:\n%s\n", strings.Join(notes, "\n"))
	}
	return nil
}

// FormatValue prints v with thousands separators, keeping two decimals
// below 100.
func FormatValue(v float64) string {
	if math.Abs(v) < 100 {
		return fmt.Sprintf("%.2f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for k, c := range s {
		if k > 0 && (len(s)-k)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// Percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of
// sorted durations, or 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// Repeat calls f n times and returns every result; it stops at the first
// error.
func Repeat(n int, f func(run int) (float64, error)) ([]float64, error) {
	runs := make([]float64, 0, n)
	for k := 0; k < n; k++ {
		v, err := f(k)
		if err != nil {
			return runs, err
		}
		runs = append(runs, v)
	}
	return runs, nil
}

// RawFsyncRate appends 4 KiB to a new file in dir and fdatasyncs it, in a
// loop, for d; it returns syncs per second. The file is removed.
func RawFsyncRate(ctx context.Context, dir string, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return 0, fmt.Errorf("raw fsync: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	n, start := 0, time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		if _, err := f.Write(buf); err != nil {
			return 0, fmt.Errorf("raw fsync: %w", err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, fmt.Errorf("raw fsync: %w", err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), ctx.Err()
}

// Progress shows how far a suite is. Its methods do nothing when it is not
// shown.
type Progress struct {
	bar    *progressbar.ProgressBar
	prefix string // put before every description
}

// NewProgress returns a progress bar of total steps drawn on w, shown only
// if stdout is a terminal (so piped or --json output stays clean).
func NewProgress(stdout io.Writer, w io.Writer, total int) *Progress {
	if !IsTerminal(stdout) {
		return &Progress{}
	}
	return NewProgressOn(w, total, "")
}

// NewProgressOn returns a progress bar of total steps drawn on w whether or
// not it is a terminal (the caller has decided), each description led by
// prefix.
func NewProgressOn(w io.Writer, total int, prefix string) *Progress {
	return &Progress{prefix: prefix, bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(false),
	)}
}

// Step sets the description and advances by one.
func (p *Progress) Step(desc string) {
	if p == nil || p.bar == nil {
		return
	}
	p.bar.Describe(p.prefix + desc)
	_ = p.bar.Add(1)
}

// Describe sets the description without advancing.
func (p *Progress) Describe(desc string) {
	if p == nil || p.bar == nil {
		return
	}
	p.bar.Describe(p.prefix + desc)
}

// Done removes the bar.
func (p *Progress) Done() {
	if p == nil || p.bar == nil {
		return
	}
	_ = p.bar.Finish()
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
