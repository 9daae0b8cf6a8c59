package archive

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
	"pgregory.net/rapid"
)

// between returns the ids of want in [from, to].
func between(want []brand.ID, from, to brand.ID) []brand.ID {
	var out []brand.ID
	for _, id := range want {
		if id >= from && id <= to {
			out = append(out, id)
		}
	}
	return out
}

// TestRetentionProperty: random appends, windows, chunk sizes and
// retention horizons (by count, by age, both, none) over many cycles. After
// every cycle the first retained page is what a model computes (it never
// moves back, W never moves for it), and every read returns exactly the
// records from the first retained one on, in order, without a gap: the
// archive alone ([low, W]), the merge-read forward and reverse, and random
// sub-ranges of both, also ranges starting below the dropped pages.
func TestRetentionProperty(t *testing.T) {
	url := testRedisURL(t)
	live := connect(t, url)
	store := openStore(t, t.TempDir())
	later := time.Now().Add(time.Hour)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		ctx := testCtx(t)
		n++
		q := queueName(t) + "-" + strconv.Itoa(n)
		e := &env{t: rt, live: live, st: store, q: q, s: "r"}
		var all []brand.ID
		low := uint64(0)
		for step := range rapid.IntRange(1, 8).Draw(rt, "steps") {
			if k := rapid.IntRange(0, 50).Draw(rt, "append"); k > 0 {
				all = append(all, e.append(ctx, k)...)
			}
			var r Retention
			if rapid.Bool().Draw(rt, "by count") {
				r.Count = rapid.Uint64Range(1, 60).Draw(rt, "count")
			}
			if len(all) > 0 && rapid.Bool().Draw(rt, "by age") {
				r.MaxAge = later.Sub(all[rapid.IntRange(0, len(all)-1).Draw(rt, "age at")].Time())
			}
			a, err := New(Options{Store: store, Live: live, Logger: quietLog(), Retain: r,
				Chunk: rapid.IntRange(1, 30).Draw(rt, "chunk"), Clock: func() time.Time { return later }})
			if err != nil {
				rt.Fatal(err)
			}
			e.a = a
			res, err := a.Cycle(ctx, mustRef(t, q, e.s), Window{Keep: rapid.Int64Range(0, 20).Draw(rt, "keep")})
			if err != nil {
				rt.Fatalf("step %d: %v", step, err)
			}
			st := res.State
			if st.Empty() {
				continue
			}
			// The model: the archive holds all[:Pages]; the floor is the
			// highest of the old floor, the count limit and the age limit.
			want := low
			if r.Count > 0 && st.Pages > r.Count {
				want = max(want, st.Pages-r.Count)
			}
			if r.MaxAge > 0 {
				cut := brand.FirstAt(later.Add(-r.MaxAge))
				k := uint64(0)
				for k < st.Pages && all[k] < cut {
					k++
				}
				want = max(want, k)
			}
			if st.Low != want || st.W != all[st.Pages-1].XID() || res.Dropped != int64(want-low) {
				rt.Fatalf("step %d: low %d W %s dropped %d; want low %d W %s dropped %d (retention %+v)",
					step, st.Low, formatID(st.W), res.Dropped, want, brand.EVT.Format(all[st.Pages-1]), want-low, r)
			}
			if fr, err := Frontier(ctx, e.volume(ctx)); err != nil || fr != st {
				rt.Fatalf("step %d: frontier %+v %v, the cycle said %+v", step, fr, err, st)
			}
			low = st.Low
			kept := all[low:]
			if got := e.archiveIDs(ctx); !slices.Equal(got, all[low:st.Pages]) {
				rt.Fatalf("step %d: archive read %d ids, want [%d, %d)", step, len(got), low, st.Pages)
			}
			if got := ids(rt, MergeRead(ctx, e.source(ctx), All())); !slices.Equal(got, kept) {
				rt.Fatalf("step %d: merge-read %d ids, want %d; first difference at %d", step, len(got), len(kept), firstDiff(got, kept))
			}
			rev := ids(rt, MergeRead(ctx, e.source(ctx), Range{To: xid.Max, Reverse: true, PageSize: rapid.IntRange(1, 20).Draw(rt, "page")}))
			slices.Reverse(rev)
			if !slices.Equal(rev, kept) {
				rt.Fatalf("step %d: reverse merge-read %d ids, want %d", step, len(rev), len(kept))
			}
			i := rapid.IntRange(0, len(all)-1).Draw(rt, "from")
			j := rapid.IntRange(i, len(all)-1).Draw(rt, "to")
			from, to := all[i], all[j]
			wantR := between(kept, from, to)
			for _, reverse := range []bool{false, true} {
				got := ids(rt, MergeRead(ctx, e.source(ctx), Range{From: bx(from), To: bx(to), Reverse: reverse, PageSize: 7}))
				if reverse {
					slices.Reverse(got)
				}
				if !slices.Equal(got, wantR) {
					rt.Fatalf("step %d: merge-read [%d, %d] reverse %v: %d ids, want %d", step, i, j, reverse, len(got), len(wantR))
				}
				got = ids(rt, Read(ctx, e.volume(ctx), bx(from), bx(to), reverse))
				if reverse {
					slices.Reverse(got)
				}
				if w := between(all[low:st.Pages], from, to); !slices.Equal(got, w) {
					rt.Fatalf("step %d: archive read [%d, %d] reverse %v: %d ids, want %d", step, i, j, reverse, len(got), len(w))
				}
			}
		}
	})
}

