package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// idleEnv is a server over a private Redis (its commands are the
// server's alone) with n archived streams s0…s(n-1) of a window of 2, each
// appended to once and cycled, and a sweep so long that one beat probes
// one idle stream.
type idleEnv struct {
	*env
	q     string
	redis *testserver.Redis
	refs  []names.StreamRef
}

func newIdleEnv(t *testing.T, n int, cfg Config) *idleEnv {
	t.Helper()
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	q := queueName(t)
	var ss []StreamConfig
	for i := range n {
		ss = append(ss, StreamConfig{Name: fmt.Sprintf("s%02d", i), Keep: 2, TrimAfter: "local"})
	}
	cfg.Redis = r.URL
	cfg.Queues = []QueueConfig{{Name: q, Streams: ss}}
	if cfg.Sweep == 0 {
		cfg.Sweep = 1000 * time.Hour // with the beat of an hour: one probe a beat
	}
	e := &idleEnv{env: start(t, cfg), q: q, redis: r}
	for i := range n {
		ref, err := names.ParseStreamRef(q, fmt.Sprintf("s%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		e.refs = append(e.refs, ref)
		e.appendN(i, 1)
	}
	e.srv.Beat(t.Context())
	return e
}

// appendN appends k entries to stream i through the API.
func (e *idleEnv) appendN(i, k int) {
	e.t.Helper()
	var body strings.Builder
	for j := range k {
		fmt.Fprintf(&body, `{"fields":{"j":"%d"}}`+"\n", j)
	}
	if code, out := e.do("POST", "/v1/streams/"+e.q+"/"+e.refs[i].Stream().String(), "", strings.NewReader(body.String())); code != 200 {
		e.t.Fatalf("append to %s: %d %s", e.refs[i], code, out)
	}
}

// xadd appends k entries to stream i by a plain XADD (not through echostore).
func (e *idleEnv) xadd(i, k int) {
	e.t.Helper()
	for j := range k {
		if got := redisDo(e.t, e.redis.URL, "XADD", mq.StreamKey(e.refs[i]), "*", "x", strconv.Itoa(j)); strings.HasPrefix(got, "-") {
			e.t.Fatalf("XADD: %s", got)
		}
	}
}

func (e *idleEnv) live(i int) int64 {
	e.t.Helper()
	n, err := e.srv.live(e.t).Len(e.t.Context(), e.refs[i])
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// commandStats returns Redis's calls per command (INFO commandstats) and
// resets them.
func (e *idleEnv) commandStats() map[string]int {
	e.t.Helper()
	ctx := e.t.Context()
	info, err := testserver.Do(ctx, e.redis.Addr, "INFO", "commandstats")
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := testserver.Do(ctx, e.redis.Addr, "CONFIG", "RESETSTAT"); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// TestBeatIdleStreamsCostNothing: once every archived stream is cycled,
// a beat with nothing new sends Redis the same few commands whether the
// server has 4 archived streams or 24 (the change feed's read, one probe
// script of one stream, the heartbeat): no lease, seam, cycle script or
// XINFO of a cycle per stream.
func TestBeatIdleStreamsCostNothing(t *testing.T) {
	per := map[int]int{}
	for _, n := range []int{4, 24} {
		e := newIdleEnv(t, n, Config{})
		e.srv.Beat(t.Context()) // the appends' own feed entries, if any left
		e.commandStats()
		e.srv.Beat(t.Context())
		stats := e.commandStats()
		total := 0
		for name, c := range stats {
			if name != "info" && name != "config|resetstat" {
				total += c
			}
		}
		t.Logf("%d archived streams: one idle beat sends %d commands: %v", n, total, stats)
		for _, name := range []string{"incr", "hgetall", "hget", "xlen", "sadd", "del"} {
			if stats[name] > 0 {
				t.Errorf("%d idle archived streams: an idle beat sent %s %d times, want none (a cycle's)", n, name, stats[name])
			}
		}
		if stats["xinfo|stream"] > 1 {
			t.Errorf("%d idle archived streams: an idle beat read %d tops, want the sweep's one", n, stats["xinfo|stream"])
		}
		per[n] = total
	}
	if per[24] != per[4] {
		t.Errorf("an idle beat sends %d commands with 4 archived streams and %d with 24: want the same", per[4], per[24])
	}
}

// TestBeatCyclesFedStreams: a stream appended to through echostore is
// cycled by the next beat, whatever the sweep (one idle stream probed a
// beat, the first by name); so is a stream whose memo the beat dropped.
func TestBeatCyclesFedStreams(t *testing.T) {
	e := newIdleEnv(t, 8, Config{})
	last := len(e.refs) - 1
	e.appendN(last, 5)
	if n := e.live(last); n != 6 {
		t.Fatalf("live %d before the beat, want 6", n)
	}
	if got, _ := e.srv.live(t).FeedKeys(t.Context(), mq.DirtyOf(e.refs[last])); !slices.Equal(got, []string{mq.StreamKey(e.refs[last])}) {
		t.Fatalf("the change feed holds %q, want %s", got, e.refs[last])
	}
	e.srv.Beat(t.Context())
	if n := e.live(last); n != 2 {
		t.Fatalf("live %d after the beat, want 2: the appended stream was not cycled", n)
	}
	if got, _ := e.srv.live(t).FeedKeys(t.Context(), mq.DirtyOf(e.refs[last])); len(got) != 0 {
		t.Fatalf("the change feed still holds %q after the beat", got)
	}
}

// TestBeatSweepFindsPlainXADD: entries a plain XADD appends (no change
// feed) are cycled within the sweep: with one stream probed a beat, within
// as many beats as there are streams; and at once with a sweep of no time.
func TestBeatSweepFindsPlainXADD(t *testing.T) {
	const n = 6
	e := newIdleEnv(t, n, Config{})
	last := n - 1 // the last the sweep reaches
	e.xadd(last, 4)
	cycledAt := 0
	for beat := 1; beat <= n && cycledAt == 0; beat++ {
		e.srv.Beat(t.Context())
		if e.live(last) == 2 {
			cycledAt = beat
		}
	}
	if cycledAt == 0 {
		t.Fatalf("a stream appended to by XADD is not cycled within %d beats (the sweep of %d streams, one a beat): live %d", n, n, e.live(last))
	}
	t.Logf("cycled by beat %d of the sweep", cycledAt)
	// Every stream of the share probed once a sweep: a sweep as short as
	// the beat probes every idle stream every beat.
	f := newIdleEnv(t, n, Config{Sweep: time.Nanosecond})
	f.xadd(last, 4)
	f.srv.Beat(t.Context())
	if got := f.live(last); got != 2 {
		t.Fatalf("with a sweep shorter than the beat, a stream appended to by XADD is not cycled by the next beat: live %d", got)
	}
	// An app trim (XTRIM by another client) changes the top too.
	f.xadd(0, 3)
	f.srv.Beat(t.Context())
	redisDo(t, f.redis.URL, "XTRIM", mq.StreamKey(f.refs[0]), "MAXLEN", "1")
	f.xadd(0, 1)
	f.srv.Beat(t.Context())
	if got := f.live(0); got != 2 {
		t.Fatalf("live %d after a plain XADD following an app trim, want 2", got)
	}
}

// TestBeatAgedAndHeldStreamsCycleEveryBeat: a stream whose window counts
// by age is cycled every beat (time alone moves its cut), and so is one
// whose trim a consumer group held back (its acks move the cut).
func TestBeatAgedAndHeldStreamsCycleEveryBeat(t *testing.T) {
	e := newIdleEnv(t, 2, Config{})
	ctx := t.Context()
	// s01's window gets a max_age: declared again, cycled every beat.
	aged := e.refs[1]
	st, _ := e.srv.lookup(aged)
	st.window.MaxAge = time.Hour
	if err := e.srv.declare(st); err != nil {
		t.Fatal(err)
	}
	// s00: a group reads nothing; the trim is held back.
	held := e.refs[0]
	e.appendN(0, 4)
	redisDo(t, e.redis.URL, "XGROUP", "CREATE", mq.StreamKey(held), "g", "0")
	e.srv.Beat(ctx)
	if n := e.live(0); n != 5 {
		t.Fatalf("live %d with a group that read nothing, want 5 (held)", n)
	}
	e.commandStats()
	e.srv.Beat(ctx)
	stats := e.commandStats()
	// Two cycles, each with its lease (INCR of the lease sequence).
	if stats["incr"] < 2 {
		t.Fatalf("a beat took %d leases, want one per stream (2): held and aged streams cycle every beat; %v", stats["incr"], stats)
	}
	// The group goes: the next beat trims, though the top did not move.
	redisDo(t, e.redis.URL, "XGROUP", "DESTROY", mq.StreamKey(held), "g")
	e.srv.Beat(ctx)
	if n := e.live(0); n != 2 {
		t.Fatalf("live %d after the group acked all, want 2", n)
	}
}

// TestBeatTwoNodesShareTheFeed: two servers on one Redis share the
// archived streams of a queue and its change feed: each beat takes out of
// the feed only the streams of its own share, so each node cycles its
// share's appended streams on its next beat, whichever node beats first.
func TestBeatTwoNodesShareTheFeed(t *testing.T) {
	ctx := t.Context()
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	q := queueName(t)
	rdir := t.TempDir()
	const n = 8
	var ss []StreamConfig
	refs := make([]names.StreamRef, n)
	for i := range n {
		ss = append(ss, StreamConfig{Name: fmt.Sprintf("s%d", i), Keep: 2, TrimAfter: "remote"})
		if refs[i], err = names.ParseStreamRef(q, fmt.Sprintf("s%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := func() Config {
		return Config{Redis: r.URL, Remote: "file://" + filepath.Join(rdir, "remote"), Sweep: 1000 * time.Hour,
			Queues: []QueueConfig{{Name: q, Streams: ss}}}
	}
	a := start(t, cfg())
	// a alone first: it cycles every stream (its memos of b's share-to-be
	// are of a membership that comes back once b leaves).
	for i := range n {
		if code, out := a.do("POST", "/v1/streams/"+q+"/"+refs[i].Stream().String(), "", strings.NewReader(`{"fields":{"j":"0"}}`)); code != 200 {
			t.Fatalf("append: %d %s", code, out)
		}
	}
	a.srv.beatNow(ctx)
	a.srv.beatNow(ctx)
	b := start(t, cfg())
	// Both see both (each beat heartbeats; the second reads the other).
	for _, e := range []*env{a, b, a, b} {
		e.srv.beatNow(ctx)
	}
	nodes := []string{a.srv.NodeID(), b.srv.NodeID()}
	shares := map[string]int{}
	for _, ref := range refs {
		shares[echostore.ShareOf(nodes, ref)]++
	}
	if shares[nodes[0]] == 0 || shares[nodes[1]] == 0 {
		t.Skipf("the streams all fell to one node (%v); the test needs both shares", shares)
	}
	appendAll := func(k int) {
		for i := range n {
			var body strings.Builder
			for j := range k {
				fmt.Fprintf(&body, `{"fields":{"j":"%d"}}`+"\n", j)
			}
			if code, out := a.do("POST", "/v1/streams/"+q+"/"+refs[i].Stream().String(), "", strings.NewReader(body.String())); code != 200 {
				t.Fatalf("append: %d %s", code, out)
			}
		}
	}
	appendAll(1)
	a.srv.beatNow(ctx)
	b.srv.beatNow(ctx)
	appendAll(5) // every stream through a
	feed := mq.DirtyOf(refs[0])
	a.srv.beatNow(ctx)
	left, err := a.srv.live(t).FeedKeys(ctx, feed)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	var want []string
	for _, ref := range refs {
		if echostore.ShareOf(nodes, ref) == nodes[1] {
			want = append(want, mq.StreamKey(ref))
		}
	}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("after a's beat the feed holds %q, want b's share %q", left, want)
	}
	b.srv.beatNow(ctx)
	for _, ref := range refs {
		if got, err := a.srv.live(t).Len(ctx, ref); err != nil || got != 2 {
			t.Errorf("%s (share of %s): live %d after both beats (%v), want 2", ref, echostore.ShareOf(nodes, ref)[:6], got, err)
		}
	}
	if left, _ := a.srv.live(t).FeedKeys(ctx, feed); len(left) != 0 {
		t.Errorf("after both beats the feed holds %q", left)
	}
	// b leaves: a takes over b's share, idle as it is, on its next beat
	// (a new membership: no memo holds).
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	before := cyclesOf(a.srv, refs)
	a.srv.beatNow(ctx)
	after := cyclesOf(a.srv, refs)
	for i, ref := range refs {
		if after[i] <= before[i] {
			t.Errorf("%s not cycled by a after b left (cycles %v → %v)", ref, before[i], after[i])
		}
	}
}

// cyclesOf returns the successful archive cycles of each of refs on srv.
func cyclesOf(srv *Server, refs []names.StreamRef) []float64 {
	out := make([]float64, len(refs))
	for i, ref := range refs {
		q, st := refLabels(ref)
		out[i] = testutil.ToFloat64(srv.m.cycles.WithLabelValues(q, st, "archive", "ok"))
	}
	return out
}
