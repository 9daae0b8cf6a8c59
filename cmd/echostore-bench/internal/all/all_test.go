package all

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/acceptbench"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/internal/testserver"
)

const handDoc = "# Benchmarks\n\nIntroduction, hand-written.\n\n## brand\n\nA table.\n\n## graft\n\nMore text.\n"

func TestSplice(t *testing.T) {
	// No markers: the block goes before the first section.
	out, err := Splice([]byte(handDoc), "one\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nIntroduction, hand-written.\n\n" + Begin + "\none\n" + End + "\n\n## brand\n\nA table.\n\n## graft\n\nMore text.\n"
	if string(out) != want {
		t.Fatalf("first splice:\n%s\nwant:\n%s", out, want)
	}
	// Markers: only what is between them changes, every other byte stays.
	again, err := Splice(out, "two\nlines")
	if err != nil {
		t.Fatal(err)
	}
	if want2 := strings.Replace(want, "\none\n", "\ntwo\nlines\n", 1); string(again) != want2 {
		t.Fatalf("second splice:\n%s\nwant:\n%s", again, want2)
	}
	checkOutside(t, out, again)
	// No sections: at the end. An empty file: just the block.
	if out, _ := Splice([]byte("# T\n"), "x"); string(out) != "# T\n\n"+Begin+"\nx\n"+End+"\n\n" {
		t.Fatalf("no sections: %q", out)
	}
	if out, _ := Splice(nil, "x"); string(out) != Begin+"\nx\n"+End+"\n\n" {
		t.Fatalf("empty: %q", out)
	}
	// A lone or repeated marker is refused rather than guessed at.
	for _, bad := range []string{handDoc + Begin + "\n", End + handDoc, handDoc + Begin + End + Begin + End} {
		if _, err := Splice([]byte(bad), "x"); err == nil {
			t.Fatalf("Splice accepted %q", bad)
		}
	}
}

// checkOutside fails unless before and after are equal outside the
// generated block.
func checkOutside(t *testing.T, before, after []byte) {
	t.Helper()
	b1, a1, err1 := outside(before)
	b2, a2, err2 := outside(after)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) || !bytes.Equal(a1, a2) {
		t.Fatalf("bytes outside the block changed:\n%q\n%q\n---\n%q\n%q", b1, a1, b2, a2)
	}
}

func checkOutputs(t *testing.T, out string, before []byte) {
	t.Helper()
	if err := Verify(out, before); err != nil {
		t.Fatal(err)
	}
}

// TestWriteSynthetic writes a made-up report (no measurement) twice into a
// copy of a hand-written doc.
func TestWriteSynthetic(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, DocFile), []byte(handDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := synthetic()
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(out, DocFile))
	checkOutputs(t, out, first)
	r.Machine.LoadEnd = "9.99 9.99 9.99"
	if err := r.Write(out); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(filepath.Join(out, DocFile))
	checkOutside(t, first, second)
	if !bytes.Contains(second, []byte("9.99 9.99 9.99")) {
		t.Fatal("the second write did not replace the block")
	}
	if dir := os.Getenv("BENCH_ALL_KEEP"); dir != "" { // to look at the plots
		_ = os.CopyFS(dir, os.DirFS(out))
	}
}

