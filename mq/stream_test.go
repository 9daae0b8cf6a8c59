package mq

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
	"github.com/redis/rueidis"
)

// checkIncreasing fails the test unless recs are in strictly increasing id
// order (or decreasing, with reverse).
func checkIncreasing(t testing.TB, recs []Record, reverse bool) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		if (recs[i].ID.Compare(recs[i-1].ID) <= 0) != reverse || recs[i].ID == recs[i-1].ID {
			t.Fatalf("records %d and %d out of order: %v, %v", i-1, i, recs[i-1].ID, recs[i].ID)
		}
	}
}

func TestAppendRead(t *testing.T) {
	eachServer(t, Options{ChunkRecords: 64, PageSize: 7}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		first, err := c.Append(ctx, mustRef(t, q, "s"), fields("n", "0", "kind", "single")...)
		if err != nil {
			t.Fatal(err)
		}
		batch := make([][]Field, 300)
		for i := range batch {
			batch[i] = fields("n", strconv.Itoa(i+1), "z", "last", "a", "first?")
		}
		ids, err := c.AppendBatch(ctx, mustRef(t, q, "s"), batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 300 || ids[0] <= first {
			t.Fatalf("got %d ids, first %v after %v", len(ids), ids[0], first)
		}
		all := readAll(t, c, q, "s", 0, brand.Max, 0, false)
		if len(all) != 301 {
			t.Fatalf("read %d records, want 301", len(all))
		}
		checkIncreasing(t, all, false)
		for i, rec := range all {
			want := []Field{{Name: "n", Value: strconv.Itoa(i)}, {Name: "kind", Value: "single"}}
			if i > 0 {
				want = batch[i-1]
				if rec.ID != ids[i-1].XID() {
					t.Fatalf("record %d has id %v, append said %v", i, rec.ID, ids[i-1])
				}
			}
			if !sameFields(rec.Fields, want) {
				t.Fatalf("record %d: fields %q, want %q (order kept)", i, rec.Fields, want)
			}
		}
		rev := readAll(t, c, q, "s", 0, brand.Max, 0, true)
		checkIncreasing(t, rev, true)
		if len(rev) != 301 || rev[0].ID != ids[299].XID() {
			t.Fatalf("reverse read: %d records starting at %v", len(rev), rev[0].ID)
		}
		// Inclusive bounds, limits, both directions.
		mid := readAll(t, c, q, "s", ids[10], ids[20], 0, false)
		if len(mid) != 11 || mid[0].ID != ids[10].XID() || mid[10].ID != ids[20].XID() {
			t.Fatalf("[ids[10], ids[20]]: %d records", len(mid))
		}
		lim := readAll(t, c, q, "s", ids[10], ids[20], 4, true)
		if len(lim) != 4 || lim[0].ID != ids[20].XID() || lim[3].ID != ids[17].XID() {
			t.Fatalf("reverse limit 4: %+v", lim)
		}
		if got := readAll(t, c, q, "s", ids[20], ids[10], 0, false); len(got) != 0 {
			t.Fatalf("from > to read %d records", len(got))
		}
		// The cursor reads page by page.
		cur, err := c.NewCursor(mustRef(t, q, "s"), ids[0].XID(), xid.Max, false)
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		for !cur.Done() {
			p, err := cur.Next(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(p.Records))
		}
		// Three full pages; the fourth, short (empty), ends the range.
		if fmt.Sprint(sizes) != "[100 100 100 0]" {
			t.Fatalf("cursor pages %v, want [100 100 100 0]", sizes)
		}
		// Info, Top, Len.
		in, err := c.Info(ctx, mustRef(t, q, "s"))
		if err != nil {
			t.Fatal(err)
		}
		if !in.Exists || in.Length != 301 || in.First != first || in.Last != ids[299] || in.Top != ids[299] {
			t.Fatalf("Info = %+v", in)
		}
		if l, err := c.Len(ctx, mustRef(t, q, "s")); err != nil || l != 301 {
			t.Fatalf("Len = %d, %v", l, err)
		}
		if in, err := c.Info(ctx, mustRef(t, q, "nothing")); err != nil || in.Exists || in.Top != 0 {
			t.Fatalf("Info of a missing stream = %+v, %v", in, err)
		}
	})
}

