package archive

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

// groupClient is an application's own client (go-redis) on the stream's
// key: what its consumer group reads with.
func groupClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// readGroup reads up to n new entries as consumer c of group g and
// returns their ids.
func readGroup(t testing.TB, rdb *redis.Client, key, g, c string, n int64) []string {
	t.Helper()
	res, err := rdb.XReadGroup(testCtx(t), &redis.XReadGroupArgs{Group: g, Consumer: c, Streams: []string{key, ">"}, Count: n, Block: -1}).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatalf("XREADGROUP %s %s: %v", g, c, err)
	}
	var out []string
	for _, m := range res[0].Messages {
		out = append(out, m.ID)
	}
	return out
}

// redisIDs renders ids as Redis ids.
func redisIDs(ids []brand.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.RedisID()
	}
	return out
}

// liveLen returns the length of e's live stream.
func (e *env) liveLen(ctx context.Context) int64 {
	n, err := e.live.Len(ctx, e.ref())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A group that reads a few entries and stops holds the trim back: the
// stream grows cycle after cycle, and the cycle says so (the alarm); once
// the group reads on and acknowledges, the alarm clears and the stream is
// bounded again.
func TestStalledGroupHold(t *testing.T) {
	ctx := testCtx(t)
	r := servers.Redis(t)
	e := newEnv(t, r.URL, Options{})
	rdb := groupClient(t, r.URL)
	key := mq.StreamKey(e.ref())
	all := e.append(ctx, 20)
	if err := rdb.XGroupCreate(ctx, key, "billing", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if got := readGroup(t, rdb, key, "billing", "c1", 3); !slices.Equal(got, redisIDs(all[:3])) {
		t.Fatalf("first read: %v", got)
	}
	w := Window{Keep: 5, Groups: GroupLimits{MaxLive: 10}}
	for round := range 3 {
		res, err := e.a.Cycle(ctx, e.ref(), w)
		if err != nil {
			t.Fatal(err)
		}
		if res.Trimmed != 0 || res.CappedBy != "billing (pending)" {
			t.Fatalf("round %d: cycle %+v, want no trim, capped by billing's pending entries", round, res)
		}
		if n := e.liveLen(ctx); n != int64(len(all)) {
			t.Fatalf("round %d: live %d entries, want all %d kept", round, n, len(all))
		}
		if len(res.Stalled) != 1 {
			t.Fatalf("round %d: stalled %+v, want billing", round, res.Stalled)
		}
		g := res.Stalled[0]
		held := int64(len(all) - 5) // beyond the window's cut
		if g.Group != "billing" || g.Pending != 3 || g.Hold != all[0].RedisID() || g.Oldest != all[0].RedisID() ||
			g.LastDelivered != all[2].RedisID() || g.Held != held || g.Reason != ReasonMaxLive || g.Passed ||
			g.Lag == nil || *g.Lag != int64(len(all)-3) {
			t.Fatalf("round %d: stalled group %+v (lag %v), want billing holding %d from %s", round, g, g.Lag, held, all[0].RedisID())
		}
		at, st, err := StalledGroups(ctx, e.live, e.ref())
		if err != nil || len(st) != 1 || st[0].Group != "billing" || st[0].Held != held || at.IsZero() {
			t.Fatalf("round %d: StalledGroups = %v, %+v, %v", round, at, st, err)
		}
		all = append(all, e.append(ctx, 10)...)
	}
	e.audit(ctx, all)

	// The group reads on and acknowledges everything: the alarm clears.
	got := readGroup(t, rdb, key, "billing", "c1", 1000)
	if len(got) != len(all)-3 {
		t.Fatalf("resumed read: %d entries, want %d", len(got), len(all)-3)
	}
	if err := rdb.XAck(ctx, key, "billing", redisIDs(all)...).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Cycle(ctx, e.ref(), w)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stalled) != 0 || res.CappedBy != "" || e.liveLen(ctx) != 5 {
		t.Fatalf("after the group resumed: %+v, live %d; want no stalled group and 5 live", res, e.liveLen(ctx))
	}
	if _, st, err := StalledGroups(ctx, e.live, e.ref()); err != nil || len(st) != 0 {
		t.Fatalf("StalledGroups after the group resumed = %+v, %v", st, err)
	}
	e.audit(ctx, all)
}

// A group within its limits holds the trim back without an alarm; the age
// limit fires on its own (a clock two hours on, the default MaxHold of 1h
// for a window without MaxAge).
func TestStalledGroupLimits(t *testing.T) {
	ctx := testCtx(t)
	r := servers.Redis(t)
	var clock atomicClock
	clock.set(time.Now())
	e := newEnv(t, r.URL, Options{Clock: clock.now})
	rdb := groupClient(t, r.URL)
	key := mq.StreamKey(e.ref())
	all := e.append(ctx, 20)
	if err := rdb.XGroupCreate(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	readGroup(t, rdb, key, "g", "c", 3)
	w := Window{Keep: 5} // MaxLive 50, MaxHold 1h by default
	res, err := e.a.Cycle(ctx, e.ref(), w)
	if err != nil || len(res.Stalled) != 0 || res.CappedBy != "g (pending)" {
		t.Fatalf("a group within its limits: %+v, %v", res, err)
	}
	clock.set(time.Now().Add(2 * time.Hour))
	res, err = e.a.Cycle(ctx, e.ref(), w)
	if err != nil || len(res.Stalled) != 1 || res.Stalled[0].Reason != ReasonMaxHold || res.Stalled[0].Age < 2*time.Hour-time.Minute {
		t.Fatalf("a group past MaxHold: %+v, %v", res, err)
	}
	// Both limits off: no alarm, however old.
	off := Window{Keep: 5, Groups: GroupLimits{MaxLive: -1, MaxHold: -1}}
	if res, err = e.a.Cycle(ctx, e.ref(), off); err != nil || len(res.Stalled) != 0 {
		t.Fatalf("limits off: %+v, %v", res, err)
	}
	// An undelivered backlog counts too: a second group that never read.
	if err := rdb.XGroupCreate(ctx, key, "idle", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err = e.a.Cycle(ctx, e.ref(), Window{Keep: 5, Groups: GroupLimits{MaxLive: 2, MaxHold: -1}})
	if err != nil || len(res.Stalled) != 2 {
		t.Fatalf("two stalled groups: %+v, %v", res, err)
	}
	for _, g := range res.Stalled {
		if g.Held != 15 || g.HeldMore || g.Reason != ReasonMaxLive {
			t.Fatalf("stalled %+v: want 15 held", g)
		}
	}
	// The count stops at its limit.
	if n, first, err := countHeld(ctx, e.live, key, all[0].RedisID(), all[15].RedisID(), 4); err != nil || n != 4 || first != all[0].RedisID() {
		t.Fatalf("countHeld to 4 = %d, %s, %v", n, first, err)
	}
	if n, _, err := countHeld(ctx, e.live, key, "("+all[0].RedisID(), all[15].RedisID(), 100); err != nil || n != 14 {
		t.Fatalf("countHeld of 14 = %d, %v", n, err)
	}
	e.audit(ctx, all)
}

// Under stalled_groups: archive the cycle trims past a stalled group's
// entries, never past W's successor; a merge-read still returns every
// record; the group's consumers see deleted ids in their pending entries
// list, and a group within its limits still caps the trim.
func TestStalledGroupArchive(t *testing.T) {
	ctx := testCtx(t)
	r := servers.Redis(t)
	e := newEnv(t, r.URL, Options{})
	rdb := groupClient(t, r.URL)
	key := mq.StreamKey(e.ref())
	all := e.append(ctx, 30)
	for _, g := range []string{"stuck", "lagging"} {
		if err := rdb.XGroupCreate(ctx, key, g, "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	stuck := readGroup(t, rdb, key, "stuck", "c1", 4) // pending 0..3, then stops
	readGroup(t, rdb, key, "lagging", "c1", 22)       // pending 0..21
	if err := rdb.XAck(ctx, key, "lagging", redisIDs(all[:20])...).Err(); err != nil {
		t.Fatal(err)
	}
	// lagging holds 20..24 beyond the cut (25): within MaxLive 10.
	w := Window{Keep: 5, Groups: GroupLimits{MaxLive: 10, Stalled: StalledArchive}}
	res, err := e.a.Cycle(ctx, e.ref(), w)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stalled) != 1 || res.Stalled[0].Group != "stuck" || !res.Stalled[0].Passed {
		t.Fatalf("stalled %+v, want stuck, passed", res.Stalled)
	}
	if res.CappedBy != "lagging (pending)" || res.MinXID != all[20].RedisID() || res.Trimmed != 20 {
		t.Fatalf("cycle %+v, want trimmed to lagging's oldest pending entry %s", res, all[20].RedisID())
	}
	e.audit(ctx, all)

	// lagging acknowledges: the trim goes to the window's cut.
	if err := rdb.XAck(ctx, key, "lagging", redisIDs(all[20:22])...).Err(); err != nil {
		t.Fatal(err)
	}
	readGroup(t, rdb, key, "lagging", "c1", 100)
	if err := rdb.XAck(ctx, key, "lagging", redisIDs(all)...).Err(); err != nil {
		t.Fatal(err)
	}
	if res, err = e.a.Cycle(ctx, e.ref(), w); err != nil {
		t.Fatal(err)
	}
	if res.CappedBy != "" || res.MinXID != all[25].RedisID() || e.liveLen(ctx) != 5 {
		t.Fatalf("cycle %+v, live %d; want trimmed to the window's cut", res, e.liveLen(ctx))
	}
	// stuck, passed before, still holds trimmed ids (its pending ones) and
	// 5 live ones below the cut, within MaxLive: it stays stalled (passed)
	// while it does not read on, and is passed again.
	if len(res.Stalled) != 1 || res.Stalled[0].Group != "stuck" || res.Stalled[0].Reason != ReasonPassed || res.Stalled[0].Held != 5 || !res.Stalled[0].Passed {
		t.Fatalf("stalled %+v, want stuck, still passed", res.Stalled)
	}
	e.audit(ctx, all)

	// What stuck's consumers see. Its pending entries list still names the
	// 4 ids it was delivered; their entries are gone from the stream.
	pend, err := rdb.XPending(ctx, key, "stuck").Result()
	if err != nil || pend.Count != 4 || pend.Lower != stuck[0] {
		t.Fatalf("XPENDING stuck = %+v, %v", pend, err)
	}
	// XREADGROUP from 0 (its own history) returns the ids with no fields.
	hist, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "stuck", Consumer: "c1", Streams: []string{key, "0"}, Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range hist[0].Messages {
		if len(m.Values) != 0 {
			t.Fatalf("a trimmed pending entry %s came back with fields %v", m.ID, m.Values)
		}
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, stuck) {
		t.Fatalf("XREADGROUP 0: %v, want the pending ids %v", ids, stuck)
	}
	// XAUTOCLAIM reports them as deleted and drops them from the list.
	msgs, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: key, Group: "stuck", Consumer: "c2", MinIdle: 0, Start: "0-0", Count: 100}).Result()
	if err != nil || len(msgs) != 0 {
		t.Fatalf("XAUTOCLAIM: %v, %v; want no live entry claimed", msgs, err)
	}
	raw3, err := rdb.Do(ctx, "XAUTOCLAIM", key, "stuck", "c2", "0", "0-0", "COUNT", "100").Slice()
	if err != nil || len(raw3) != 3 {
		t.Fatalf("XAUTOCLAIM raw: %v, %v", raw3, err)
	}
	if pend, err = rdb.XPending(ctx, key, "stuck").Result(); err != nil || pend.Count != 0 {
		t.Fatalf("XPENDING stuck after XAUTOCLAIM = %+v, %v; the deleted ids leave the list", pend, err)
	}
	// Its next read resumes at the first live entry: the entries trimmed
	// before it read them are never delivered (the archive serves them).
	got := readGroup(t, rdb, key, "stuck", "c1", 100)
	if !slices.Equal(got, redisIDs(all[25:])) {
		t.Fatalf("stuck's next read: %v, want the live tail %v", got, redisIDs(all[25:]))
	}
	// It read on: the alarm clears.
	all = append(all, e.append(ctx, 3)...)
	if res, err = e.a.Cycle(ctx, e.ref(), w); err != nil || len(res.Stalled) != 0 {
		t.Fatalf("after stuck read on: %+v, %v; want no stalled group", res, err)
	}
	e.audit(ctx, all)
}

// The deleted ids an XAUTOCLAIM reports, as a second form of the same
// check: the reply's third element lists the ids whose entries are gone.
func TestStalledArchiveAutoclaimDeleted(t *testing.T) {
	ctx := testCtx(t)
	r := servers.Redis(t)
	e := newEnv(t, r.URL, Options{})
	rdb := groupClient(t, r.URL)
	key := mq.StreamKey(e.ref())
	all := e.append(ctx, 12)
	if err := rdb.XGroupCreate(ctx, key, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	pending := readGroup(t, rdb, key, "g", "c1", 2)
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 2, Groups: GroupLimits{MaxLive: 1, Stalled: StalledArchive}}); err != nil {
		t.Fatal(err)
	}
	reply, err := rdb.Do(ctx, "XAUTOCLAIM", key, "g", "c2", "0", "0-0").Slice()
	if err != nil || len(reply) != 3 {
		t.Fatalf("XAUTOCLAIM = %v, %v", reply, err)
	}
	var deleted []string
	for _, v := range reply[2].([]any) {
		deleted = append(deleted, v.(string))
	}
	if !slices.Equal(deleted, pending) {
		t.Fatalf("XAUTOCLAIM deleted ids %v, want %v", deleted, pending)
	}
	e.audit(ctx, all)
}

// Whatever groups read, acknowledge and stop, and whichever policy: no
// record is lost (archive ∪ live, merge-read, both directions); under hold
// every entry a group holds stays live; and no trim passes W's successor.
func TestStalledGroupsProperty(t *testing.T) {
	r := servers.Redis(t)
	rdb := groupClient(t, r.URL)
	rapid.Check(t, func(rt *rapid.T) {
		ctx := testCtx(t)
		e := newEnv(t, r.URL, Options{})
		e.t = rt
		key := mq.StreamKey(e.ref())
		var all []brand.ID
		groups := []string{"a", "b"}[:rapid.IntRange(1, 2).Draw(rt, "groups")]
		created := false
		for step := range rapid.IntRange(1, 5).Draw(rt, "steps") {
			_ = step
			if k := rapid.IntRange(0, 30).Draw(rt, "append"); k > 0 {
				all = append(all, e.append(ctx, k)...)
			}
			if !created && len(all) > 0 {
				for _, g := range groups {
					if err := rdb.XGroupCreate(ctx, key, g, "0").Err(); err != nil {
						rt.Fatal(err)
					}
				}
				created = true
			}
			for _, g := range groups {
				if n := rapid.Int64Range(0, 10).Draw(rt, "read"); n > 0 && created {
					got := readGroup(t, rdb, key, g, "c", n)
					if rapid.Bool().Draw(rt, "ack") && len(got) > 0 {
						if err := rdb.XAck(ctx, key, g, got...).Err(); err != nil {
							rt.Fatal(err)
						}
					}
				}
			}
			w := Window{Keep: rapid.Int64Range(1, 10).Draw(rt, "keep"), Groups: GroupLimits{
				MaxLive: rapid.Int64Range(-1, 8).Draw(rt, "maxlive"),
				MaxHold: -1,
				Stalled: StalledPolicy(rapid.IntRange(0, 1).Draw(rt, "policy")),
			}}
			holds := map[string]string{}
			for _, g := range groups {
				if created {
					holds[g] = groupHold(t, rdb, key, g)
				}
			}
			before := e.liveIDs(ctx)
			res, err := e.a.Cycle(ctx, e.ref(), w)
			if err != nil {
				rt.Fatal(err)
			}
			if len(all) == 0 {
				// Nothing was ever appended: the cycle of a stream that
				// does not exist does nothing at all (no volume).
				if !res.Missing {
					rt.Fatalf("a cycle of a stream never written: %+v, want Missing", res)
				}
				continue
			}
			st, err := Frontier(ctx, e.volume(ctx))
			if err != nil {
				rt.Fatal(err)
			}
			passed := map[string]bool{}
			for _, g := range res.Stalled {
				passed[g.Group] = g.Passed
				if g.Passed != (w.Groups.Stalled == StalledArchive) {
					rt.Fatalf("stalled %+v under %v", g, w.Groups.Stalled)
				}
			}
			live := e.liveIDs(ctx)
			for g, hold := range holds {
				if passed[g] {
					continue
				}
				// Every entry at or above the group's hold is still live.
				for _, id := range before {
					if cmpRedisID(id.RedisID(), hold) >= 0 && !slices.Contains(live, id) {
						rt.Fatalf("group %s (hold %s, not passed) lost live entry %s: %+v", g, hold, id.RedisID(), res)
					}
				}
			}
			// Nothing above W was trimmed.
			for _, id := range all {
				if !st.Covers(id.XID()) && !slices.Contains(live, id) {
					rt.Fatalf("unarchived %s trimmed: %+v", id.RedisID(), res)
				}
			}
			e.audit(ctx, all)
		}
	})
}

// groupHold returns the lowest id group g holds: its oldest pending entry,
// or the successor of its last delivered one.
func groupHold(t testing.TB, rdb *redis.Client, key, g string) string {
	t.Helper()
	ctx := testCtx(t)
	infos, err := rdb.XInfoGroups(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.Name != g {
			continue
		}
		ms, seq, _ := strings.Cut(info.LastDeliveredID, "-")
		hold := ms + "-" + incDecimal(seq)
		if p, err := rdb.XPending(ctx, key, g).Result(); err == nil && p.Count > 0 && cmpRedisID(p.Lower, hold) < 0 {
			hold = p.Lower
		}
		return hold
	}
	t.Fatalf("no group %s", g)
	return ""
}

func incDecimal(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

func cmpRedisID(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	cmpDec := func(x, y string) int {
		if len(x) != len(y) {
			if len(x) < len(y) {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	}
	if c := cmpDec(am, bm); c != 0 {
		return c
	}
	return cmpDec(as, bs)
}

func FuzzParseStalled(f *testing.F) {
	f.Add("")
	f.Add(`{"at":1733052000000,"groups":[{"group":"g","pending":3,"last_delivered":"1-2","lag":4,"hold":"1-1","oldest":"1-1","held":15,"age_seconds":1.5,"reason":"max_live","passed":false}]}`)
	f.Add(`{"at":0,"groups":[{"group":""}]}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, s string) {
		at, groups, err := parseStalled(s)
		if err != nil {
			if len(groups) != 0 || !at.IsZero() {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		for _, g := range groups {
			if g.Group == "" || g.Held < 0 || g.Age < 0 {
				t.Fatalf("decoded a bad group %+v", g)
			}
		}
	})
}

// atomicClock is a settable clock for Options.Clock.
type atomicClock struct{ ms atomic.Int64 }

func (c *atomicClock) set(t time.Time) { c.ms.Store(t.UnixMilli()) }
func (c *atomicClock) now() time.Time  { return time.UnixMilli(c.ms.Load()) }