func synthetic() *Report {
	met := true
	r := &Report{Command: "echostore-bench all (synthetic)", Started: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Elapsed: time.Minute,
		Machine: Machine{CPUs: 2, Kernel: "Linux x", LoadStart: "1 1 1", LoadEnd: "1 1 1"}, RedisNote: "none"}
	r.Graft = &bench.Report{Rows: []bench.Row{{Name: "raw fsync", Value: 4000, Unit: "ops/s", Runs: []float64{4000}},
		{Name: "synced", Value: 3000, Unit: "commits/s", Runs: []float64{3000}, Anchor: "raw fsync", Ratio: 0.75, Goal: "≥ 0.5×", Met: &met}}}
	r.Accept = &AcceptReport{Results: acceptbench.Results{N: 20000, Runs: 1, FsyncPerSec: 4000, ReplayPerSec: 5e6, SeedReplay: 1e6, ReplayVsSeed: 5,
		Throughput: []acceptbench.ThroughputResult{{K: 100, RecPerSec: 3e5, WholeSnapPerSec: 2e4, SeedRecPerSec: 5225}, {K: 300, RecPerSec: 8e5, WholeSnapPerSec: 6e4},
			{K: 10000, RecPerSec: 2e6, WholeSnapPerSec: 1e6, SeedRecPerSec: 102529}},
		Recovery: []acceptbench.RecoveryResult{{Intents: 1000, SnapshotMs: 1, LogMs: 1, SeedMs: 3.63, HaveSeedData: true}}}}
	r.Sync = &SyncReport{PayloadBytes: 97, WindowMs: 1000, Remotes: []SyncRemote{
		{Name: "file", PutP50: 0.5, PutP99: 2, Levels: []SyncLevel{{Callers: 1, JobsPerSec: 500, P50: 1.5, P99: 3}, {Callers: 64, JobsPerSec: 12000, P50: 5, P99: 12}}},
		{Name: "minio", PutP50: 2, PutP99: 8, Levels: []SyncLevel{{Callers: 1, JobsPerSec: 300, P50: 3, P99: 9}, {Callers: 64, JobsPerSec: 7000, P50: 9, P99: 20}}}}}
	r.Archive = &ArchiveReport{Runs: 1, Depths: []ArchiveDepth{{Records: 10000, MergePS: 2e6, XrangePS: 5e5}, {Records: 1000000, MergePS: 1.5e6, XrangePS: 5e5}},
		KeyCycle: &KeyCycle{Records: 100000, Runs: 1, QueuePS: 2e5, KeyPS: 1.9e5, Ratio: 0.95, QueueRuns: []float64{2e5}, KeyRuns: []float64{1.9e5}}}
	r.RedisMemory = &MemoryReport{Window: 1000, Rounds: 2, Samples: []int64{1, 2}}
	r.HeadLookup = &HeadLookupReport{Sizes: []HeadLookup{{LSNs: 10, FreshTotal: 4, QuietTotal: 1, ProbeFresh: 11, ProbeQuiet: 1}}}
	r.Requests = &RequestsReport{ReplicateEveryS: 1, BeatS: 5, ArchivedRecords: 1000, CycleRecords: 500, PerMillionArchived: 2000,
		Jobs: 100, PerMillionAsync: 10000, PerMillionSync: 50000, SyncCallers: 16, IdleCycles: 20, IdleSeconds: 3,
		Active: []ActiveRequests{{Streams: 1, PerCycle: 1, PerHour: 720, Litestream: 3600}}}
	r.RESP = &bench.Report{Rows: []bench.Row{{Name: "Redis XRANGE, live", Value: 5e5, Unit: "rec/s", Runs: []float64{5e5}},
		{Name: "front XRANGE, archived", Value: 6e5, Unit: "rec/s", Runs: []float64{6e5}, Anchor: "Redis XRANGE, live", Ratio: 1.2, Goal: "≥ 1.0×", Met: &met}}}
	r.HTTP = &bench.Report{Suite: "http", Rows: []bench.Row{{Name: "pipelined raw XADD to Redis", Value: 4e5, Unit: "rec/s", Runs: []float64{4e5}},
		{Name: "HTTP append of JSON lines through serve", Value: 2.4e5, Unit: "rec/s", Runs: []float64{2.4e5}, Anchor: "pipelined raw XADD to Redis", Ratio: 0.6, Goal: "≥ 0.5×", Met: &met}}}
	asynqRow := peerRow(peerAsynqEnqueue, 64, "jobs/s")
	r.Peers = &bench.Report{Suite: "peers", Rows: []bench.Row{{Name: asynqRow, Value: 3e4, Unit: "jobs/s", Runs: []float64{3e4}},
		{Name: peerRow(peerAsync, 64, "jobs/s"), Value: 2e5, Unit: "jobs/s", Runs: []float64{2e5}, Anchor: asynqRow, Ratio: 6.7, Goal: "≥ 5×", Met: &met},
		{Name: peerAsynqServer, Value: 1e4, Unit: "jobs/s", Runs: []float64{1e4}},
		{Name: peerClaimAck, Value: 8e4, Unit: "jobs/s", Runs: []float64{8e4}, Anchor: peerAsynqServer, Ratio: 8, Goal: "≥ 1×", Met: &met}}}
	return r
}

