package archive

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
	"pgregory.net/rapid"
)

func TestCycleFoldsThenTrims(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{Chunk: 32})
	all := e.append(ctx, 100)
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded != 90 || res.Trimmed != 90 || res.State.W != all[89].XID() || res.State.Pages != 90 {
		t.Fatalf("cycle: %+v", res)
	}
	if live := e.liveIDs(ctx); !slices.Equal(live, all[90:]) {
		t.Fatalf("live after cycle: %d ids", len(live))
	}
	seam, ok, err := GetArchived(ctx, e.live, e.ref())
	if err != nil || !ok || seam.W != all[89].XID() || seam.LSN != res.State.LSN {
		t.Fatalf("seam cache %+v %v %v, want W %v LSN %d", seam, ok, err, all[89], res.State.LSN)
	}
	if top, _ := e.live.Top(ctx, e.ref()); top < all[89] {
		t.Fatalf("stream top %v below W", top)
	}
	// Trim-only retention refuses the archived stream.
	if _, err := e.live.TrimMinID(ctx, e.ref(), xid.Max); !errors.Is(err, mq.ErrArchived) {
		t.Fatalf("TrimMinID on an archived stream: %v", err)
	}
	e.audit(ctx, all)
	// A second cycle with nothing new is a no-op.
	if res, err = e.a.Cycle(ctx, e.ref(), Window{Keep: 10}); err != nil || res.Folded != 0 || res.Trimmed != 0 {
		t.Fatalf("idle cycle: %+v %v", res, err)
	}
	// Ranges and limits across the seam, both directions.
	for _, c := range []struct {
		from, to int
		limit    int
	}{{0, 99, 0}, {85, 95, 0}, {89, 90, 0}, {0, 99, 7}, {91, 99, 3}, {10, 10, 0}} {
		want := slices.Clone(all[c.from : c.to+1])
		r := Range{From: all[c.from].XID(), To: all[c.to].XID(), Limit: c.limit, PageSize: 4}
		got := ids(t, MergeRead(ctx, e.source(ctx), r))
		w := want
		if c.limit > 0 {
			w = want[:min(c.limit, len(want))]
		}
		if !slices.Equal(got, w) {
			t.Errorf("%+v: %d ids, want %d", c, len(got), len(w))
		}
		r.Reverse = true
		slices.Reverse(want)
		if c.limit > 0 {
			want = want[:min(c.limit, len(want))]
		}
		if got := ids(t, MergeRead(ctx, e.source(ctx), r)); !slices.Equal(got, want) {
			t.Errorf("reverse %+v: %d ids, want %d", c, len(got), len(want))
		}
	}
	// Archive only: no Redis needed.
	arch := ids(t, MergeRead(ctx, Source{Ref: mustRef(t, e.q, e.s), Volume: e.volume(ctx)}, All()))
	if !slices.Equal(arch, all[:90]) {
		t.Fatalf("archive-only read: %d ids", len(arch))
	}
}

func TestMergeReadRefusesMissingVolume(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{})
	all := e.append(ctx, 20)
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err != nil {
		t.Fatal(err)
	}
	src := e.source(ctx)
	src.Volume = nil
	for _, err := range MergeRead(ctx, src, All()) {
		if !errors.Is(err, ErrNoVolume) {
			t.Fatalf("read without the volume: %v, want ErrNoVolume", err)
		}
		break
	}
	// A volume behind the seam cache is refused too.
	other := openStore(t, t.TempDir())
	v, _ := other.CreateVolume(ctx, e.ref().Volume())
	if _, err := Fold(ctx, v, recs(all[0])); err != nil {
		t.Fatal(err)
	}
	src.Volume = v
	for _, err := range MergeRead(ctx, src, All()) {
		if !errors.Is(err, ErrVolumeBehind) {
			t.Fatalf("read with a stale volume: %v, want ErrVolumeBehind", err)
		}
		break
	}
	// The hook of the replication work serves the read once it pulls.
	src.Volume = nil
	src.Pull = func(context.Context, string) (*graft.Volume, error) { return e.volume(ctx), nil }
	if got := ids(t, MergeRead(ctx, src, All())); !slices.Equal(got, all) {
		t.Fatalf("read after pull: %d ids", len(got))
	}
	// A stale volume is pulled once; a pull that leaves it behind is refused.
	src.Volume = v
	if got := ids(t, MergeRead(ctx, src, All())); !slices.Equal(got, all) {
		t.Fatalf("read after pulling a stale volume: %d ids", len(got))
	}
	pulls := 0
	src.Pull = func(context.Context, string) (*graft.Volume, error) { pulls++; return v, nil }
	for _, err := range MergeRead(ctx, src, All()) {
		if !errors.Is(err, ErrVolumeBehind) || pulls != 1 {
			t.Fatalf("read with a pull that stays behind: %v after %d pulls, want ErrVolumeBehind after 1", err, pulls)
		}
		break
	}
	// A failed pull is the read's error, typed; nothing of the live tail is
	// served.
	errPull := errors.New("remote unreachable")
	src.Pull = func(context.Context, string) (*graft.Volume, error) { return nil, errPull }
	for _, stale := range []*graft.Volume{nil, v} {
		src.Volume = stale
		want := ErrNoVolume
		if stale != nil {
			want = ErrVolumeBehind
		}
		for rec, err := range MergeRead(ctx, src, All()) {
			if !errors.Is(err, want) || !errors.Is(err, errPull) {
				t.Fatalf("read with a failed pull (volume %v): %v %v, want %v and the pull's error first", stale, rec, err, want)
			}
			break
		}
	}
}