// TestRetentionSnapshotGCAndFollower: a snapshot taken before a drop still
// reads every dropped record; GC (the cycle's own, and one run by hand)
// keeps them while it is open, and the next cycle's GC reclaims them (pages,
// bytes) once it is closed; the drop is pushed with the
// cycle (trim-after remote) and a second data dir pulling the volume reads
// exactly the retained records, and reclaims the dropped ones with its own
// GC.
func TestRetentionSnapshotGCAndFollower(t *testing.T) {
	ctx := testCtx(t)
	rs, err := remote.Open(ctx, "file://"+t.TempDir(), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	e := newEnv(t, testRedisURL(t), Options{TrimAfter: TrimAfterRemote, Pusher: graft.Replication{}, Chunk: 250})
	e.st.AttachRemote(rs)
	big := strings.Repeat("x", 1024)
	var all []brand.ID
	for range 4 {
		batch := make([][]mq.Field, 250)
		for i := range batch {
			batch[i] = []mq.Field{{Name: "n", Value: strconv.Itoa(i)}, {Name: "pad", Value: big}}
		}
		got, err := e.live.AppendBatch(ctx, e.ref(), batch)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
	}
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 0, MaxAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	vol := e.volume(ctx)
	old, err := vol.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	before := vol.Info()

	// Retention: keep the newest 100 archived records.
	a, err := New(Options{Store: e.st, Live: e.live, Logger: quietLog(), TrimAfter: TrimAfterRemote, Pusher: graft.Replication{},
		Retain: Retention{Count: 100}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Cycle(ctx, e.ref(), Window{Keep: 0, MaxAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dropped != 900 || res.State.Low != 900 || res.State.W != all[999].XID() || res.State.Retained() != 100 {
		t.Fatalf("retention cycle: %+v", res)
	}
	if got := e.archiveIDs(ctx); !slices.Equal(got, all[900:]) {
		t.Fatalf("archive after retention: %d ids", len(got))
	}
	// The snapshot from before the drop reads all 1,000, also across a GC.
	readOld := func() {
		t.Helper()
		st, err := stateAt(ctx, old)
		if err != nil || st.Low != 0 || st.Pages != 1000 {
			t.Fatalf("old snapshot state %+v %v", st, err)
		}
		var got []brand.ID
		readAt(ctx, old, st, xid.Min, xid.Max, false, func(r mq.Record, err error) bool {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, brandOf(t, r.ID))
			return true
		})
		if !slices.Equal(got, all) {
			t.Fatalf("old snapshot reads %d records, want 1000", len(got))
		}
	}
	readOld()
	gs, err := vol.GC(ctx)
	if err != nil || gs.DroppedPages != 0 {
		t.Fatalf("GC with the old snapshot open: %+v %v", gs, err)
	}
	readOld()
	_ = old.Close()
	// The next cycle ends with the volume's GC, which now reclaims them.
	if _, err := a.Cycle(ctx, e.ref(), Window{Keep: 0, MaxAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	if gs, err = vol.GC(ctx); err != nil || gs.DroppedPages != 0 {
		t.Fatalf("GC after the cycle's own: %+v %v, want nothing left to reclaim", gs, err)
	}
	after := vol.Info()
	if after.Pages != before.Pages-900 || after.Bytes >= before.Bytes/5 {
		t.Fatalf("after GC: %d pages %d bytes, before %d pages %d bytes", after.Pages, after.Bytes, before.Pages, before.Bytes)
	}
	t.Logf("pages %d → %d, bytes %d → %d", before.Pages, after.Pages, before.Bytes, after.Bytes)
	if got := e.archiveIDs(ctx); !slices.Equal(got, all[900:]) {
		t.Fatalf("archive after GC: %d ids", len(got))
	}

	// A second data dir pulls the volume: the drop came with it.
	fs := openStore(t, t.TempDir())
	fs.AttachRemote(rs)
	fv, err := fs.CreateVolume(ctx, vol.Name())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fv.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, Read(ctx, fv, xid.Min, xid.Max, false)); !slices.Equal(got, all[900:]) {
		t.Fatalf("follower reads %d records, want the 100 retained", len(got))
	}
	if gs, err = fv.GC(ctx); err != nil || gs.DroppedPages != 900 || fv.Info().Pages != 100 {
		t.Fatalf("follower GC: %+v %v, info %+v", gs, err, fv.Info())
	}
}

// testRedisURL is the package's redis-server.
func testRedisURL(t *testing.T) string { return servers.Redis(t).URL }

// firstRetained returns the id of the first retained archived record of
// e's stream (0 with no archive; W+1 when retention dropped every page).
func (e *env) firstRetained(ctx context.Context) brand.ID {
	e.t.Helper()
	v := e.volume(ctx)
	if v == nil {
		return 0
	}
	snap, err := v.Snapshot(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer snap.Close()
	st, err := stateAt(ctx, snap)
	if err != nil {
		e.t.Fatal(err)
	}
	switch {
	case st.Empty():
		return 0
	case st.Retained() == 0:
		return xb(st.W) + 1
	}
	id, err := pageID(ctx, snap, st.Low)
	if err != nil {
		e.t.Fatal(err)
	}
	return brandOf(e.t, id)
}

// readWithDrops collects a merge-read's ids and the *DroppedError it
// yields, each with the number of ids returned before it; any other error
// fails the test.
func readWithDrops(t tb, seq func(func(mq.Record, error) bool)) ([]brand.ID, []dropAt) {
	t.Helper()
	var got []brand.ID
	var drops []dropAt
	for r, err := range seq {
		var de *DroppedError
		switch {
		case errors.As(err, &de):
			drops = append(drops, dropAt{len(got), *de})
		case err != nil:
			t.Fatalf("read: %v", err)
		default:
			got = append(got, brandOf(t, r.ID))
		}
	}
	return got, drops
}

// dropAt is a *DroppedError and where in the read it came.
type dropAt struct {
	at int
	e  DroppedError
}

// checkRetentionRead checks one merge-read beside appends, cycles and
// retention against the rule (docs/ARCHIVE.md, Retention): got (oldest
// first) is strictly ordered and holds only appended ids, none dropped
// before the read began (below before); it starts at the first record
// retained when its first archive part was read, so every appended id below
// its first is dropped by the end (below after); and between two returned
// ids every appended id is returned, unless a *DroppedError came between
// them, whose [From, Through] holds exactly those missing ids, all dropped
// by the end. Only a forward read reports drops (a reverse read has one
// archive part). It returns an error message, or "" if the read keeps the
// rule.
func checkRetentionRead(got []brand.ID, drops []dropAt, reverse bool, all []brand.ID, before, after brand.ID) string {
	if reverse && len(drops) > 0 {
		return fmt.Sprintf("a reverse read reported a drop: %v", drops[0].e.Error())
	}
	for k, id := range got {
		if k > 0 && id <= got[k-1] {
			return fmt.Sprintf("out of order at %d", k)
		}
		if id < before {
			return fmt.Sprintf("returned %s, dropped before the read began (first retained %s)", brand.EVT.Format(id), brand.EVT.Format(before))
		}
		// Ids above the last recorded one were appended by a batch whose
		// reply the appender has not recorded yet.
		if _, ok := slices.BinarySearch(all, id); !ok && (len(all) == 0 || id < all[len(all)-1]) {
			return fmt.Sprintf("returned %s (%d of %d), never appended (%d appended, the last %s)",
				brand.EVT.Format(id), k, len(got), len(all), brand.EVT.Format(all[len(all)-1]))
		}
	}
	if len(all) == 0 {
		return ""
	}
	// Only what the appender recorded can be checked.
	top := all[len(all)-1]
	n, _ := slices.BinarySearch(got, top+1)
	got = got[:n]
	d := 0
	for k := 0; k <= len(got); k++ {
		lo, hi := brand.ID(0), top+1 // the appended ids in [lo, hi) are missing
		if k > 0 {
			lo = got[k-1] + 1
		}
		if k < len(got) {
			hi = got[k]
		}
		var report *DroppedError
		for ; d < len(drops) && drops[d].at <= k; d++ {
			if report != nil {
				return fmt.Sprintf("two drops reported before id %d of the read", k)
			}
			report = &drops[d].e
		}
		if k == len(got) {
			if report != nil && xb(report.Through) < top {
				hi = xb(report.Through) + 1 // a drop reported at the end
			} else {
				break // the read ended: later records came after it
			}
		}
		i, _ := slices.BinarySearch(all, lo)
		j, _ := slices.BinarySearch(all, hi)
		missing := all[i:j]
		switch {
		case report != nil:
			if xb(report.From) != lo || xb(report.Through) < xb(report.From) {
				return fmt.Sprintf("drop reported as [%s, %s] after %s", brand.EVT.Format(xb(report.From)), brand.EVT.Format(xb(report.Through)), brand.EVT.Format(lo-1))
			}
			if x, ok := slices.BinarySearch(all, xb(report.Through)); xb(report.Through) < top && !ok {
				return fmt.Sprintf("drop reported through %s, never appended", brand.EVT.Format(xb(report.Through)))
			} else if ok && x != j-1 {
				// The read resumes at the first retained record: the one
				// after the newest dropped.
				return fmt.Sprintf("drop reported through %s, but the read went on at %s", brand.EVT.Format(xb(report.Through)), brand.EVT.Format(hi))
			}
			if len(missing) == 0 || missing[len(missing)-1] >= after {
				return fmt.Sprintf("drop reported through %s, but %d ids missing before %s and the first retained at the end is %s",
					brand.EVT.Format(xb(report.Through)), len(missing), brand.EVT.Format(hi), brand.EVT.Format(after))
			}
		case len(missing) == 0:
		case k == 0:
			// The read begins at the first record retained when its first
			// archive part was read: what it leaves out below is dropped.
			if missing[len(missing)-1] >= after {
				return fmt.Sprintf("%d ids missing before the first returned one (%s), the last of them %s not dropped at the end (first retained %s): a gap",
					len(missing), brand.EVT.Format(hi), brand.EVT.Format(missing[len(missing)-1]), brand.EVT.Format(after))
			}
		default:
			return fmt.Sprintf("%d ids missing between %s and %s (%d ids returned), none reported dropped (first retained at the end %s): a gap",
				len(missing), brand.EVT.Format(lo-1), brand.EVT.Format(hi), k, brand.EVT.Format(after))
		}
	}
	return ""
}

// TestRaceRetentionReads: appends, cycles with a retention horizon by
// count, and merge-reads of the whole stream (forward and reverse, several
// page sizes) run together, the first reads beginning before the stream's
// first cycle. Every read keeps the retention rule (checkRetentionRead):
// ordered, only appended ids, none dropped before it began, and no gap
// but the drops it reports. A horizon of 150 is rarely passed by a read's
// cursor; one of 4 often is.
func TestRaceRetentionReads(t *testing.T) {
	for _, count := range []uint64{150, 4} {
		t.Run(fmt.Sprintf("count=%d", count), func(t *testing.T) { raceRetentionReads(t, count) })
	}
}

func raceRetentionReads(t *testing.T, count uint64) {
	ctx := testCtx(t)
	e := newEnv(t, testRedisURL(t), Options{Chunk: 13, Retain: Retention{Count: count}})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	snapshot := e.startAppender(ctx, 2500, 9, stop, &wg).snapshot
	var cycles atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: int64(3 + n%11)}); err != nil {
				t.Error(err)
				return
			}
			cycles.Add(1)
		}
	}()
	reads, reported := 0, 0
	for ; reads < 120 || cycles.Load() < 40; reads++ {
		before := e.firstRetained(ctx)
		r := Range{To: xid.Max, PageSize: 1 + reads%7*9, Reverse: reads%2 == 1}
		// The volume is opened from the store when the read begins before
		// the first cycle created it.
		src := e.source(ctx)
		src.Store = e.st
		got, drops := readWithDrops(t, MergeRead(ctx, src, r))
		after := e.firstRetained(ctx)
		if r.Reverse {
			slices.Reverse(got)
		}
		reported += len(drops)
		if msg := checkRetentionRead(got, drops, r.Reverse, snapshot(), before, after); msg != "" {
			close(stop)
			wg.Wait()
			t.Fatalf("read %d %+v: %s", reads, r, msg)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads beside %d cycles with retention %d over %d records; %d drops reported during forward reads",
		reads, cycles.Load(), count, len(snapshot()), reported)
}

// readStep is one step of a merge-read: an id, a *DroppedError, another
// error, or the end.
type readStep struct {
	id   brand.ID
	drop *DroppedError
	err  error
	done bool
}

// pullRead drives a merge-read step by step, so that a test changes the
// stream and the archive between two steps of one read.
func pullRead(ctx context.Context, src Source, r Range) (func() readStep, func()) {
	next, stop := iter.Pull2(iter.Seq2[mq.Record, error](MergeRead(ctx, src, r)))
	return func() readStep {
		rec, err, ok := next()
		var de *DroppedError
		switch {
		case !ok:
			return readStep{done: true}
		case errors.As(err, &de):
			return readStep{drop: de}
		case err != nil:
			return readStep{err: err}
		}
		return readStep{id: xb(rec.ID)}
	}, stop
}

// dropDuringRead begins a forward read of r (page size 1) over 10 records,
// 5 of them folded, and takes its first step; then 10 more are appended,
// all but 2 folded (W = all[17], pages 0..17) and the newest 3 folded kept:
// pages 0..14 dropped, all[5..14] above the read's cursor. It returns the
// env, the 20 ids and the read's next step.
func dropDuringRead(t *testing.T, ctx context.Context, r func([]brand.ID) Range) (*env, []brand.ID, func() readStep) {
	t.Helper()
	e := newEnv(t, testRedisURL(t), Options{})
	all := e.append(ctx, 10)
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 5}); err != nil {
		t.Fatal(err)
	}
	next, stop := pullRead(ctx, e.source(ctx), r(all))
	t.Cleanup(stop)
	if s := next(); s.id != all[0] {
		t.Fatalf("first step %+v, want %s", s, brand.EVT.Format(all[0]))
	}
	all = append(all, e.append(ctx, 10)...)
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 2}); err != nil {
		t.Fatal(err)
	}
	st, dropped, err := Retain(ctx, e.volume(ctx), Retention{Count: 3}, time.Now())
	if err != nil || dropped != 15 || st.Low != 15 {
		t.Fatalf("retain: %+v, %d dropped, %v; want low 15, 15 dropped", st, dropped, err)
	}
	return e, all, next
}

