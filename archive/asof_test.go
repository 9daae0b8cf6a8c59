package archive

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// TestReadAsOf: a read as of an LSN from before a retention drop returns
// what the archive held then, the records dropped since included, while
// the store's History keeps that state; LSNAt maps a time to that LSN.
// Without a history the volume's GC passes the state, and the read fails
// wrapping ErrAsOfGone, saying what is kept; an LSN above the head fails
// wrapping ErrAsOfFuture.
func TestReadAsOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history time.Duration
	}{{"history", time.Hour}, {"no history", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			st, err := graft.Open(ctx, t.TempDir(), graft.Options{History: func(names.Volume) time.Duration { return tc.history }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			e := &env{t: t, live: connect(t, testRedisURL(t)), st: st, q: queueName(t), s: "events"}
			if e.a, err = New(Options{Store: st, Live: e.live, Logger: quietLog()}); err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			all := e.append(ctx, 100)
			res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 0, MaxAge: time.Nanosecond})
			if err != nil || res.Folded != 100 {
				t.Fatalf("cycle: %+v, %v", res, err)
			}
			lsn, at := res.State.LSN, time.Now()
			dropper, err := New(Options{Store: st, Live: e.live, Logger: quietLog(), Retain: Retention{Count: 10}})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := dropper.Cycle(ctx, e.ref(), Window{Keep: 0, MaxAge: time.Nanosecond}); err != nil || res.Dropped != 90 {
				t.Fatalf("retention cycle: %+v, %v", res, err)
			}
			vol := e.volume(ctx)
			if _, err := vol.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if got := ids(t, Read(ctx, vol, xid.Min, xid.Max, false)); !slices.Equal(got, all[90:]) {
				t.Fatalf("the head reads %d records, want the 10 retained", len(got))
			}
			head := vol.Head()
			future := ReadAsOf(ctx, vol, head+1, xid.Min, xid.Max, false)
			for _, err := range future {
				var ae *AsOfError
				if !errors.Is(err, ErrAsOfFuture) || !errors.As(err, &ae) || ae.Head != head {
					t.Fatalf("as of LSN %d, above the head %d: %v, want ErrAsOfFuture", head+1, head, err)
				}
			}
			if tc.history == 0 {
				for _, err := range ReadAsOf(ctx, vol, lsn, xid.Min, xid.Max, false) {
					var ae *AsOfError
					if !errors.Is(err, ErrAsOfGone) || !errors.As(err, &ae) || ae.Horizon <= lsn {
						t.Fatalf("as of LSN %d with no history: %v, want ErrAsOfGone naming a horizon above it", lsn, err)
					}
					t.Logf("as of a state GC passed: %v", err)
				}
				if _, err := LSNAt(ctx, vol, before); !errors.Is(err, ErrAsOfGone) {
					t.Fatalf("LSNAt before the kept commits: %v, want ErrAsOfGone", err)
				}
				return
			}
			if got := ids(t, ReadAsOf(ctx, vol, lsn, xid.Min, xid.Max, false)); !slices.Equal(got, all) {
				t.Fatalf("as of LSN %d (before the drop) reads %d records, want all 100", lsn, len(got))
			}
			rev := ids(t, ReadAsOf(ctx, vol, lsn, bx(all[5]), bx(all[9]), true))
			if want := []brand.ID{all[9], all[8], all[7], all[6], all[5]}; !slices.Equal(rev, want) {
				t.Fatalf("as of LSN %d, a range newest first: %v, want %v", lsn, rev, want)
			}
			if got, err := LSNAt(ctx, vol, at); err != nil || got != lsn {
				t.Fatalf("LSNAt(after the fold) = %d, %v; want %d", got, err, lsn)
			}
			if got, err := LSNAt(ctx, vol, before.Add(-time.Hour)); err != nil || got != 0 {
				t.Fatalf("LSNAt(before any commit) = %d, %v; want 0", got, err)
			}
			if got := ids(t, ReadAsOf(ctx, vol, 0, xid.Min, xid.Max, false)); len(got) != 0 {
				t.Fatalf("as of LSN 0 reads %d records, want none", len(got))
			}
		})
	}
}
