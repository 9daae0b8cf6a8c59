package echostore_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// TestExportJobOutcomes: with Config.JobOutcomes, a queue's finished and
// failed jobs are a stream of the queue, declared by the node at the first
// ack, folded into the archive by the beat and exported like any stream:
// "which jobs failed, and why" is one DuckDB query, whose answer equals
// what the jobs went through, and the group-by on the outcome equals the
// merge-read's.
func TestExportJobOutcomes(t *testing.T) {
	ctx := t.Context()
	outcomes, err := names.ParseStream("outcomes")
	if err != nil {
		t.Fatal(err)
	}
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir(),
		JobOutcomes: echostore.JobOutcomes{Stream: outcomes,
			Policy: echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 10}}}})
	q := streamRef(t, "x").Queue()
	const jobs = 120
	for i := range jobs {
		if _, err := node.Enqueue(ctx, q, fmt.Appendf(nil, `{"n":%d}`, i), echostore.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := node.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// Dispatch to the job stream follows the drain in the background.
	var claimed []echostore.Job
	for deadline := time.Now().Add(30 * time.Second); len(claimed) < jobs; {
		if time.Now().After(deadline) {
			t.Fatalf("claimed %d of %d jobs within 30s", len(claimed), jobs)
		}
		res, err := node.Claim(ctx, q, echostore.ClaimOptions{Consumer: "w1", Count: min(100, jobs-len(claimed))})
		if err != nil {
			t.Fatal(err)
		}
		claimed = append(claimed, res.Jobs...)
		if len(res.Jobs) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var acks []string
	var failed []string // "JOB_… why", what the query must answer
	for i, j := range claimed {
		if i%10 != 3 {
			acks = append(acks, j.EntryID)
			continue
		}
		why := fmt.Sprintf("bad input %03d", i)
		fr, err := node.Fail(ctx, q, echostore.FailOptions{Consumer: "w1", Entry: j.EntryID, Attempt: j.Attempt, Reason: why})
		if err != nil || !fr.Failed {
			t.Fatalf("fail %s: %+v, %v", j.EntryID, fr, err)
		}
		failed = append(failed, brand.JOB.Format(j.ID)+" "+why)
	}
	for len(acks) > 0 {
		n := min(len(acks), 100)
		if _, err := node.Ack(ctx, q, acks[:n]); err != nil {
			t.Fatal(err)
		}
		acks = acks[n:]
	}

	ref, err := names.NewStreamRef(q, outcomes)
	if err != nil {
		t.Fatal(err)
	}
	declared := false
	for _, d := range node.Declared() {
		declared = declared || d.Ref == ref && d.Policy.Archived && d.Policy.Window.Keep == 10
	}
	if !declared {
		t.Fatalf("the outcome stream %s is not declared with its policy: %+v", ref, node.Declared())
	}
	node.Beat(ctx, echostore.BeatOptions{})
	st, err := node.Status(ctx, ref)
	if err != nil || st.Archived == 0 || st.Live != 10 {
		t.Fatalf("the outcome stream after a beat: %+v, %v; want its outcomes folded, 10 live", st, err)
	}

	byOutcome := map[string]int{}
	for r, err := range node.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		v, _ := r.Get("outcome")
		byOutcome[v]++
	}
	if byOutcome["done"] != jobs-len(failed) || byOutcome["retry"] != len(failed) || len(byOutcome) != 2 {
		t.Fatalf("the merge-read's outcomes: %v", byOutcome)
	}
	dir := t.TempDir()
	res, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir})
	if err != nil || res.Rows != jobs {
		t.Fatalf("export: %+v, %v; want %d rows", res, err, jobs)
	}
	typed := fmt.Sprint(res.Files[0].Typed)
	for _, col := range []string{"{attempt int64}", "{consumer string}", "{error string}", "{job string}", "{outcome string}", "{payload string}"} {
		if !strings.Contains(typed, col) {
			t.Fatalf("typed columns %s lack %s", typed, col)
		}
	}
	table := fmt.Sprintf("read_parquet('%s', union_by_name = true)", filepath.Join(dir, "*.parquet"))
	rows := duckdb(t, "select f_job || ' ' || f_error as why from "+table+" where f_outcome <> 'done' order by f_error")
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprint(r["why"]))
	}
	sort.Strings(failed)
	if strings.Join(got, "\n") != strings.Join(failed, "\n") {
		t.Fatalf("DuckDB's failed jobs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(failed, "\n"))
	}
	groups := duckdb(t, "select f_outcome as outcome, count(*) as n, min(f_attempt) as a from "+table+" group by f_outcome")
	for _, g := range groups {
		if g["n"] != fmt.Sprint(byOutcome[fmt.Sprint(g["outcome"])]) || g["a"] != "1" {
			t.Fatalf("DuckDB's group-by %v; the merge-read's %v", groups, byOutcome)
		}
	}
	if len(groups) != len(byOutcome) {
		t.Fatalf("DuckDB's group-by %v; the merge-read's %v", groups, byOutcome)
	}
}

// A live-only node keeps outcomes only under a policy that is not
// archived, and Open says so before it connects.
func TestJobOutcomesLiveOnlyArchived(t *testing.T) {
	outcomes, _ := names.ParseStream("outcomes")
	_, err := echostore.Open(t.Context(), echostore.Config{LiveOnly: true, Redis: redisURL,
		JobOutcomes: echostore.JobOutcomes{Stream: outcomes}})
	if err == nil || !strings.Contains(err.Error(), "live-only node has no archive") {
		t.Fatalf("Open live-only with archived outcomes: %v", err)
	}
}
