package echostore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// replayFixture is a node with a stream of n records {"n": i, "k": "v<i>"}
// of which all but the newest keep are archived.
type replayFixture struct {
	node *echostore.Node
	ref  names.StreamRef
	ids  []xid.ID
	rdb  *goredis.Client // a client nobody here wrote
}

func newReplayFixture(t *testing.T, q string, n, keep int) *replayFixture {
	t.Helper()
	ctx := testCtx(t)
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL})
	ref, err := names.ParseStreamRef(q, "orders")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([][]echostore.Field, n)
	for i := range recs {
		recs[i] = []echostore.Field{{Name: "n", Value: strconv.Itoa(i)}, {Name: "k", Value: "v" + strconv.Itoa(i)}}
	}
	if _, err := node.Append(ctx, ref, recs); err != nil {
		t.Fatal(err)
	}
	res, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: int64(keep)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded != int64(n-keep) || res.Trimmed != int64(n-keep) {
		t.Fatalf("cycle: %+v, want %d folded and trimmed", res, n-keep)
	}
	f := &replayFixture{node: node, ref: ref}
	for rec, err := range node.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		f.ids = append(f.ids, rec.ID)
	}
	if len(f.ids) != n {
		t.Fatalf("merge-read: %d records, want %d", len(f.ids), n)
	}
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	f.rdb = goredis.NewClient(opt)
	t.Cleanup(func() { f.rdb.Close() })
	return f
}

// replay replays [ids[lo], ids[hi]] into key.
func (f *replayFixture) replay(ctx context.Context, lo, hi int, key string, mod func(*echostore.ReplayOptions)) (echostore.ReplayResult, error) {
	opts := echostore.ReplayOptions{From: f.ids[lo], To: f.ids[hi], Into: key, Rate: 1e6}
	if mod != nil {
		mod(&opts)
	}
	return f.node.Replay(ctx, f.ref, opts)
}

// checkTarget checks that key holds exactly the records ids[lo..hi], in
// order, under their Redis ids, each once.
func (f *replayFixture) checkTarget(t *testing.T, key string, lo, hi int) {
	t.Helper()
	msgs, err := f.rdb.XRange(testCtx(t), key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != hi-lo+1 {
		t.Fatalf("%s holds %d entries, want %d", key, len(msgs), hi-lo+1)
	}
	for i, m := range msgs {
		checkMessage(t, m, f.ids[lo+i], lo+i)
	}
}

// checkMessage checks that m is record i of the fixture under id.
func checkMessage(t *testing.T, m goredis.XMessage, id xid.ID, i int) {
	t.Helper()
	if m.ID != id.String() {
		t.Fatalf("entry %s, want %s (record %d)", m.ID, id.String(), i)
	}
	if len(m.Values) != 2 || m.Values["n"] != strconv.Itoa(i) || m.Values["k"] != "v"+strconv.Itoa(i) {
		t.Fatalf("entry %s: fields %v, want n=%d k=v%d", m.ID, m.Values, i, i)
	}
}

// TestReplayConsumerGroup: a range of an archived stream replayed into a
// new key is read by a new consumer group with plain XREADGROUP: exactly
// the range, with the original ids and fields; a second replay adds
// nothing.
func TestReplayConsumerGroup(t *testing.T) {
	ctx := testCtx(t)
	f := newReplayFixture(t, "rpgroup", 100, 10)
	st, err := f.node.Status(ctx, f.ref)
	if err != nil || st.Archived != 90 || st.Live != 10 {
		t.Fatalf("status %+v, %v: want 90 archived, 10 live", st, err)
	}
	key := "orders-replay-rpgroup"
	// 20..94: from deep in the archive across the seam into the live tail.
	res, err := f.replay(ctx, 20, 94, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := f.ids[94].String()
	if res.Into != key || res.Copied != 75 || !res.Done || res.ResumedAfter != nil || res.Last == nil || *res.Last != last {
		t.Fatalf("replay: %+v, want 75 copied, done, last %s", res, last)
	}
	if err := f.rdb.XGroupCreate(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := f.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: 1000, Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Messages) != 75 {
		t.Fatalf("XREADGROUP: %d streams, want 1 with 75 messages", len(got))
	}
	for i, m := range got[0].Messages {
		checkMessage(t, m, f.ids[20+i], 20+i)
	}

	// Again: nothing is added, and the group has nothing new.
	res, err = f.replay(ctx, 20, 94, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Copied != 0 || !res.Done || res.ResumedAfter == nil || *res.ResumedAfter != last || res.Last != nil {
		t.Fatalf("second replay: %+v, want nothing copied, resumed after %s", res, last)
	}
	f.checkTarget(t, key, 20, 94)
	more, err := f.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: 1000, Block: -1}).Result()
	if !errors.Is(err, goredis.Nil) || len(more) != 0 {
		t.Fatalf("XREADGROUP after the second replay: %v, %v; want nothing", more, err)
	}

	// A later range extends the target: the group reads only the new part.
	res, err = f.replay(ctx, 20, 99, key, nil)
	if err != nil || res.Copied != 5 || *res.ResumedAfter != last {
		t.Fatalf("extended replay: %+v, %v; want 5 copied after %s", res, err, last)
	}
	got, err = f.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: 1000, Block: -1}).Result()
	if err != nil || len(got) != 1 || len(got[0].Messages) != 5 {
		t.Fatalf("XREADGROUP of the extension: %v, %v; want 5 messages", got, err)
	}
	for i, m := range got[0].Messages {
		checkMessage(t, m, f.ids[95+i], 95+i)
	}
}

