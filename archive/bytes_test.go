package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// scriptXAdd adds one entry as another producer would: any id, any bytes.
var scriptXAdd = mq.NewScript(`return {redis.call('XADD', KEYS[1], unpack(ARGV))}`)

// xadd adds an entry of id text (or "*") and fields kv to e's stream, raw,
// and returns its id.
func (e *env) xadd(ctx context.Context, id string, kv ...string) xid.ID {
	e.t.Helper()
	got, err := e.live.Run(ctx, scriptXAdd, []string{mq.StreamKey(e.ref())}, append([]string{id}, kv...)).Strings()
	if err != nil || len(got) != 1 {
		e.t.Fatalf("XADD %s: %q, %v", id, got, err)
	}
	x, err := xid.Parse(got[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return x
}

// readAllRecords reads seq whole, failing the test on an error.
func readAllRecords(t *testing.T, seq func(func(mq.Record, error) bool)) []mq.Record {
	t.Helper()
	var out []mq.Record
	for r, err := range seq {
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// checkMerge compares the merge-read of e's stream, both directions and over
// a few ranges, with want.
func (e *env) checkMerge(t *testing.T, ctx context.Context, want []mq.Record) {
	t.Helper()
	if got := readAllRecords(t, MergeRead(ctx, e.source(ctx), All())); !reflect.DeepEqual(got, want) {
		t.Fatalf("merge-read:\n got %v\nwant %v", got, want)
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if got := readAllRecords(t, MergeRead(ctx, e.source(ctx), Range{From: xid.Min, To: xid.Max, Reverse: true, PageSize: 2})); !reflect.DeepEqual(got, rev) {
		t.Fatalf("reverse merge-read:\n got %v\nwant %v", got, rev)
	}
	for i := range want {
		for j := i; j < len(want); j += 3 {
			r := Range{From: want[i].ID, To: want[j].ID, PageSize: 1 + i%3}
			if got := readAllRecords(t, MergeRead(ctx, e.source(ctx), r)); !reflect.DeepEqual(got, want[i:j+1]) {
				t.Fatalf("merge-read [%v, %v]: %d records, want %d", want[i].ID, want[j].ID, len(got), j+1-i)
			}
		}
	}
}

// eachServer runs f against a plain redis-server and against the 3-master
// Cluster, with the URL to connect to.
func eachServer(t *testing.T, f func(t *testing.T, url string)) {
	t.Run("redis", func(t *testing.T) { f(t, servers.Redis(t).URL) })
	t.Run("cluster", func(t *testing.T) { f(t, "redis://"+strings.Join(servers.Cluster(t).Addrs, ",")) })
}

// TestCycleForeignEntries: entries other producers write that are not
// branded records (bytes that are not UTF-8, duplicate names, empty values,
// an id before the brand epoch, a sequence of 2^22 or more) are folded,
// trimmed and merge-read like any other; the watermark may be such an id.
// On a plain server and on the Cluster.
func TestCycleForeignEntries(t *testing.T) { eachServer(t, testCycleForeignEntries) }

func testCycleForeignEntries(t *testing.T, url string) {
	ctx := testCtx(t)
	e := newEnv(t, url, Options{Chunk: 3})
	e.xadd(ctx, "0-1", "pre", "2024")                   // an id before the brand epoch
	e.xadd(ctx, "5-0", "dup", "1", "dup", "2")          // duplicate names, before the epoch
	e.append(ctx, 2)                                    // branded records
	e.xadd(ctx, "*", "bin", "\xff\xfe", "\x00\x80", "") // not UTF-8; an empty value
	e.xadd(ctx, "*", "a", "1", "a", "1")                // duplicate names, a branded id
	last := e.xadd(ctx, "*", "k", "v")
	big := e.xadd(ctx, fmt.Sprintf("%d-%d", last.Ms, 1<<22), "seq", "2^22") // a sequence past the branded range
	e.append(ctx, 2)
	want := readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))
	if len(want) != 10 || want[0].ID != (xid.ID{Ms: 0, Seq: 1}) || want[7].ID != big {
		t.Fatalf("live stream: %v", want)
	}
	// Fold all but the newest two: W is the entry of sequence 2^22.
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded != 8 || res.Trimmed != 8 || res.State.W != big || res.State.Pages != 8 {
		t.Fatalf("cycle: %+v", res)
	}
	seam, ok, err := GetArchived(ctx, e.live, e.ref())
	if err != nil || !ok || seam.W != big {
		t.Fatalf("seam cache %+v %v %v, want W %v", seam, ok, err, big)
	}
	m, err := e.live.HGetAll(ctx, SeamKey(e.ref()))
	if err != nil || m["w"] != big.String() || m["xid"] != big.String() {
		t.Fatalf("seam hash %v %v: w and xid are both the Redis id of a W without a branded id", m, err)
	}
	snap, err := e.volume(ctx).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := snap.Meta(ctx, MetaW)
	snap.Close()
	if err != nil || len(w) != 16 {
		t.Fatalf("archive.w %x %v, want 16 bytes", w, err)
	}
	if live := readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false)); !reflect.DeepEqual(live, want[8:]) {
		t.Fatalf("live after the cycle: %v", live)
	}
	if arch := readAllRecords(t, Read(ctx, e.volume(ctx), xid.Min, xid.Max, false)); !reflect.DeepEqual(arch, want[:8]) {
		t.Fatalf("archive after the cycle: %v", arch)
	}
	e.checkMerge(t, ctx, want)
	// Appends land above the foreign W; the next cycle folds across it.
	more := e.append(ctx, 3)
	if !big.Less(more[0].XID()) {
		t.Fatalf("append after a foreign W landed at %v, not above %v", more[0].XID(), big)
	}
	want = readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))
	want = append(readAllRecords(t, Read(ctx, e.volume(ctx), xid.Min, xid.Max, false)), want...)
	if res, err = e.a.Cycle(ctx, e.ref(), Window{Keep: 1}); err != nil || res.Folded != 4 || res.State.W != more[1].XID() {
		t.Fatalf("second cycle: %+v %v", res, err)
	}
	e.checkMerge(t, ctx, want)
	// Retention drops the oldest, foreign ones included.
	if _, n, err := Retain(ctx, e.volume(ctx), Retention{Count: 10}, e.a.opts.Clock()); err != nil || n != 2 {
		t.Fatalf("retain: %d %v", n, err)
	}
	e.checkMerge(t, ctx, want[2:])
}