func TestCycleNeverTrimsPendingOrUndelivered(t *testing.T) {
	ctx := testCtx(t)
	r := servers.Redis(t)
	e := newEnv(t, r.URL, Options{})
	all := e.append(ctx, 50)
	key := mq.StreamKey(e.ref())
	if _, err := testserver.Do(ctx, r.Addr, "XGROUP", "CREATE", key, "g", "0"); err != nil {
		t.Fatal(err)
	}
	// g has read the first 20: entries 0..19 pending, 20.. undelivered.
	if _, err := testserver.Do(ctx, r.Addr, "XREADGROUP", "GROUP", "g", "c", "COUNT", "20", "STREAMS", key, ">"); err != nil {
		t.Fatal(err)
	}
	if _, err := testserver.Do(ctx, r.Addr, "XACK", key, "g", all[0].RedisID(), all[1].RedisID(), all[2].RedisID()); err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded != 45 || res.Trimmed != 3 || res.CappedBy != "g (pending)" {
		t.Fatalf("cycle: %+v", res)
	}
	if live := e.liveIDs(ctx); !slices.Equal(live, all[3:]) {
		t.Fatalf("live: %d ids, want the 47 from the oldest pending", len(live))
	}
	e.audit(ctx, all)
}

func TestTrimAfterRemote(t *testing.T) {
	ctx := testCtx(t)
	url := servers.Redis(t).URL
	e := newEnv(t, url, Options{TrimAfter: TrimAfterRemote})
	e.append(ctx, 10)
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 2}); !errors.Is(err, ErrNoRemote) {
		t.Fatalf("trim-after remote without a remote: %v, want ErrNoRemote", err)
	}
	if n, _ := e.live.Len(ctx, e.ref()); n != 10 {
		t.Fatalf("refused cycle touched the stream: %d entries", n)
	}
	// graft's own replication with no remote attached: no trim.
	e3 := newEnv(t, url, Options{TrimAfter: TrimAfterRemote, Pusher: graft.Replication{}})
	e3.append(ctx, 10)
	if _, err := e3.a.Cycle(ctx, mustRef(t, e3.q, e3.s), Window{Keep: 2}); !errors.Is(err, graft.ErrNoRemote) {
		t.Fatalf("graft.Replication without a remote: %v, want graft.ErrNoRemote", err)
	}
	if n, _ := e3.live.Len(ctx, mustRef(t, e3.q, e3.s)); n != 10 {
		t.Fatalf("cycle whose push failed trimmed: %d entries left", n)
	}
	// A remote that holds only the first fold's commit: the second fold is
	// not trimmed.
	p := &fakePusher{upTo: 1}
	e2 := newEnv(t, url, Options{TrimAfter: TrimAfterRemote, Pusher: p, Chunk: 4})
	all := e2.append(ctx, 10)
	res, err := e2.a.Cycle(ctx, mustRef(t, e2.q, e2.s), Window{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded != 8 || res.Trimmed != 4 || p.pushes == 0 {
		t.Fatalf("cycle: %+v, pushes %d", res, p.pushes)
	}
	if live := e2.liveIDs(ctx); !slices.Equal(live, all[4:]) {
		t.Fatalf("live: %d ids, want the 6 the remote does not cover", len(live))
	}
	e2.audit(ctx, all)
}

type fakePusher struct {
	upTo   uint64
	pushes int
}

func (p *fakePusher) Push(context.Context, *graft.Volume) (remote.SyncPoint, error) {
	p.pushes++
	return remote.SyncPoint{}, nil
}
func (p *fakePusher) Pushed(_ context.Context, v *graft.Volume) (uint64, error) {
	return min(p.upTo, v.Head()), nil
}

// TestFencedDriverCannotTrim: a driver that stalls past its lease (here:
// between its fold and its trim) finds another driver took over, and its
// trim is refused.
//
//echostore:fault
func TestFencedDriverCannotTrim(t *testing.T) {
	ctx := testCtx(t)
	url := servers.Redis(t).URL
	e := newEnv(t, url, Options{LeaseTTL: 200 * time.Millisecond})
	all := e.append(ctx, 30)
	stalled, resume := make(chan struct{}), make(chan struct{})
	e.a.beforeTrim = func() { close(stalled); <-resume }
	errA := make(chan error, 1)
	go func() {
		_, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 20})
		errA <- err
	}()
	<-stalled
	// B shares the store and waits for A's lease to expire.
	b, err := New(Options{Store: e.st, Live: e.live, Logger: quietLog(), LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resB, err := b.Cycle(ctx, e.ref(), Window{Keep: 15})
	if err != nil {
		t.Fatal(err)
	}
	if resB.Token <= 1 || resB.Folded != 5 || resB.Trimmed != 15 {
		t.Fatalf("B: %+v", resB)
	}
	// A held the lease with token 1; B released its token 2; a third holder
	// takes token 3. A's trim must fail.
	if l, err := takeLease(ctx, e.live, e.ref(), 0, time.Minute); err != nil || l.Held {
		t.Fatal(l, err)
	}
	close(resume)
	if err := <-errA; !errors.Is(err, ErrFenced) {
		t.Fatalf("stalled driver: %v, want ErrFenced", err)
	}
	if live := e.liveIDs(ctx); !slices.Equal(live, all[15:]) {
		t.Fatalf("live: %d ids, want 15", len(live))
	}
	e.audit(ctx, all)
}

// TestCycleWaitsForADeadDriversLease: a lease left by a process that died
// is waited for, not failed on.
func TestCycleWaitsForADeadDriversLease(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{LeaseTTL: time.Second})
	all := e.append(ctx, 10)
	dead, err := takeLease(ctx, e.live, e.ref(), 0, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Token <= dead.Token || res.Folded != 9 {
		t.Fatalf("cycle %+v after dead token %d", res, dead.Token)
	}
	// A lease held beyond LeaseWait fails with ErrLeaseHeld.
	if _, err := takeLease(ctx, e.live, e.ref(), 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	short, _ := New(Options{Store: e.st, Live: e.live, Logger: quietLog(), LeaseWait: 10 * time.Millisecond})
	if _, err := short.Cycle(ctx, e.ref(), Window{Keep: 1}); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("held lease: %v, want ErrLeaseHeld", err)
	}
	e.audit(ctx, all)
}

// TestRedisRestartMidCycle kills Redis between the fold and the trim and
// restarts it (AOF, appendfsync always): the cycle fails without trimming,
// the next one trims, nothing is lost or duplicated.
//
//echostore:fault
func TestRedisRestartMidCycle(t *testing.T) {
	ctx := testCtx(t)
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{AOF: true})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	e := newEnv(t, r.URL, Options{})
	all := e.append(ctx, 40)
	e.a.afterFold = func() {
		if err := r.Kill(); err != nil {
			t.Error(err)
		}
		if err := r.Restart(ctx); err != nil {
			t.Error(err)
		}
	}
	// The client reconnects by itself; the cycle may or may not get its
	// seam write and trim through, but must never lose a record.
	e.a.Cycle(ctx, e.ref(), Window{Keep: 10})
	e.a.afterFold = nil
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 10}); err != nil {
		t.Fatal(err)
	}
	more := append(all, e.append(ctx, 5)...)
	if live := e.liveIDs(ctx); !slices.Equal(live, more[30:]) {
		t.Fatalf("live after restart and cycle: %d ids, want 15", len(live))
	}
	e.audit(ctx, more)
}