// countingLimiter records the n of each WaitN and lets it through; with
// cancelAfter > 0 it cancels the replay's context instead of letting more
// than that many records through.
type countingLimiter struct {
	mu          sync.Mutex
	calls       []int
	cancelAfter int
	cancel      context.CancelFunc
	// cancelInFlight cancels at the first wait and lets the write go on,
	// as a shutdown landing while the first batch is in flight does.
	cancelInFlight bool
}

func (l *countingLimiter) WaitN(ctx context.Context, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	total := n
	for _, c := range l.calls {
		total += c
	}
	if l.cancelInFlight {
		l.cancel()
		l.calls = append(l.calls, n)
		return nil
	}
	if l.cancelAfter > 0 && total > l.cancelAfter {
		l.cancel() // as an interrupt would, between two batches
		return ctx.Err()
	}
	l.calls = append(l.calls, n)
	return nil
}

// TestReplayLimiter: every batch waits on the limiter for its records
// before it is written, batches are a tenth of a second's worth of the
// rate, and the waits add up to the records copied.
func TestReplayLimiter(t *testing.T) {
	ctx := testCtx(t)
	f := newReplayFixture(t, "rplimit", 60, 5)
	lim := &countingLimiter{}
	var progress []int64
	res, err := f.replay(ctx, 3, 50, "orders-replay-rplimit", func(o *echostore.ReplayOptions) {
		o.Rate, o.Limiter = 50, lim // batches of 5
		o.Progress = func(p echostore.ReplayProgress) { progress = append(progress, p.Copied) }
	})
	if err != nil || res.Copied != 48 {
		t.Fatalf("replay: %+v, %v; want 48 copied", res, err)
	}
	want := []int{5, 5, 5, 5, 5, 5, 5, 5, 5, 3}
	if fmt.Sprint(lim.calls) != fmt.Sprint(want) {
		t.Fatalf("limiter waits %v, want %v", lim.calls, want)
	}
	if fmt.Sprint(progress) != "[5 10 15 20 25 30 35 40 45 48]" {
		t.Fatalf("progress %v, want every batch", progress)
	}
	f.checkTarget(t, "orders-replay-rplimit", 3, 50)

	// The default rate paces too (a token bucket): a replay without a
	// limiter of its own still copies in batches of at most MaxReplayBatch.
	res, err = f.replay(ctx, 0, 59, "orders-replay-rplimit-default", func(o *echostore.ReplayOptions) { o.Rate = 0 })
	if err != nil || res.Copied != 60 {
		t.Fatalf("replay at the default rate: %+v, %v", res, err)
	}
}

