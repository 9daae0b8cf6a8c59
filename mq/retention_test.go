package mq

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
)

// appendN appends n records to stream s of q, one chunk each, and returns
// their ids.
func appendN(t testing.TB, c *Client, q, s string, n int) []brand.ID {
	t.Helper()
	batch := make([][]Field, n)
	for i := range batch {
		batch[i] = fields("n", strconv.Itoa(i))
	}
	ids, err := c.AppendBatch(testCtx(t), mustRef(t, q, s), batch)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestRetentionKeep(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		ids := appendN(t, c, q, "s", 100)
		r := c.NewRetention(nil)
		if err := r.Declare(mustRef(t, q, "s"), Window{Keep: 30}); err != nil {
			t.Fatal(err)
		}
		if err := r.Declare(mustRef(t, q, "short"), Window{Keep: 30}); err != nil {
			t.Fatal(err)
		}
		appendN(t, c, q, "short", 10)
		reports, err := r.Cycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(reports) != 2 || reports[0].Ref.Stream().String() != "s" || reports[0].Result.Trimmed != 70 || reports[1].Result.Trimmed != 0 {
			t.Fatalf("reports %+v", reports)
		}
		in, _ := c.Info(ctx, mustRef(t, q, "s"))
		if in.Length != 30 || in.First != ids[70] {
			t.Fatalf("after keep 30: %+v, want 30 entries from %v", in, ids[70])
		}
		// Walk from the oldest end when fewer are dropped than kept.
		more := appendN(t, c, q, "s", 5)
		if err := r.Declare(mustRef(t, q, "s"), Window{Keep: 20}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		in, _ = c.Info(ctx, mustRef(t, q, "s"))
		if in.Length != 20 || in.First != ids[85] || in.Last != more[4] {
			t.Fatalf("after keep 20: %+v", in)
		}
		if reports, _ := r.Cycle(ctx); reports[0].Result.Trimmed != 0 {
			t.Fatalf("a second cycle trimmed %d", reports[0].Result.Trimmed)
		}
	})
}

func TestRetentionMaxAge(t *testing.T) {
	c := plain(t, Options{})
	ctx := testCtx(t)
	q := queueName(t)
	t0 := time.Now().Truncate(time.Minute)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	m, _ := brand.NewMinter(0, brand.WithClock(clock))
	c.minter = m
	var ids []brand.ID
	for i := 0; i < 5; i++ { // one record a minute: t0, t0+1m, …, t0+4m
		now.Store(t0.Add(time.Duration(i) * time.Minute).UnixNano())
		ids = append(ids, appendN(t, c, q, "s", 1)...)
	}
	now.Store(t0.Add(4*time.Minute + 30*time.Second).UnixNano())
	r := c.NewRetention(clock)
	r.Declare(mustRef(t, q, "s"), Window{MaxAge: 2 * time.Minute}) // keeps t0+3m, t0+4m
	if _, err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if in, _ := c.Info(ctx, mustRef(t, q, "s")); in.Length != 2 || in.First != ids[3] {
		t.Fatalf("after max age 2m: %+v", in)
	}
	// Both limits: the tighter one wins.
	r.Declare(mustRef(t, q, "s"), Window{MaxAge: time.Hour, Keep: 1})
	if _, err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if in, _ := c.Info(ctx, mustRef(t, q, "s")); in.Length != 1 || in.First != ids[4] {
		t.Fatalf("after keep 1 within an hour: %+v", in)
	}
}

// An archived stream is never trimmed here, by the driver or the
// primitive, so the archive's fold always comes first.
func TestRetentionRefusesArchived(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		ids := appendN(t, c, q, "s", 10)
		appendN(t, c, q, "other", 10)
		// Registered as the archive registers it (archive.RegisterArchived).
		if err := c.rdb.Do(ctx, c.rdb.B().Sadd().Key(ArchivedSetKey(mustQueue(t, q))).Member("s").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		r := c.NewRetention(nil)
		r.Declare(mustRef(t, q, "s"), Window{Keep: 1})
		r.Declare(mustRef(t, q, "other"), Window{Keep: 1})
		reports, err := r.Cycle(ctx)
		if !errors.Is(err, ErrArchived) {
			t.Fatalf("Cycle = %v, want ErrArchived", err)
		}
		if !errors.Is(reports[1].Err, ErrArchived) || reports[0].Err != nil || reports[0].Result.Trimmed != 9 {
			t.Fatalf("reports %+v: want other trimmed, s refused", reports)
		}
		// The primitive's script refuses too (no early check in front of it).
		if _, err := c.TrimMinID(ctx, mustRef(t, q, "s"), ids[9].XID()); !errors.Is(err, ErrArchived) {
			t.Fatalf("TrimMinID on an archived stream = %v, want ErrArchived", err)
		}
		if n, _ := c.Len(ctx, mustRef(t, q, "s")); n != 10 {
			t.Fatalf("archived stream has %d entries, want all 10", n)
		}
	})
}