// TestRaceAppendsCyclesReads runs appenders, a cycling driver and
// merge-readers together: each read of a range of already-appended ids must
// return exactly those ids, in order, with no gap and no duplicate; at the
// end archive and live tail partition every appended id.
func TestRaceAppendsCyclesReads(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{Chunk: 17})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// One appender keeps its ids in id order (appends are sequential).
	snapshot := e.startAppender(ctx, 3000, 7, stop, &wg).snapshot
	cycles := make(chan int, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: int64(3 + n%11)}); err != nil {
				t.Error(err)
				return
			}
			n++
			select {
			case cycles <- n:
			default:
			}
		}
	}()
	type openRead struct {
		r    Range
		got  []brand.ID
		have int // ids appended before the read began
	}
	var opens []openRead
	reads := 0
	for cyclesSeen := 0; cyclesSeen < 40 || reads < 150 || len(snapshot()) < 3000; {
		select {
		case n := <-cycles:
			cyclesSeen = n
		default:
		}
		have := snapshot()
		if len(have) < 2 {
			continue
		}
		reads++
		i, j := reads%len(have), len(have)-1-(reads*7)%len(have)
		if i > j {
			i, j = j, i
		}
		want := have[i : j+1]
		r := Range{From: want[0].XID(), To: want[len(want)-1].XID(), PageSize: 1 + reads%9*8, Reverse: reads%2 == 1}
		got := ids(t, MergeRead(ctx, e.source(ctx), r))
		if r.Reverse {
			slices.Reverse(got)
		}
		if !slices.Equal(got, want) {
			close(stop)
			wg.Wait()
			t.Fatalf("read %d %+v: %d ids, want %d; first difference at %d", reads, r, len(got), len(want), firstDiff(got, want))
		}
		// An open-ended read: checked at the end against all appended.
		if reads%5 == 0 {
			rr := Range{From: want[0].XID(), To: xid.Max, PageSize: 50, Reverse: reads%10 == 5}
			opens = append(opens, openRead{rr, ids(t, MergeRead(ctx, e.source(ctx), rr)), len(have)})
		}
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	final := snapshot()
	e.audit(ctx, final)
	// Forward: a prefix of the ids ≥ From, at least as long as what was
	// appended when the read began. Reverse: the same run, newest first.
	for _, o := range opens {
		k, _ := slices.BinarySearch(final, brandOf(t, o.r.From))
		got := slices.Clone(o.got)
		if o.r.Reverse {
			slices.Reverse(got)
		}
		if len(got) < o.have-k || len(got) > len(final)-k || !slices.Equal(got, final[k:k+len(got)]) {
			t.Fatalf("open read %+v: %d ids, not the run of appended ids from %v (%d appended then)", o.r, len(got), o.r.From, o.have-k)
		}
	}
	t.Logf("%d reads beside cycles over %d records", reads, len(snapshot()))
}

