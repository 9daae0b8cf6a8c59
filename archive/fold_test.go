package archive

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

func rec(id brand.ID) mq.Record {
	return mq.Record{ID: id.XID(), Fields: []mq.Field{{Name: "n", Value: fmt.Sprint(uint64(id))}}}
}

func recs(ids ...brand.ID) []mq.Record {
	out := make([]mq.Record, len(ids))
	for i, id := range ids {
		out[i] = rec(id)
	}
	return out
}

func testVolume(t *testing.T) *graft.Volume {
	st := openStore(t, t.TempDir())
	v, err := st.CreateVolume(testCtx(t), volName("archive.q.s"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestFoldOneCommitAndFrontier(t *testing.T) {
	ctx := testCtx(t)
	v := testVolume(t)
	st, err := Frontier(ctx, v)
	if err != nil || !st.Empty() {
		t.Fatalf("fresh volume: %+v, %v", st, err)
	}
	if st, err = Fold(ctx, v, nil); err != nil || !st.Empty() || v.Head() != 0 {
		t.Fatalf("empty fold: %+v, %v, head %d", st, err, v.Head())
	}
	st, err = Fold(ctx, v, recs(10, 20, 30))
	if err != nil {
		t.Fatal(err)
	}
	if st != (State{Pages: 3, W: brand.ID(30).XID(), LSN: 1}) || v.Head() != 1 {
		t.Fatalf("after fold: %+v head %d", st, v.Head())
	}
	cs, err := v.Commits(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || len(cs[0].Pages) != 3 || len(cs[0].Meta) != 2 || cs[0].Pages[0] != graft.ArchiveBase {
		t.Fatalf("one commit with the pages and both metadata keys, got %+v", cs)
	}
	if st, err = Fold(ctx, v, recs(31)); err != nil || st.W != brand.ID(31).XID() || st.Pages != 4 || st.LSN != 2 {
		t.Fatalf("second fold: %+v %v", st, err)
	}
	if got, _ := Frontier(ctx, v); got != st {
		t.Fatalf("Frontier %+v, want %+v", got, st)
	}
}

func TestFoldRejectsBadSlicesBeforeAnySideEffect(t *testing.T) {
	ctx := testCtx(t)
	v := testVolume(t)
	if _, err := Fold(ctx, v, recs(10, 20)); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]mq.Record{
		"not increasing": recs(30, 30),
		"decreasing":     recs(40, 35),
		"at W":           recs(20, 50),
		"below W":        recs(5),
		"no fields":      {{ID: brand.ID(60).XID()}},
	}
	for name, slice := range bad {
		_, err := Fold(ctx, v, slice)
		var se *SliceError
		if !errors.Is(err, ErrBadSlice) || !errors.As(err, &se) {
			t.Errorf("%s: err %v, want a *SliceError wrapping ErrBadSlice", name, err)
		}
	}
	if st, _ := Frontier(ctx, v); v.Head() != 1 || st.W != brand.ID(20).XID() || st.Pages != 2 {
		t.Fatalf("a refused slice changed the volume: head %d, %+v", v.Head(), st)
	}
}

// TestFoldRecordAbovePage: a record whose page would be above graft's
// page limit is folded across pages (span.go) and reads back.
func TestFoldRecordAbovePage(t *testing.T) {
	ctx := testCtx(t)
	st := openStore(t, t.TempDir())
	v, _ := st.CreateVolume(ctx, volName("archive.q.s"))
	big := mq.Record{ID: brand.ID(1).XID(), Fields: []mq.Field{{Name: "a", Value: string(make([]byte, graft.DefaultMaxPageSize))}}}
	got, err := Fold(ctx, v, []mq.Record{big})
	if err != nil || got.Pages != 2 {
		t.Fatalf("fold: %+v, %v", got, err)
	}
	if recs := readAllRecords(t, Read(ctx, v, xid.Min, xid.Max, false)); !reflect.DeepEqual(recs, []mq.Record{big}) {
		t.Fatalf("read back %d records", len(recs))
	}
}

func TestReadRangesByBisection(t *testing.T) {
	ctx := testCtx(t)
	v := testVolume(t)
	var all []brand.ID
	for i := 0; i < 5; i++ {
		var chunk []brand.ID
		for j := 0; j < 40; j++ {
			chunk = append(chunk, brand.ID(10*(len(all)+len(chunk)+1)))
		}
		if _, err := Fold(ctx, v, recs(chunk...)); err != nil {
			t.Fatal(err)
		}
		all = append(all, chunk...)
	}
	for _, c := range []struct{ from, to brand.ID }{{0, brand.Max}, {10, 10}, {11, 19}, {15, 1005}, {1995, 5000}, {2000, 2000}, {3000, 4000}, {500, 400}} {
		var want []brand.ID
		for _, id := range all {
			if id >= c.from && id <= c.to {
				want = append(want, id)
			}
		}
		if got := ids(t, Read(ctx, v, bx(c.from), bx(c.to), false)); !slices.Equal(got, want) {
			t.Errorf("[%d, %d]: %v, want %v", c.from, c.to, got, want)
		}
		slices.Reverse(want)
		if got := ids(t, Read(ctx, v, bx(c.from), bx(c.to), true)); !slices.Equal(got, want) {
			t.Errorf("reverse [%d, %d]: %v, want %v", c.from, c.to, got, want)
		}
	}
	// By time: ids minted in one millisecond.
	ms := brand.ID(1000 << 22)
	v2 := testVolume(t)
	if _, err := Fold(ctx, v2, recs(ms-1, ms, ms+5, ms+(1<<22))); err != nil {
		t.Fatal(err)
	}
	at := ms.Time()
	if got := ids(t, ReadTime(ctx, v2, at, at, false)); !slices.Equal(got, []brand.ID{ms, ms + 5}) {
		t.Fatalf("ReadTime: %v", got)
	}
}