func TestBadBatchAppendsNothing(t *testing.T) {
	c := plain(t, Options{ChunkRecords: 2, Limits: Limits{MaxBytes: 64}})
	ctx := testCtx(t)
	q := queueName(t)
	good := fields("a", "1")
	cases := []struct {
		bad  []Field
		want error
	}{
		{fields("a", "1", "a", "2"), ErrDuplicateField},
		{fields("a", "\xff\xfe"), ErrInvalidUTF8},
		{nil, ErrEmptyRecord},
		{fields("a", string(make([]byte, 100))), ErrTooLarge},
	}
	for _, tc := range cases {
		batch := [][]Field{good, good, good, good, tc.bad, good}
		ids, err := c.AppendBatch(ctx, mustRef(t, q, "s"), batch)
		var re *RecordError
		if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Index != 4 || ids != nil {
			t.Fatalf("batch with a bad 5th record: ids %v, err %v; want %v at index 4", ids, err, tc.want)
		}
	}
	if n, err := c.Len(ctx, mustRef(t, q, "s")); err != nil || n != 0 {
		t.Fatalf("the stream has %d entries after bad batches (%v), want 0", n, err)
	}
	for _, bad := range []string{"", "a:b", "{x}", string(make([]byte, names.MaxLen+1))} {
		if _, err := names.ParseStreamRef(q, bad); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("stream name %q: %v, want names.ErrInvalid", bad, err)
		}
		if _, err := names.ParseStreamRef(bad, "s"); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("queue name %q: %v, want names.ErrInvalid", bad, err)
		}
	}
	if _, err := c.Append(ctx, names.StreamRef{}, good...); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("no stream: %v, want names.ErrInvalid", err)
	}
}