// TestCycleForeignEntriesEach: each kind of foreign entry alone, as the
// oldest entry of its stream, no longer stops the stream's cycles; on a
// plain server and on the Cluster.
func TestCycleForeignEntriesEach(t *testing.T) { eachServer(t, testCycleForeignEntriesEach) }

func testCycleForeignEntriesEach(t *testing.T, url string) {
	for name, add := range map[string]func(ctx context.Context, e *env){
		"not UTF-8":    func(ctx context.Context, e *env) { e.xadd(ctx, "*", "a", "\xff") },
		"duplicate":    func(ctx context.Context, e *env) { e.xadd(ctx, "*", "a", "1", "a", "2") },
		"before epoch": func(ctx context.Context, e *env) { e.xadd(ctx, "0-1", "a", "1") },
		"sequence":     func(ctx context.Context, e *env) { e.xadd(ctx, "1704067200000-4194304", "a", "1") },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			e := newEnv(t, url, Options{Chunk: 4})
			add(ctx, e)
			e.append(ctx, 5)
			want := readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))
			for i := 0; i < 2; i++ {
				res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: int64(4 - 2*i)})
				if err != nil || res.State.W != want[len(want)-5+2*i].ID {
					t.Fatalf("cycle %d: %+v %v", i, res, err)
				}
			}
			e.checkMerge(t, ctx, want)
			if live := readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false)); len(live) != 2 {
				t.Fatalf("live: %d records, want 2", len(live))
			}
		})
	}
}

// TestCycleLargeEntries: entries larger than an archive page (3 MiB of
// binary bytes with a repeated name, and one of exactly a page) are
// folded, trimmed and merge-read byte for byte; an entry above
// MaxRecordBytes is reported (CycleResult.TooLarge), not archived, and
// trimmed with the rest, and the stream's cycles go on. On a plain server
// and on the Cluster.
func TestCycleLargeEntries(t *testing.T) { eachServer(t, testCycleLargeEntries) }