// TestRunTiny runs every suite end to end at a tiny size, with a private
// redis-server (and MinIO when its binary is found), into a temp dir
// holding a copy of the hand-written doc with its markers.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every suite")
	}
	if !PeersBuilt { // every suite includes the peers
		if os.Getenv("CI") != "" {
			t.Fatal("built without the peers: run the tests with -tags peers (make test does)")
		}
		t.Skip("built without the peers (asynq, River): go test -tags peers runs this test")
	}
	if _, err := testserver.RedisBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	out := t.TempDir()
	doc, err := Splice([]byte(handDoc), "(not yet generated)")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, DocFile), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Tiny()
	cfg.Dir, cfg.Out, cfg.Command = t.TempDir(), out, "tiny"
	r, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, out, doc)
	if kc := r.Archive.KeyCycle; kc == nil || len(kc.KeyRuns) != cfg.ArchiveRuns || len(kc.QueueRuns) != cfg.ArchiveRuns || kc.Ratio <= 0 {
		t.Fatalf("key-stream cycle figure: %+v", kc)
	}
	var goal bool
	for _, g := range r.Goals {
		goal = goal || strings.HasPrefix(g.Figure, "cycle of 500 records of a key stream")
	}
	md, err := os.ReadFile(filepath.Join(out, DocFile))
	if err != nil || !goal || !bytes.Contains(md, []byte("| records | queue stream rec/s | key stream rec/s | key ÷ queue |")) {
		t.Fatalf("the key-stream cycle is not a goal (%v) or not in %s (%v)", goal, DocFile, err)
	}
	if len(r.Plots) != 4 || r.Peers == nil || r.HeadLookup.Sizes[0].QuietTotal != 1 || len(r.Sync.Remotes[0].Levels) == 0 {
		t.Fatalf("plots %v, head %+v", r.Plots, r.HeadLookup)
	}
	// The JSON's peers key carries River's rows, or the one row that says
	// why River is left out.
	raw, err := os.ReadFile(filepath.Join(out, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Peers bench.Report `json:"peers"`
	}
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatal(err)
	}
	want := []string{peerRow(peerRiverInsert, 1, "jobs/s"), peerRow(peerRiverInsert, 4, "p99"), peerRiverProcess}
	if _, err := testserver.PostgresBinaries(); err != nil {
		want = []string{peerRiverLeftOut}
	}
	for _, name := range want {
		if js.Peers.Row(name) == nil {
			t.Errorf("%s: no row %q under peers", JSONFile, name)
		}
	}
}

// TestRequestsTiny runs the remote-requests suite alone at a tiny size: an
// idle node asks nothing of the remote, an archived record and a job cost
// requests, and each active stream's cycle costs at least one.
func TestRequestsTiny(t *testing.T) {
	if _, err := testserver.RedisBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	cfg := Tiny()
	cfg.NoMinIO = true
	scratch := t.TempDir()
	env, err := startEnv(t.Context(), cfg, scratch)
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	r, err := runRequests(t.Context(), env, filepath.Join(scratch, "requests"), cfg, &bench.Progress{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *r)
	if r.IdleRequests != 0 || r.PerIdleHour != 0 {
		t.Errorf("idle: %d requests over %d cycles, want none", r.IdleRequests, r.IdleCycles)
	}
	if r.PerMillionArchived <= 0 || r.PerMillionAsync <= 0 || r.PerMillionSync <= 0 {
		t.Errorf("per million: archived %v, async %v, sync %v; want each above 0", r.PerMillionArchived, r.PerMillionAsync, r.PerMillionSync)
	}
	if len(r.Active) != len(cfg.RequestStreams) {
		t.Fatalf("active: %+v", r.Active)
	}
	for _, a := range r.Active {
		if a.PerCycle < 1 || a.PerHour != float64(a.Streams)*a.PerCycle*720 || a.Litestream != float64(a.Streams)*LitestreamPerHour {
			t.Errorf("active %+v: want at least one request per stream cycle, 720 cycles an hour", a)
		}
	}
}

// TestHistoryTiny runs the deep-history configuration at a tiny depth: only
// the archive and Redis memory suites run, their goals are checked, and
// nothing is written under Out.
func TestHistoryTiny(t *testing.T) {
	if _, err := testserver.RedisBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	cfg := History(3000)
	cfg.Dir, cfg.Out, cfg.NoMinIO = t.TempDir(), filepath.Join(t.TempDir(), "out"), true
	r, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Archive == nil || len(r.Archive.Depths) != 1 || r.Archive.Depths[0].Records != 3000 || r.RedisMemory == nil ||
		r.RedisMemory.Archived < 2900 || r.Graft != nil || r.RESP != nil || r.Accept != nil {
		t.Fatalf("suites run: archive %+v, memory %+v, graft %v, resp %v", r.Archive, r.RedisMemory, r.Graft != nil, r.RESP != nil)
	}
	if len(r.Goals) != 2 {
		t.Fatalf("goals %+v, want the merge-read's and the memory's", r.Goals)
	}
	if r.Archive.CacheSize != 1<<30 {
		t.Fatalf("the archive's block cache: %d bytes, want the history run's 1 GiB", r.Archive.CacheSize)
	}
	if _, err := os.Stat(cfg.Out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a partial run wrote under Out: %v", err)
	}
	cfg.Only = []string{"nope"}
	if _, err := Run(t.Context(), cfg); err == nil {
		t.Fatal("an unknown suite ran")
	}
}