// Entries written by other clients are records like any other, whatever
// their id or bytes: an id before the brand epoch, a sequence of 2^22 or
// more, duplicate names, bytes that are not UTF-8, an empty value.
func TestForeignEntriesReported(t *testing.T) {
	c := plain(t, Options{PageSize: 2})
	ctx := testCtx(t)
	q := queueName(t)
	key := StreamKey(mustRef(t, q, "s"))
	xadd := func(xid string, kv ...string) {
		t.Helper()
		err := c.rdb.Do(ctx, c.rdb.B().Arbitrary("XADD").Keys(key).Args(append([]string{xid}, kv...)...).Build()).Error()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := brand.FirstAt(time.Now())
	ms := uint64(now.Time().UnixMilli())
	want := []Record{
		{ID: xid.ID{Ms: 1, Seq: 1}, Fields: fields("a", "1")},                 // before the epoch
		{ID: now.XID(), Fields: fields("a", "1")},                             // a branded record
		{ID: xid.ID{Ms: ms, Seq: 1 << 22}, Fields: fields("a", "1")},          // sequence too large
		{ID: xid.ID{Ms: ms + 1}, Fields: fields("a", "1", "a", "2")},          // duplicate names
		{ID: xid.ID{Ms: ms + 2}, Fields: fields("a", "\xff", "\x00\xfe", "")}, // binary, empty value
		{ID: xid.ID{Ms: ms + 3}, Fields: fields("b", "2")},                    // a branded record
	}
	for _, r := range want {
		var kv []string
		for _, f := range r.Fields {
			kv = append(kv, f.Name, f.Value)
		}
		xadd(r.ID.String(), kv...)
	}
	var got []Record
	for rec, err := range c.Read(ctx, mustRef(t, q, "s"), xid.Min, xid.Max, 0, false) {
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		got = append(got, rec)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v, want %+v", got, want)
	}
	// Reverse, and a bounded range, see them too.
	rev := readAll(t, c, q, "s", 0, brand.Max, 0, true)
	if len(rev) != len(want) || rev[0].ID != want[5].ID || rev[5].ID != want[0].ID {
		t.Fatalf("reverse read %+v", rev)
	}
	var mid []Record
	for rec, err := range c.Read(ctx, mustRef(t, q, "s"), xid.ID{Ms: 1, Seq: 1}, xid.ID{Ms: ms, Seq: 1 << 22}, 0, false) {
		if err != nil {
			t.Fatal(err)
		}
		mid = append(mid, rec)
	}
	if !reflect.DeepEqual(mid, want[:3]) {
		t.Fatalf("read [1-1, %d-%d]: %+v", ms, 1<<22, mid)
	}
	// The top of a stream whose last entry has a too-large sequence is
	// still usable: appends land above it.
	xadd(fmt.Sprintf("%d-%d", now.Time().UnixMilli()+5, 1<<40), "a", "1")
	id, err := c.Append(ctx, mustRef(t, q, "s"), fields("after", "foreign top")...)
	if err != nil {
		t.Fatal(err)
	}
	if id.Millis() <= now.Millis()+5 {
		t.Fatalf("appended %s below the foreign top", id.RedisID())
	}
}

// Two producers whose minters mint the same ids: the second one's chunk is
// rejected as not above the top, re-minted above it, and lands after the
// first's. No append is lost, order holds.
func TestAppendRemintsOnCollision(t *testing.T) {
	t0 := time.Now()
	eachServer(t, Options{}, func(t *testing.T, a *Client) {
		ctx := testCtx(t)
		b := connect(t, a.ep.String(), Options{Minter: fixedMinter(t, t0)})
		a.minter = fixedMinter(t, t0)
		q := queueName(t)
		batch := [][]Field{fields("who", "x"), fields("who", "y"), fields("who", "z")}
		ida, err := a.AppendBatch(ctx, mustRef(t, q, "s"), batch)
		if err != nil {
			t.Fatal(err)
		}
		idb, err := b.AppendBatch(ctx, mustRef(t, q, "s"), batch)
		if err != nil {
			t.Fatal(err)
		}
		if b.Stats().Remints != 1 || a.Stats().Remints != 0 {
			t.Fatalf("remints: a %d, b %d; want 0 and 1", a.Stats().Remints, b.Stats().Remints)
		}
		if idb[0] <= ida[2] {
			t.Fatalf("b's ids %v not above a's %v", idb, ida)
		}
		recs := readAll(t, a, q, "s", 0, brand.Max, 0, false)
		checkIncreasing(t, recs, false)
		if len(recs) != 6 || recs[3].ID != idb[0].XID() {
			t.Fatalf("stream has %d records", len(recs))
		}
	})
}

// A chunk sent twice with the same ids (its first reply lost) is in the
// stream once; the same ids with other fields are another producer's chunk
// and are not taken for it.
func TestChunkRetryIsIdempotent(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		key := StreamKey(mustRef(t, q, "s"))
		ids := make([]brand.ID, 3)
		if err := c.mint(ids, 0); err != nil {
			t.Fatal(err)
		}
		recs := [][]Field{fields("a", "1"), fields("b", "2"), fields("c", "3")}
		run := func(retry bool, recs [][]Field) []string {
			t.Helper()
			reply, err := c.lua.append.Exec(ctx, c.rdb, []string{key}, appendArgs(retry, ids, recs)).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			return reply
		}
		if r := run(false, recs); r[0] != "OK" {
			t.Fatalf("first send: %q", r)
		}
		if r := run(true, recs); r[0] != "LANDED" {
			t.Fatalf("retry of a landed chunk: %q, want LANDED", r)
		}
		if r := run(false, recs); r[0] != "TOP" {
			t.Fatalf("fresh send of used ids: %q, want TOP", r)
		}
		other := [][]Field{fields("a", "1"), fields("b", "2"), fields("c", "other")}
		if r := run(true, other); r[0] != "TOP" {
			t.Fatalf("retry whose ids hold other fields: %q, want TOP", r)
		}
		if n, _ := c.Len(ctx, mustRef(t, q, "s")); n != 3 {
			t.Fatalf("stream has %d entries, want 3", n)
		}
	})
}