// TestReplayResume: a replay cancelled mid-way, and one cut short by
// Limit, go on where they stopped when run again: the target ends with the
// whole range, no gap, no duplicate.
func TestReplayResume(t *testing.T) {
	f := newReplayFixture(t, "rpresume", 80, 10)
	key := "orders-replay-rpresume"
	cctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	lim := &countingLimiter{cancelAfter: 20, cancel: cancel}
	res, err := f.replay(cctx, 10, 69, key, func(o *echostore.ReplayOptions) { o.Rate, o.Limiter = 100, lim })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled replay: %+v, %v; want context.Canceled", res, err)
	}
	if res.Done || res.Copied != 20 {
		t.Fatalf("cancelled replay: %+v; want the 20 records of two batches copied", res)
	}
	n, err := f.rdb.XLen(testCtx(t), key).Result()
	if err != nil || n != res.Copied {
		t.Fatalf("XLEN %d, %v; want %d (what the result says)", n, err, res.Copied)
	}
	stopped := res.Copied
	res, err = f.replay(testCtx(t), 10, 69, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Copied != 60-stopped || !res.Done || res.ResumedAfter == nil || *res.ResumedAfter != f.ids[10+stopped-1].String() {
		t.Fatalf("resumed replay: %+v; want %d copied after %s", res, 60-stopped, f.ids[10+stopped-1].String())
	}
	f.checkTarget(t, key, 10, 69)

	// Cancelled while its first batch is in flight: nothing is confirmed
	// copied, and the error still says the replay can be run again (the
	// batch may have landed; a run again goes on after it).
	key = "orders-replay-rpresume-inflight"
	cctx, cancel = context.WithCancel(testCtx(t))
	defer cancel()
	res, err = f.replay(cctx, 10, 69, key, func(o *echostore.ReplayOptions) {
		o.Rate, o.Limiter = 100, &countingLimiter{cancelInFlight: true, cancel: cancel}
	})
	if !errors.Is(err, context.Canceled) || res.Done || res.Copied != 0 || !strings.Contains(err.Error(), "run it again") {
		t.Fatalf("replay cancelled in flight: %+v, %v; want context.Canceled, 0 confirmed and the advice to run it again", res, err)
	}
	if res, err = f.replay(testCtx(t), 10, 69, key, nil); err != nil || !res.Done {
		t.Fatalf("run again: %+v, %v", res, err)
	}
	f.checkTarget(t, key, 10, 69)

	// Limit: 7 at a time.
	key = "orders-replay-rpresume-limit"
	total := int64(0)
	for i := 0; ; i++ {
		res, err := f.replay(testCtx(t), 0, 79, key, func(o *echostore.ReplayOptions) { o.Limit = 7 })
		if err != nil {
			t.Fatal(err)
		}
		total += res.Copied
		if res.Done {
			break
		}
		if res.Copied != 7 || i > 20 {
			t.Fatalf("limited replay %d: %+v; want 7 copied", i, res)
		}
	}
	if total != 80 {
		t.Fatalf("limited replays copied %d, want 80", total)
	}
	f.checkTarget(t, key, 0, 79)
}