// TestCycleProperty: over random windows, chunk sizes and batches, cycles
// keep the window live, never lose or duplicate a record.
func TestCycleProperty(t *testing.T) {
	url := servers.Redis(t).URL
	live := connect(t, url)
	store := openStore(t, t.TempDir())
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx := testCtx(t)
		n++
		q := queueName(t) + "-" + strconv.Itoa(n)
		a, _ := New(Options{Store: store, Live: live, Logger: quietLog(), Chunk: rapid.IntRange(1, 40).Draw(rt, "chunk")})
		e := &env{t: rt, live: live, st: store, a: a, q: q, s: "p"}
		var all []brand.ID
		for step := range rapid.IntRange(1, 6).Draw(rt, "steps") {
			if k := rapid.IntRange(0, 60).Draw(rt, "append"); k > 0 {
				all = append(all, e.append(ctx, k)...)
			}
			keep := rapid.Int64Range(0, 30).Draw(rt, "keep")
			before := int64(len(all)) - int64(e.archivedCount(ctx))
			res, err := a.Cycle(ctx, mustRef(t, q, "p"), Window{Keep: keep})
			if err != nil {
				rt.Fatalf("step %d: %v", step, err)
			}
			l := e.liveIDs(ctx)
			if keep > 0 && int64(len(l)) != min(keep, before) {
				rt.Fatalf("step %d: keep %d, %d live of %d (%+v)", step, keep, len(l), len(all), res)
			}
			if keep == 0 && len(l) != len(all)-int(e.archivedCount(ctx)) {
				rt.Fatalf("step %d: keep 0 trimmed unarchived", step)
			}
		}
		e.audit(ctx, all)
	})
}

func (e *env) archivedCount(ctx context.Context) uint64 {
	v := e.volume(ctx)
	if v == nil {
		return 0
	}
	st, _ := Frontier(ctx, v)
	return st.Pages
}