// End to end: the server runs the append but its reply is lost on the way
// back. The client sends the chunk again with the same ids and counts it as
// landed: one copy in the stream.
func TestLostReplyRetriedOnce(t *testing.T) {
	eachAppendPath(t, func(t *testing.T, txMin int) {
		lostReplyRetriedOnce(t, txMin)
	})
}

func lostReplyRetriedOnce(t *testing.T, txMin int) {
	c, proxy := proxied(t, Options{RetryBackoff: time.Millisecond})
	usePath(t, c, txMin)
	ctx := testCtx(t)
	q := queueName(t)
	proxy.DropReplies(1)
	ids, err := c.AppendBatch(ctx, mustRef(t, q, "s"), [][]Field{fields("a", "1"), fields("a", "2")})
	if err != nil {
		t.Fatal(err)
	}
	if proxy.Dropped() != 1 || c.Stats().Retries != 1 {
		t.Fatalf("dropped %d replies, client retried %d times; want 1 and 1", proxy.Dropped(), c.Stats().Retries)
	}
	recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
	if len(recs) != 2 || recs[0].ID != ids[0].XID() || recs[1].ID != ids[1].XID() {
		t.Fatalf("stream holds %+v, want the two records once under %v", recs, ids)
	}
}

// When every reply is lost, the append fails with ErrOutcomeUnknown and
// names the ids under which the chunk is (or is not) in the stream.
func TestOutcomeUnknown(t *testing.T) {
	eachAppendPath(t, outcomeUnknown)
}

func outcomeUnknown(t *testing.T, txMin int) {
	c, proxy := proxied(t, Options{RetryBackoff: time.Millisecond, AppendRetries: 2})
	usePath(t, c, txMin)
	ctx := testCtx(t)
	q := queueName(t)
	proxy.DropReplies(1 << 30)
	_, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "1")...)
	var ae *AppendError
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &ae) || len(ae.Unknown) != 1 {
		t.Fatalf("Append = %v, want ErrOutcomeUnknown with the chunk's id", err)
	}
	direct := plain(t, Options{})
	recs := readAll(t, direct, q, "s", 0, brand.Max, 0, false)
	if len(recs) != 1 || recs[0].ID != ae.Unknown[0].XID() {
		t.Fatalf("stream holds %+v; want the record once, under %v", recs, ae.Unknown)
	}
}

func TestSetID(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		id, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "1")...)
		if err != nil {
			t.Fatal(err)
		}
		w := id + 1_000_000
		if top, err := c.SetID(ctx, mustRef(t, q, "s"), w.XID()); err != nil || top != w.XID() {
			t.Fatalf("SetID raise: %v, %v", top, err)
		}
		if top, err := c.SetID(ctx, mustRef(t, q, "s"), (id + 5).XID()); err != nil || top != w.XID() {
			t.Fatalf("SetID below the top must keep it: %v, %v", top, err)
		}
		next, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "2")...)
		if err != nil || next <= w {
			t.Fatalf("append after SetID landed at %v (%v), want above %v", next, err, w)
		}
		// A missing stream (Redis lost it) is created empty with that top.
		if top, err := c.SetID(ctx, mustRef(t, q, "gone"), w.XID()); err != nil || top != w.XID() {
			t.Fatalf("SetID on a missing stream: %v, %v", top, err)
		}
		if in, err := c.Info(ctx, mustRef(t, q, "gone")); err != nil || in.Length != 0 || in.Top != w {
			t.Fatalf("after SetID on a missing stream: %+v, %v", in, err)
		}
		if got, err := c.Append(ctx, mustRef(t, q, "gone"), fields("a", "1")...); err != nil || got <= w {
			t.Fatalf("append to a recreated stream landed at %v (%v), want above %v", got, err, w)
		}
	})
}