// Trims stop at the oldest entry a consumer group has pending, and at the
// first one it has not been delivered yet.
func TestTrimNeverPassesConsumerGroups(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		ids := appendN(t, c, q, "s", 20)
		key := StreamKey(mustRef(t, q, "s"))
		do := func(cmd string, args ...string) { // cmd may be two words: "XGROUP CREATE"
			t.Helper()
			if err := c.rdb.Do(ctx, c.rdb.B().Arbitrary(strings.Fields(cmd)...).Keys(key).Args(args...).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		do("XGROUP CREATE", "g", "0")
		do("XGROUP CREATE", "late", "$") // has seen nothing, missed nothing
		// g delivers the first 10 and acknowledges the first 5.
		if err := c.rdb.Do(ctx, c.rdb.B().Xreadgroup().Group("g", "w").Count(10).Streams().Key(key).Id(">").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids[:5] {
			do("XACK", "g", id.RedisID())
		}
		r := c.NewRetention(nil)
		r.Declare(mustRef(t, q, "s"), Window{Keep: 2})
		reports, err := r.Cycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := reports[0].Result
		if res.Trimmed != 5 || res.MinXID != ids[5].RedisID() || res.CappedBy != "g (pending)" {
			t.Fatalf("with 5..9 pending: %+v", res)
		}
		for _, id := range ids[5:10] {
			do("XACK", "g", id.RedisID())
		}
		reports, err = r.Cycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res = reports[0].Result
		if res.Trimmed != 5 || res.MinXID != ids[10].RedisID() || res.CappedBy != "g (undelivered)" {
			t.Fatalf("with 10..19 undelivered: %+v", res)
		}
		if in, _ := c.Info(ctx, mustRef(t, q, "s")); in.Length != 10 || in.First != ids[10] {
			t.Fatalf("stream after the trims: %+v", in)
		}
	})
}

// Run beats Cycle until its context ends.
func TestRetentionRun(t *testing.T) {
	c := plain(t, Options{})
	ctx := testCtx(t)
	q := queueName(t)
	appendN(t, c, q, "s", 10)
	r := c.NewRetention(nil)
	r.Declare(mustRef(t, q, "s"), Window{Keep: 3})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, time.Millisecond) }()
	for { // wait for the beat to have trimmed; bounded by the test's context
		if n, err := c.Len(ctx, mustRef(t, q, "s")); err != nil || n == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("Run never trimmed")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	r.Forget(mustRef(t, q, "s"))
	if reports, err := r.Cycle(ctx); err != nil || len(reports) != 0 {
		t.Fatalf("Cycle after Forget: %+v, %v", reports, err)
	}
}

// cappedtrim passes the groups it is told to pass, and only those; trim-only
// retention passes none. The archive passes stalled groups this way.
func TestCappedTrimPasses(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		ids := appendN(t, c, q, "s", 20)
		key := StreamKey(mustRef(t, q, "s"))
		for _, g := range []string{"stuck", "behind"} {
			if err := c.rdb.Do(ctx, c.rdb.B().XgroupCreate().Key(key).Group(g).Id("0").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		// stuck has 0..1 pending; behind has delivered and acknowledged 0..9.
		for g, n := range map[string]int64{"stuck": 2, "behind": 10} {
			if err := c.rdb.Do(ctx, c.rdb.B().Xreadgroup().Group(g, "w").Count(n).Streams().Key(key).Id(">").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids[:10] {
			if err := c.rdb.Do(ctx, c.rdb.B().Xack().Key(key).Group("behind").Id(id.RedisID()).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		passing := NewScript(`
local pass = {}
for i = 2, #ARGV do pass[ARGV[i]] = true end
return cappedtrim(KEYS[1], ARGV[1], pass)`)
		trim := func(minid string, pass ...string) []string {
			t.Helper()
			r, err := c.Run(ctx, passing, []string{key}, append([]string{minid}, pass...)).Strings()
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if r := trim(ids[15].RedisID()); r[1] != "0" || r[2] != ids[0].RedisID() || r[3] != "stuck (pending)" {
			t.Fatalf("no group passed: %q", r)
		}
		if r := trim(ids[15].RedisID(), "stuck"); r[1] != "10" || r[2] != ids[10].RedisID() || r[3] != "behind (undelivered)" {
			t.Fatalf("stuck passed: %q", r)
		}
		if r := trim(ids[15].RedisID(), "stuck", "behind"); r[1] != "5" || r[2] != ids[15].RedisID() || r[3] != "" {
			t.Fatalf("both passed: %q", r)
		}
	})
}