// TestReplayRefusals: a target that cannot take the replay, a target with
// other entries in the range, and bad options are refused with typed
// errors before anything is written.
func TestReplayRefusals(t *testing.T) {
	ctx := testCtx(t)
	f := newReplayFixture(t, "rprefuse", 40, 5)
	other, err := names.ParseStreamRef("rprefuse", "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.node.Append(ctx, other, [][]echostore.Field{{{Name: "a", Value: "1"}}, {{Name: "a", Value: "2"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.node.Cycle(ctx, other, echostore.CycleOptions{Window: echostore.Window{Keep: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.Set(ctx, "rprefuse-string", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
		force     bool
		want      error
	}{
		{"the source", "emq:{rprefuse}:stream:orders", true, echostore.ErrReplayTarget},
		{"an archived stream", "emq:{rprefuse}:stream:other", true, echostore.ErrReplayTarget},
		{"echostore's namespace", "emq:{rprefuse}:mine", false, echostore.ErrReplayTarget},
		{"a string", "rprefuse-string", false, echostore.ErrReplayTarget},
		{"a string, forced", "rprefuse-string", true, echostore.ErrReplayTarget},
		{"a lease, forced", "emq:{rprefuse}:stream:m:lease", true, echostore.ErrReplayTarget},
		{"a seam cache, forced", "emq:{rprefuse}:stream:m:archived", true, echostore.ErrReplayTarget},
		{"a job stream, forced", "emq:{rprefuse}:jobs", true, echostore.ErrReplayTarget},
		{"a key of the namespace, forced", "emq:{rprefuse}:mine", true, echostore.ErrReplayTarget},
		{"no key", "", false, echostore.ErrInvalid},
	} {
		res, err := f.replay(ctx, 0, 39, tc.key, func(o *echostore.ReplayOptions) { o.Force = tc.force })
		if !errors.Is(err, tc.want) || res.Copied != 0 {
			t.Errorf("%s: %+v, %v; want %v", tc.name, res, err, tc.want)
		}
	}
	if n, _ := f.rdb.XLen(ctx, "emq:{rprefuse}:stream:other").Result(); n != 1 {
		t.Errorf("the archived stream holds %d entries, want its 1", n)
	}
	if v, _ := f.rdb.Get(ctx, "rprefuse-string").Result(); v != "x" {
		t.Errorf("the string is %q, want it untouched", v)
	}
	if n, _ := f.rdb.Exists(ctx, "emq:{rprefuse}:mine").Result(); n != 0 {
		t.Errorf("the namespace key was created")
	}
	// Forced, a stream of a queue that is not archived: echostore's own
	// stream, which its cycles may then archive.
	if res, err := f.replay(ctx, 0, 4, "emq:{rprefuse}:stream:copy", func(o *echostore.ReplayOptions) { o.Force = true }); err != nil || res.Copied != 5 {
		t.Errorf("forced replay into a stream of a queue: %+v, %v", res, err)
	}
	for _, k := range []string{"emq:{rprefuse}:stream:m:lease", "emq:{rprefuse}:stream:m:archived", "emq:{rprefuse}:jobs"} {
		if n, _ := f.rdb.Exists(ctx, k).Result(); n != 0 {
			t.Errorf("a refused forced replay created %s", k)
		}
	}

	for _, tc := range []struct {
		name string
		mod  func(*echostore.ReplayOptions)
	}{
		{"from above to", func(o *echostore.ReplayOptions) { o.From, o.To = f.ids[5], f.ids[4] }},
		{"a negative rate", func(o *echostore.ReplayOptions) { o.Rate = -1 }},
		{"a negative limit", func(o *echostore.ReplayOptions) { o.Limit = -1 }},
	} {
		if _, err := f.replay(ctx, 0, 39, "rprefuse-bad", tc.mod); !errors.Is(err, echostore.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}

	// Another producer's entry in the range: refused, nothing written.
	key := "rprefuse-foreign"
	if err := f.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: key, ID: f.ids[30].String(), Values: []string{"mine", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := f.replay(ctx, 20, 39, key, nil)
	if !errors.Is(err, echostore.ErrReplayConflict) || res.Copied != 0 {
		t.Fatalf("foreign entry above from: %+v, %v; want ErrReplayConflict", res, err)
	}
	if n, _ := f.rdb.XLen(ctx, key).Result(); n != 1 {
		t.Fatalf("the conflicting target holds %d entries, want its 1", n)
	}
	// Entries below the range are no conflict: the range goes above them.
	if res, err := f.replay(ctx, 31, 39, key, nil); err != nil || res.Copied != 9 {
		t.Fatalf("range above the foreign entry: %+v, %v", res, err)
	}

	// The first id is ours but the newest entry in the range is not.
	key = "rprefuse-top"
	if res, err := f.replay(ctx, 0, 9, key, nil); err != nil || res.Copied != 10 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if err := f.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: key, ID: f.ids[12].String(), Values: []string{"n", "twelve"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if res, err := f.replay(ctx, 0, 39, key, nil); !errors.Is(err, echostore.ErrReplayConflict) || res.Copied != 0 {
		t.Fatalf("foreign newest entry: %+v, %v; want ErrReplayConflict", res, err)
	}
	if n, _ := f.rdb.XLen(ctx, key).Result(); n != 11 {
		t.Fatalf("the conflicting target holds %d entries, want 11", n)
	}

	// An empty range creates nothing.
	after, _ := f.ids[39].Next()
	res, err = f.node.Replay(ctx, f.ref, echostore.ReplayOptions{From: after, Into: "rprefuse-empty"})
	if err != nil || res.Copied != 0 || !res.Done {
		t.Fatalf("empty range: %+v, %v", res, err)
	}
	if n, _ := f.rdb.Exists(ctx, "rprefuse-empty").Result(); n != 0 {
		t.Fatal("an empty range created the target")
	}
}

// TestReplayOnCluster: on a 3-master Redis Cluster, a range of a stream
// (its keys in the slot of {Q}) replayed into a key of another slot is read
// by a new consumer group with XREADGROUP, and a second replay adds
// nothing.
func TestReplayOnCluster(t *testing.T) {
	ctx := testCtx(t)
	cl, err := testserver.StartCluster(ctx, 3)
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { cl.Stop() })
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: "redis://" + strings.Join(cl.Addrs, ",")})
	ref, err := names.ParseStreamRef("shop", "orders")
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]echostore.Field
	for i := range 50 {
		recs = append(recs, []echostore.Field{{Name: "n", Value: strconv.Itoa(i)}, {Name: "k", Value: "v" + strconv.Itoa(i)}})
	}
	app, err := node.Append(ctx, ref, recs)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 5}}); err != nil || res.Folded != 45 {
		t.Fatalf("cycle: %+v, %v", res, err)
	}
	ids := make([]xid.ID, len(app.IDs))
	for i, s := range app.IDs {
		if ids[i], err = mq.ParseID(s, false); err != nil {
			t.Fatal(err)
		}
	}
	rdb := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs})
	t.Cleanup(func() { rdb.Close() })
	const key = "orders-replay"
	if rdb.ClusterKeySlot(ctx, key).Val() == rdb.ClusterKeySlot(ctx, "{shop}").Val() {
		t.Fatal("the target shares the source's slot: pick another key")
	}
	opts := echostore.ReplayOptions{From: ids[10], To: ids[47], Into: key, Rate: 1e6}
	res, err := node.Replay(ctx, ref, opts)
	if err != nil || res.Copied != 38 || !res.Done {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if err := rdb.XGroupCreate(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: 1000, Block: -1}).Result()
	if err != nil || len(got) != 1 || len(got[0].Messages) != 38 {
		t.Fatalf("XREADGROUP: %v, %v; want 38 messages", got, err)
	}
	for i, m := range got[0].Messages {
		checkMessage(t, m, ids[10+i], 10+i)
	}
	if res, err := node.Replay(ctx, ref, opts); err != nil || res.Copied != 0 {
		t.Fatalf("second replay: %+v, %v", res, err)
	}
	if n, err := rdb.XLen(ctx, key).Result(); err != nil || n != 38 {
		t.Fatalf("XLEN %d, %v; want 38", n, err)
	}
}