// Concurrent Appends from one client never collide with each other: each
// stream has one chunk in flight at a time, minted when it is sent, and
// waiting records share it.
func TestConcurrentAppendsShareChunks(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		const workers, each = 16, 100
		got := make([][]brand.ID, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					id, err := c.Append(ctx, mustRef(t, q, "s"), fields("w", strconv.Itoa(w), "i", strconv.Itoa(i))...)
					if err != nil {
						t.Error(err)
						return
					}
					got[w] = append(got[w], id)
				}
			})
		}
		wg.Wait()
		recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
		if len(recs) != workers*each {
			t.Fatalf("stream has %d records, want %d", len(recs), workers*each)
		}
		byID := map[xid.ID]Record{}
		for _, r := range recs {
			byID[r.ID] = r
		}
		for w, ids := range got {
			for i, id := range ids {
				r, ok := byID[id.XID()]
				if !ok || r.Fields[0].Value != strconv.Itoa(w) || r.Fields[1].Value != strconv.Itoa(i) {
					t.Fatalf("worker %d append %d: id %v holds %+v", w, i, id, r)
				}
				if i > 0 && id <= ids[i-1] {
					t.Fatalf("worker %d: append %d not after append %d", w, i, i-1)
				}
			}
		}
		st := c.Stats()
		if st.Remints != 0 {
			t.Fatalf("%d re-mints among one client's own appends", st.Remints)
		}
		t.Logf("%d appends in %d chunks", workers*each, st.Chunks)
	})
}

// An Append whose context ends while its record waits for the send slot
// appends nothing.
func TestCancelledWaitingAppend(t *testing.T) {
	c := plain(t, Options{})
	ctx := testCtx(t)
	q := queueName(t)
	slot := c.slot(StreamKey(mustRef(t, q, "s")))
	if err := slot.acquire(ctx); err != nil { // hold the slot: appends wait
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Append(actx, mustRef(t, q, "s"), fields("a", "1")...)
		done <- err
	}()
	for queued := 0; queued == 0; { // wait until the record is queued
		slot.mu.Lock()
		queued = len(slot.queue)
		slot.mu.Unlock()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Append = %v, want context.Canceled", err)
	}
	slot.release()
	if n, err := c.Append(ctx, mustRef(t, q, "s"), fields("b", "2")...); err != nil || n == 0 {
		t.Fatalf("Append after release: %v, %v", n, err)
	}
	recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
	if len(recs) != 1 || recs[0].Fields[0].Name != "b" {
		t.Fatalf("stream holds %+v; the cancelled record must not be there", recs)
	}
}

// An Append or AppendBatch whose context has already ended sends nothing.
func TestAppendWithEndedContext(t *testing.T) {
	c := plain(t, Options{})
	q := queueName(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	for range 20 { // select would pick at random if the check were missing
		if _, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "1")...); !errors.Is(err, context.Canceled) {
			t.Fatalf("Append = %v, want context.Canceled", err)
		}
		if _, err := c.AppendBatch(ctx, mustRef(t, q, "s"), [][]Field{fields("a", "1")}); !errors.Is(err, context.Canceled) ||
			errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("AppendBatch = %v, want context.Canceled (not an unknown outcome)", err)
		}
	}
	if n, _ := c.Len(testCtx(t), mustRef(t, q, "s")); n != 0 {
		t.Fatalf("%d records appended with an ended context", n)
	}
}

// A restarted server answers LOADING until its data is loaded; it runs
// nothing meanwhile. An append that meets LOADING, first or on the retry of
// a chunk whose reply was lost, is sent again with the same ids and lands
// once it stops: each record once.
func TestAppendRetriesLoading(t *testing.T) {
	eachAppendPath(t, func(t *testing.T, txMin int) { appendRetriesLoading(t, txMin) })
}