// expectSteps fails t unless next yields want, in order.
func expectSteps(t *testing.T, next func() readStep, want []readStep) {
	t.Helper()
	for k, w := range want {
		s := next()
		if s.err != nil || s.done != w.done || s.id != w.id || (s.drop == nil) != (w.drop == nil) || s.drop != nil && *s.drop != *w.drop {
			t.Fatalf("step %d: %+v (drop %v), want %+v (drop %v)", k+1, s, s.drop, w, w.drop)
		}
	}
}

// TestMergeReadDropDuringRead: retention drops records a forward read has
// not reached while the read is between two steps. The read finishes its
// current archive part from its snapshot (the dropped pages still read
// there), then yields one *DroppedError naming its cursor and the newest
// dropped record, resumes at the first retained record and goes on to the
// live tail: no dropped record, no other gap. A bounded range whose rest
// was dropped gets a report that ends at its To, and ends. A reverse read
// begun before the drop reads its archive part at one snapshot and reports
// nothing.
func TestMergeReadDropDuringRead(t *testing.T) {
	ctx := testCtx(t)
	e, all, next := dropDuringRead(t, ctx, func([]brand.ID) Range { return Range{To: xid.Max, PageSize: 1} })
	var want []readStep
	for _, id := range all[1:5] {
		want = append(want, readStep{id: id})
	}
	want = append(want, readStep{drop: &DroppedError{Queue: e.q, Stream: e.s, From: (all[4] + 1).XID(), Through: all[14].XID()}})
	for _, id := range all[15:] {
		want = append(want, readStep{id: id})
	}
	expectSteps(t, next, append(want, readStep{done: true}))
	if !errors.Is(want[4].drop, ErrDropped) {
		t.Fatal("a *DroppedError is not ErrDropped")
	}

	// A bounded range whose rest the drop passed: the report ends at To and
	// so does the read.
	b, ball, bnext := dropDuringRead(t, ctx, func(all []brand.ID) Range { return Range{To: all[7].XID(), PageSize: 1} })
	want = want[:0]
	for _, id := range ball[1:5] {
		want = append(want, readStep{id: id})
	}
	want = append(want, readStep{drop: &DroppedError{Queue: b.q, Stream: b.s, From: (ball[4] + 1).XID(), Through: ball[7].XID()}}, readStep{done: true})
	expectSteps(t, bnext, want)

	// Reverse, begun before a drop: its archive part is one snapshot.
	next, stop := pullRead(ctx, e.source(ctx), Range{To: xid.Max, PageSize: 1, Reverse: true})
	defer stop()
	if s := next(); s.id != all[19] {
		t.Fatalf("first reverse step %+v, want %s", s, brand.EVT.Format(all[19]))
	}
	if s := next(); s.id != all[18] {
		t.Fatalf("second reverse step %+v, want %s", s, brand.EVT.Format(all[18]))
	}
	if s := next(); s.id != all[17] { // the archive part's snapshot is taken here
		t.Fatalf("third reverse step %+v, want %s", s, brand.EVT.Format(all[17]))
	}
	if _, dropped, err := Retain(ctx, e.volume(ctx), Retention{Count: 1}, time.Now()); err != nil || dropped != 2 {
		t.Fatalf("retain: %d dropped, %v; want 2", dropped, err)
	}
	for _, id := range []brand.ID{all[16], all[15]} {
		if s := next(); s.id != id {
			t.Fatalf("reverse step %+v, want %s", s, brand.EVT.Format(id))
		}
	}
	if s := next(); !s.done {
		t.Fatalf("reverse read goes on: %+v", s)
	}
}