// TestReplayKeyStream: the source of a replay may be a stream at an
// application's own key. Its records, XADDed by the application with *
// ids and mostly archived by a cycle, are copied into a new key under
// their original Redis ids, fields as the application wrote them, and a
// new consumer group reads exactly them; a second run copies nothing. The
// target is refused, before anything is written, when it is the source
// key itself or another archived key stream (of a replay of a key stream
// and of a stream of a queue alike).
func TestReplayKeyStream(t *testing.T) {
	ctx := testCtx(t)
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL})
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	const key, other, into = "rpkey-orders", "rpkey-other", "rpkey-replay"
	rdb.Del(ctx, key, other, into)
	var want []goredis.XMessage
	for i := range 60 {
		vals := map[string]any{"n": strconv.Itoa(i), "v": "a\x00b\r\n" + strings.Repeat("é", i)}
		id, err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: key, ID: "*", Values: vals}).Result()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, goredis.XMessage{ID: id, Values: vals})
	}
	for _, k := range []string{other} {
		if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: k, ID: "*", Values: []string{"a", "1"}}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: k, ID: "*", Values: []string{"a", "2"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := names.ParseKeyRef(key)
	if err != nil {
		t.Fatal(err)
	}
	otherRef, err := names.ParseKeyRef(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []names.StreamRef{ref, otherRef} {
		if _, err := node.Cycle(ctx, r, echostore.CycleOptions{Window: echostore.Window{Keep: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := rdb.XLen(ctx, key).Result(); n != 1 {
		t.Fatalf("%s holds %d live entries after the cycle, want 1", key, n)
	}
	from, err := xid.Parse(want[10].ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := node.Replay(ctx, ref, echostore.ReplayOptions{From: from, Into: into, Rate: 1e6})
	if err != nil || res.Copied != 50 || !res.Done || res.Last == nil || *res.Last != want[59].ID {
		t.Fatalf("replay: %+v, %v; want 50 copied, the last %s", res, err, want[59].ID)
	}
	if err := rdb.XGroupCreate(ctx, into, "audit", "0").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "audit", Consumer: "c1", Streams: []string{into, ">"}, Count: 100}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Messages) != 50 {
		t.Fatalf("the group read %v, want 50 entries", got)
	}
	for i, m := range got[0].Messages {
		w := want[10+i]
		if m.ID != w.ID || len(m.Values) != 2 || m.Values["n"] != w.Values["n"] || m.Values["v"] != w.Values["v"] {
			t.Fatalf("entry %d: %s %q, want %s %q", i, m.ID, m.Values, w.ID, w.Values)
		}
	}
	if res, err := node.Replay(ctx, ref, echostore.ReplayOptions{From: from, Into: into}); err != nil || res.Copied != 0 || !res.Done {
		t.Errorf("second replay: %+v, %v; want nothing copied", res, err)
	}

	queue, err := names.ParseStreamRef("rpkey", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Append(ctx, queue, [][]echostore.Field{{{Name: "a", Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		src  names.StreamRef
		into string
	}{
		{"the source key", ref, key},
		{"the source key, forced", ref, key},
		{"another archived key stream", ref, other},
		{"an archived key stream, from a queue's stream", queue, other},
		{"an archived key stream, from a queue's stream, forced", queue, key},
	} {
		res, err := node.Replay(ctx, tc.src, echostore.ReplayOptions{Into: tc.into, Force: strings.HasSuffix(tc.name, "forced")})
		if !errors.Is(err, echostore.ErrReplayTarget) || res.Copied != 0 {
			t.Errorf("%s: %+v, %v; want ErrReplayTarget", tc.name, res, err)
		}
	}
	for k, n := range map[string]int64{key: 1, other: 1} {
		if got, _ := rdb.XLen(ctx, k).Result(); got != n {
			t.Errorf("%s holds %d entries, want its %d live", k, got, n)
		}
	}
}

// TestReplayForeignEntries: entries another producer XADDed into the
// source (an id before the branded range, repeated names, bytes that are
// not UTF-8, an id past it) are records like any other: a replay copies
// them byte for byte under their ids, archived and live alike.
func TestReplayForeignEntries(t *testing.T) {
	ctx := testCtx(t)
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL})
	ref, err := names.ParseStreamRef("rpforeign", "orders")
	if err != nil {
		t.Fatal(err)
	}
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	key := mq.StreamKey(ref)
	if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: key, ID: "1-1", Values: []string{"a", "1", "a", "2"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Append(ctx, ref, [][]echostore.Field{{{Name: "n", Value: "1"}}, {{Name: "n", Value: "2"}}}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: key, ID: "9999999999999-99999999", Values: []string{"bin", "\xff\xfe\x00"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}}); err != nil {
		t.Fatal(err)
	}
	want, err := rdb.XRange(ctx, key, "-", "+").Result()
	if err != nil || len(want) != 1 {
		t.Fatalf("live after the cycle: %v, %v; want the one kept", want, err)
	}
	res, err := node.Replay(ctx, ref, echostore.ReplayOptions{Into: "rpforeign-copy", Rate: 1e6})
	if err != nil || res.Copied != 4 || !res.Done {
		t.Fatalf("replay: %+v, %v; want 4 copied", res, err)
	}
	got, err := rdb.Do(ctx, "XRANGE", "rpforeign-copy", "-", "+").Slice()
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []string{"1-1", "", "", "9999999999999-99999999"}
	if len(got) != 4 {
		t.Fatalf("the copy holds %d entries, want 4", len(got))
	}
	for i, e := range got {
		ent := e.([]any)
		if wantIDs[i] != "" && ent[0] != wantIDs[i] {
			t.Fatalf("entry %d: id %v, want %s", i, ent[0], wantIDs[i])
		}
	}
	first := fmt.Sprint(got[0].([]any)[1])
	last := got[3].([]any)[1].([]any)
	if first != "[a 1 a 2]" || last[0] != "bin" || last[1] != "\xff\xfe\x00" {
		t.Fatalf("fields: first %s, last %q; want the repeated names and the bytes as written", first, last)
	}
}