func appendRetriesLoading(t *testing.T, txMin int) {
	eachLostReplies(t, func(t *testing.T, drops int64) {
		c, proxy := proxied(t, Options{RetryBackoff: time.Millisecond})
		usePath(t, c, txMin)
		ctx := testCtx(t)
		q := queueName(t)
		first, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "0")...) // the script is loaded
		if err != nil {
			t.Fatal(err)
		}
		proxy.DropReplies(drops)
		proxy.AnswerLoading(3)
		ids, err := c.AppendBatch(ctx, mustRef(t, q, "s"), [][]Field{fields("a", "1"), fields("a", "2")})
		if err != nil {
			t.Fatalf("AppendBatch after LOADING: %v", err)
		}
		wantPlayed(t, c, proxy, drops+3)
		recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
		want := append([]brand.ID{first}, ids...)
		if len(recs) != len(want) {
			t.Fatalf("stream holds %d records, want %d (each once)", len(recs), len(want))
		}
		for i, r := range recs {
			if r.ID != want[i].XID() {
				t.Fatalf("record %d is %v, want %v", i, r.ID, want[i])
			}
		}
	})
}

// LOADING that outlasts the retries fails the append without
// ErrOutcomeUnknown when no reply was lost (nothing ran), and with it when
// one was (the lost call may have run).
func TestAppendLoadingOutlastsRetries(t *testing.T) {
	eachAppendPath(t, func(t *testing.T, txMin int) { appendLoadingOutlastsRetries(t, txMin) })
}

func appendLoadingOutlastsRetries(t *testing.T, txMin int) {
	eachLostReplies(t, func(t *testing.T, drops int64) {
		c, proxy := proxied(t, Options{RetryBackoff: time.Millisecond, AppendRetries: 2})
		usePath(t, c, txMin)
		ctx := testCtx(t)
		q := queueName(t)
		if _, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "0")...); err != nil {
			t.Fatal(err)
		}
		proxy.DropReplies(drops)
		proxy.AnswerLoading(1 << 30)
		_, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "1")...)
		if err == nil || !strings.Contains(err.Error(), "LOADING") || errors.Is(err, ErrOutcomeUnknown) != (drops > 0) {
			t.Fatalf("Append under LOADING = %v; want the LOADING error, outcome unknown only after a lost reply", err)
		}
		want := int64(1) + drops // the warm-up, and the dropped call that ran
		if n, err := plain(t, Options{}).Len(ctx, mustRef(t, q, "s")); err != nil || n != want {
			t.Fatalf("stream holds %d entries (%v), want %d", n, err, want)
		}
	})
}