// TestMergeReadFirstCycleDuringRead: a read that begins before the
// stream's first cycle has no volume; the cycle creates it, folds and trims
// while the read is between two steps. The read finds the archive through
// the seam cache (from Source.Store, or Pull) and returns every record
// once, in order; with neither it fails with ErrNoVolume instead of
// serving the live tail with a gap.
func TestMergeReadFirstCycleDuringRead(t *testing.T) {
	for _, how := range []string{"store", "pull", "neither"} {
		t.Run(how, func(t *testing.T) {
			ctx := testCtx(t)
			e := newEnv(t, testRedisURL(t), Options{})
			all := e.append(ctx, 10)
			src := e.source(ctx)
			if src.Volume != nil {
				t.Fatal("a volume before the first cycle")
			}
			switch how {
			case "store":
				src.Store = e.st
			case "pull":
				src.Pull = func(ctx context.Context, _ string) (*graft.Volume, error) { return e.volume(ctx), nil }
			}
			next, stop := pullRead(ctx, src, Range{To: xid.Max, PageSize: 1})
			defer stop()
			if s := next(); s.id != all[0] {
				t.Fatalf("first step %+v, want %s", s, brand.EVT.Format(all[0]))
			}
			if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 3}); err != nil {
				t.Fatal(err)
			}
			if how == "neither" {
				if s := next(); !errors.Is(s.err, ErrNoVolume) {
					t.Fatalf("second step %+v, want ErrNoVolume", s)
				}
				if s := next(); !s.done {
					t.Fatalf("the read goes on after ErrNoVolume: %+v", s)
				}
				return
			}
			for _, id := range all[1:] {
				if s := next(); s.id != id {
					t.Fatalf("step %+v, want %s", s, brand.EVT.Format(id))
				}
			}
			if s := next(); !s.done {
				t.Fatalf("read goes on: %+v", s)
			}
		})
	}
}
