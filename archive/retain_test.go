package archive

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
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
			res, err := a.Cycle(ctx, q, e.s, Window{Keep: rapid.Int64Range(0, 20).Draw(rt, "keep")})
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
			if st.Low != want || st.W != all[st.Pages-1] || res.Dropped != int64(want-low) {
				rt.Fatalf("step %d: low %d W %s dropped %d; want low %d W %s dropped %d (retention %+v)",
					step, st.Low, brand.EVT.Format(st.W), res.Dropped, want, brand.EVT.Format(all[st.Pages-1]), want-low, r)
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
			rev := ids(rt, MergeRead(ctx, e.source(ctx), Range{To: brand.Max, Reverse: true, PageSize: rapid.IntRange(1, 20).Draw(rt, "page")}))
			slices.Reverse(rev)
			if !slices.Equal(rev, kept) {
				rt.Fatalf("step %d: reverse merge-read %d ids, want %d", step, len(rev), len(kept))
			}
			i := rapid.IntRange(0, len(all)-1).Draw(rt, "from")
			j := rapid.IntRange(i, len(all)-1).Draw(rt, "to")
			from, to := all[i], all[j]
			wantR := between(kept, from, to)
			for _, reverse := range []bool{false, true} {
				got := ids(rt, MergeRead(ctx, e.source(ctx), Range{From: from, To: to, Reverse: reverse, PageSize: 7}))
				if reverse {
					slices.Reverse(got)
				}
				if !slices.Equal(got, wantR) {
					rt.Fatalf("step %d: merge-read [%d, %d] reverse %v: %d ids, want %d", step, i, j, reverse, len(got), len(wantR))
				}
				got = ids(rt, Read(ctx, e.volume(ctx), from, to, reverse))
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
	rs, err := remote.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	e := newEnv(t, testRedisURL(t), Options{TrimAfter: TrimAfterRemote, Pusher: GraftPusher{}, Chunk: 250})
	e.st.AttachRemote(rs)
	big := strings.Repeat("x", 1024)
	var all []brand.ID
	for range 4 {
		batch := make([][]mq.Field, 250)
		for i := range batch {
			batch[i] = []mq.Field{{Name: "n", Value: strconv.Itoa(i)}, {Name: "pad", Value: big}}
		}
		got, err := e.live.AppendBatch(ctx, e.q, e.s, batch)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
	}
	if _, err := e.a.Cycle(ctx, e.q, e.s, Window{Keep: 0, MaxAge: time.Nanosecond}); err != nil {
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
	a, err := New(Options{Store: e.st, Live: e.live, Logger: quietLog(), TrimAfter: TrimAfterRemote, Pusher: GraftPusher{},
		Retain: Retention{Count: 100}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Cycle(ctx, e.q, e.s, Window{Keep: 0, MaxAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dropped != 900 || res.State.Low != 900 || res.State.W != all[999] || res.State.Retained() != 100 {
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
		readAt(ctx, old, st, 0, brand.Max, false, func(r mq.Record, err error) bool {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.ID)
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
	if _, err := a.Cycle(ctx, e.q, e.s, Window{Keep: 0, MaxAge: time.Nanosecond}); err != nil {
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
	if got := ids(t, Read(ctx, fv, 0, brand.Max, false)); !slices.Equal(got, all[900:]) {
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
		return st.W + 1
	}
	id, err := pageID(ctx, snap, st.Low)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// TestRaceRetentionReads: appends, cycles with a retention horizon by
// count, and merge-reads of the whole stream (forward and reverse, several
// page sizes) run together. Every read is strictly ordered, returns only
// appended ids, never one that was dropped before it began, and has no gap
// above the first record retained when it ended.
func TestRaceRetentionReads(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, testRedisURL(t), Options{Chunk: 13, Retain: Retention{Count: 150}})
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
			if _, err := e.a.Cycle(ctx, e.q, e.s, Window{Keep: int64(3 + n%11)}); err != nil {
				t.Error(err)
				return
			}
			cycles.Add(1)
		}
	}()
	reads := 0
	for ; reads < 120 || cycles.Load() < 40; reads++ {
		before := e.firstRetained(ctx)
		r := Range{To: brand.Max, PageSize: 1 + reads%7*9, Reverse: reads%2 == 1}
		got := ids(t, MergeRead(ctx, e.source(ctx), r))
		after := e.firstRetained(ctx)
		if r.Reverse {
			slices.Reverse(got)
		}
		all := snapshot()
		fail := func(format string, args ...any) {
			close(stop)
			wg.Wait()
			t.Fatalf("read %d %+v: "+format, append([]any{reads, r}, args...)...)
		}
		for k, id := range got {
			if k > 0 && id <= got[k-1] {
				fail("out of order at %d", k)
			}
			if id < before {
				fail("returned %s, dropped before the read began (first retained %s)", brand.EVT.Format(id), brand.EVT.Format(before))
			}
			// Ids above the last recorded one were appended by a batch
			// whose reply the appender has not recorded yet.
			if _, ok := slices.BinarySearch(all, id); !ok && (len(all) == 0 || id < all[len(all)-1]) {
				fail("returned %s, never appended", brand.EVT.Format(id))
			}
		}
		if len(all) > 0 {
			n, _ := slices.BinarySearch(got, all[len(all)-1]+1)
			got = got[:n]
		}
		if len(got) == 0 {
			continue
		}
		i, _ := slices.BinarySearch(all, after)
		j, _ := slices.BinarySearch(all, got[len(got)-1])
		k, _ := slices.BinarySearch(got, after)
		if want := all[i : j+1]; !slices.Equal(got[k:], want) {
			fail("%d ids above the first retained one at the end, want %d: a gap", len(got)-k, len(want))
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads beside %d cycles with retention over %d records", reads, cycles.Load(), len(snapshot()))
}