// A chunk that landed, lost its reply, and was trimmed (in part or whole)
// before its retry is never appended a second time under new ids: a retry
// that finds any of its records takes it as landed, and one that finds none
// where they may have been trimmed reports the outcome unknown instead of
// re-minting. Only a retry that can prove the chunk never landed (an entry
// below its first id is still there, and none at or above it was deleted)
// re-mints.
func TestChunkRetryAfterTrim(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		key := StreamKey(mustRef(t, q, "s"))
		do := func(cmd rueidis.Completed) {
			t.Helper()
			if err := c.rdb.Do(ctx, cmd).Error(); err != nil {
				t.Fatal(err)
			}
		}
		send := func(retry bool, ids []brand.ID, recs [][]Field) []string {
			t.Helper()
			reply, err := c.lua.append.Exec(ctx, c.rdb, []string{key}, appendArgs(retry, ids, recs)).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			return reply
		}
		mint := func(n int) []brand.ID {
			t.Helper()
			ids := make([]brand.ID, n)
			if err := c.mint(ids, 0); err != nil {
				t.Fatal(err)
			}
			return ids
		}
		recs := [][]Field{fields("a", "1"), fields("b", "2"), fields("c", "3")}

		// Landed, then its first record trimmed: the rest proves it landed.
		ids := mint(3)
		if r := send(false, ids, recs); r[0] != "OK" {
			t.Fatalf("first send: %q", r)
		}
		do(c.rdb.B().Xtrim().Key(key).Minid().Threshold(ids[1].RedisID()).Build())
		if r := send(true, ids, recs); r[0] != "LANDED" {
			t.Fatalf("retry of a chunk trimmed in part: %q, want LANDED", r)
		}
		// Its middle record deleted: the others still prove it.
		do(c.rdb.B().Xdel().Key(key).Id(ids[1].RedisID()).Build())
		if r := send(true, ids, recs); r[0] != "LANDED" {
			t.Fatalf("retry of a chunk with a record deleted: %q, want LANDED", r)
		}
		// Trimmed whole: it may have landed; nothing tells.
		do(c.rdb.B().Xtrim().Key(key).Maxlen().Threshold("0").Build())
		if r := send(true, ids, recs); r[0] != "UNKNOWN" {
			t.Fatalf("retry of a chunk trimmed whole: %q, want UNKNOWN", r)
		}

		// Never landed: an entry below it is there and nothing at or above
		// it was deleted, so another producer's entry above it is the top.
		below := mint(1)
		send(false, below, recs[:1])
		never := mint(3)
		above := mint(1)
		send(false, above, recs[:1])
		if r := send(true, never, recs); r[0] != "TOP" {
			t.Fatalf("retry of a chunk that provably never landed: %q, want TOP", r)
		}
		// Once an entry above its first id was deleted, that proof is gone.
		do(c.rdb.B().Xdel().Key(key).Id(above[0].RedisID()).Build())
		if r := send(true, never, recs); r[0] != "UNKNOWN" {
			t.Fatalf("retry after a deletion above its first id: %q, want UNKNOWN", r)
		}
		if n, _ := c.Len(ctx, mustRef(t, q, "s")); n != 1 {
			t.Fatalf("stream has %d entries, want 1", n)
		}
	})
}

// End to end: the chunk runs, its reply is lost, and the stream is trimmed
// before the client retries. Trimmed in part, the append succeeds under its
// first ids, once; trimmed whole, it fails with ErrOutcomeUnknown naming
// them. Before, both re-minted and appended the records a second time.
func TestLostReplyThenTrimmed(t *testing.T) {
	eachAppendPath(t, func(t *testing.T, txMin int) { lostReplyThenTrimmed(t, txMin) })
}

func lostReplyThenTrimmed(t *testing.T, txMin int) {
	for _, keep := range []string{"1", "0"} {
		t.Run("keep="+keep, func(t *testing.T) {
			c, proxy := proxied(t, Options{RetryBackoff: time.Millisecond})
			usePath(t, c, txMin)
			direct := plain(t, Options{})
			ctx := testCtx(t)
			q := queueName(t)
			key := StreamKey(mustRef(t, q, "s"))
			trimmed := make(chan error, 1)
			proxy.OnDrop(func() {
				trimmed <- direct.rdb.Do(ctx, direct.rdb.B().Xtrim().Key(key).Maxlen().Threshold(keep).Build()).Error()
			})
			proxy.DropReplies(1)
			ids, err := c.AppendBatch(ctx, mustRef(t, q, "s"), [][]Field{fields("a", "1"), fields("a", "2"), fields("a", "3")})
			if err := <-trimmed; err != nil {
				t.Fatal(err)
			}
			recs := readAll(t, direct, q, "s", 0, brand.Max, 0, false)
			if keep == "1" {
				if err != nil {
					t.Fatalf("AppendBatch = %v, want the chunk taken as landed", err)
				}
				if len(recs) != 1 || recs[0].ID != ids[2].XID() {
					t.Fatalf("stream holds %d records (%+v); want the last of %v once", len(recs), recs, ids)
				}
				return
			}
			var ae *AppendError
			if !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &ae) || len(ae.Unknown) != 3 || len(ids) != 0 {
				t.Fatalf("AppendBatch = %v, %v; want ErrOutcomeUnknown naming the chunk's 3 ids", ids, err)
			}
			if len(recs) != 0 {
				t.Fatalf("stream holds %d records, want none (the chunk was trimmed whole, and not appended again)", len(recs))
			}
		})
	}
}