func testCycleLargeEntries(t *testing.T, url string) {
	ctx := testCtx(t)
	e := newEnv(t, url, Options{Chunk: 2})
	big := bigRecord(xid.ID{}, 3<<20)
	kv := func(r mq.Record) []string {
		var s []string
		for _, f := range r.Fields {
			s = append(s, f.Name, f.Value)
		}
		return s
	}
	e.append(ctx, 1)
	e.xadd(ctx, "*", kv(big)...)
	e.xadd(ctx, "*", "page", string(make([]byte, PageLimit)))
	e.append(ctx, 1)
	e.xadd(ctx, "*", kv(big)...)
	want := readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 1})
	if err != nil || res.Folded != 4 || res.Trimmed != 4 || res.State.W != want[3].ID || len(res.TooLarge) != 0 {
		t.Fatalf("cycle: %+v, %v", res, err)
	}
	e.checkMerge(t, ctx, want)

	after := e.append(ctx, 2)
	want = append(want[:4], readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))...)
	if res, err = e.a.Cycle(ctx, e.ref(), Window{Keep: 1}); err != nil || res.Folded != 2 || res.State.W != after[0].XID() {
		t.Fatalf("cycle: %+v, %v", res, err)
	}

	// An entry larger than the archive holds (here, by the test's limit,
	// 4 MiB) holds the trim below it: it and every entry after it stay
	// live, and each cycle reports it, until it is removed.
	e.a.maxRecord = 4 << 20
	over := e.xadd(ctx, "*", kv(bigRecord(xid.ID{}, 5<<20))...)
	rest := e.append(ctx, 2)
	for i := range 2 {
		res, err = e.a.Cycle(ctx, e.ref(), Window{Keep: 1})
		if err != nil || res.Folded != int64(1-i) || res.Trimmed != int64(1-i) || res.State.W != after[1].XID() ||
			len(res.TooLarge) != 1 || res.TooLarge[0].ID != over || !errors.Is(res.TooLarge[0], ErrTooLarge) {
			t.Fatalf("cycle %d at a too large entry: %+v, %v", i, res, err)
		}
		if ids := e.liveIDs(ctx); len(ids) != 3 || ids[0].XID() != over {
			t.Fatalf("cycle %d trimmed the too large entry or one after it: %d live", i, len(ids))
		}
	}
	want = append(want, readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))...)
	e.checkMerge(t, ctx, want)
	raw(t, e.live, "XDEL", mq.StreamKey(e.ref()), over.String())
	if res, err = e.a.Cycle(ctx, e.ref(), Window{Keep: 1}); err != nil || res.Folded != 1 || len(res.TooLarge) != 0 ||
		res.State.W != rest[0].XID() {
		t.Fatalf("the cycle once the entry is removed: %+v, %v", res, err)
	}
}

// TestCycleHugeEntry: a 100 MiB entry (Redis takes values up to 512 MB)
// folds in a commit of its own, is trimmed, and reads back byte-identical
// by the merge-read, with the entries around it.
func TestCycleHugeEntry(t *testing.T) {
	url := servers.Redis(t).URL
	ctx := testCtx(t)
	e := newEnv(t, url, Options{Chunk: 2})
	e.append(ctx, 1)
	v := bytes.Repeat([]byte("0123456789abcdef\x00\xff"), 100<<20/18+1)[:100<<20]
	huge := e.xadd(ctx, "*", "huge", string(v), "huge", "")
	after := e.append(ctx, 2)
	want := readAllRecords(t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))
	if len(want) != 4 || want[1].ID != huge {
		t.Fatalf("live: %d records", len(want))
	}
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 1})
	if err != nil || res.Folded != 3 || res.Trimmed != 3 || res.State.W != after[0].XID() || len(res.TooLarge) != 0 {
		t.Fatalf("cycle over a 100 MiB entry: %+v, %v", res, err)
	}
	e.checkMerge(t, ctx, want)
	got := readAllRecords(t, MergeRead(ctx, e.source(ctx), Range{From: huge, To: huge}))
	if len(got) != 1 || !bytes.Equal([]byte(got[0].Fields[0].Value), v) {
		t.Fatalf("the 100 MiB entry did not read back byte-identical")
	}
}