// TestCycleMaxAge: records older than MaxAge leave the live stream.
func TestCycleMaxAge(t *testing.T) {
	ctx := testCtx(t)
	later := time.Now().Add(time.Hour)
	e := newEnv(t, servers.Redis(t).URL, Options{Clock: func() time.Time { return later }})
	all := e.append(ctx, 12)
	res, err := e.a.Cycle(ctx, e.ref(), Window{MaxAge: 30 * time.Minute})
	if err != nil || res.Folded != 12 || res.Trimmed != 12 {
		t.Fatalf("cycle %+v %v", res, err)
	}
	// Both limits apply: the age limit does not bite, the count does.
	more := e.append(ctx, 6)
	if res, err = e.a.Cycle(ctx, e.ref(), Window{Keep: 4, MaxAge: 2 * time.Hour}); err != nil || res.Folded != 2 {
		t.Fatalf("cycle %+v %v", res, err)
	}
	e.audit(ctx, append(all, more...))
}

// TestRedisLostDataCannotHideAppends: Redis loses the stream and the seam
// cache; the next cycle raises the stream's last id to W again, so an
// append from a producer whose clock is behind lands above W, where the
// merge-read shows it.
//
//echostore:fault
func TestRedisLostDataCannotHideAppends(t *testing.T) {
	ctx := testCtx(t)
	r := servers.Redis(t)
	e := newEnv(t, r.URL, Options{})
	all := e.append(ctx, 10)
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 0, MaxAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := testserver.Do(ctx, r.Addr, "DEL", mq.StreamKey(e.ref()), SeamKey(e.ref())); err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err != nil {
		t.Fatal(err)
	}
	past, err := brand.NewMinter(0, brand.WithClock(func() time.Time { return all[0].Time().Add(-time.Minute) }))
	if err != nil {
		t.Fatal(err)
	}
	behind, err := mq.Connect(ctx, mq.Options{URL: r.URL, Minter: past, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer behind.Close()
	id, err := behind.Append(ctx, e.ref(), mq.Field{Name: "late", Value: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if id <= all[9] {
		t.Fatalf("append after data loss landed at %v, not above W %v", id, all[9])
	}
	e.audit(ctx, append(all, id))
}

func TestDriverCyclesDeclaredStreams(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{})
	a := e.append(ctx, 10)
	e.s = "other"
	b := e.append(ctx, 4)
	d := e.a.NewDriver()
	if err := d.Declare(mustRef(t, e.q, "events"), Window{Keep: 3}); err != nil {
		t.Fatal(err)
	}
	if err := d.Declare(mustRef(t, e.q, "other"), Window{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Declare(names.StreamRef{}, Window{Keep: 1}); !errors.Is(err, names.ErrInvalid) {
		t.Fatalf("Declare of no stream: %v, want names.ErrInvalid", err)
	}
	reps, err := d.Cycle(ctx)
	if err != nil || len(reps) != 2 || reps[0].Ref.Stream().String() != "events" || reps[0].Result.Folded != 7 || reps[1].Result.Folded != 3 {
		t.Fatalf("driver cycle: %+v %v", reps, err)
	}
	e.audit(ctx, b)
	e.s = "events"
	e.audit(ctx, a)
	// CycleFunc cycles the streams its filter keeps, and reports those.
	only := func(r names.StreamRef) bool { return r.Stream().String() == "other" }
	if reps, err := d.CycleFunc(ctx, only); err != nil || len(reps) != 1 || reps[0].Ref.Stream().String() != "other" {
		t.Fatalf("CycleFunc keeping other: %+v %v", reps, err)
	}
	if reps, err := d.CycleFunc(ctx, func(names.StreamRef) bool { return false }); err != nil || len(reps) != 0 {
		t.Fatalf("CycleFunc keeping none: %+v %v", reps, err)
	}
	d.Forget(mustRef(t, e.q, "other"))
	if reps, _ := d.Cycle(ctx); len(reps) != 1 {
		t.Fatalf("after Forget: %d reports", len(reps))
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Run(stopped, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// TestCycleOnCluster: the lease, the fenced trim and the seam cache touch
// keys of one hashtag, so cycles work on a Redis Cluster.
func TestCycleOnCluster(t *testing.T) {
	ctx := testCtx(t)
	cl := servers.Cluster(t)
	e := newEnv(t, "redis://"+strings.Join(cl.Addrs, ","), Options{Chunk: 5})
	all := e.append(ctx, 30)
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 4})
	if err != nil || res.Folded != 26 || res.Trimmed != 26 {
		t.Fatalf("cycle on a cluster: %+v %v", res, err)
	}
	e.audit(ctx, all)
}
