package echostore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
)

func TestParseAsOf(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want echostore.AsOf
	}{
		{"1", echostore.AsOf{LSN: 1}},
		{"18446744073709551615", echostore.AsOf{LSN: 1<<64 - 1}},
		{"2026-03-01T12:00:00Z", echostore.AsOf{Time: at}},
		{"2026-03-01T13:00:00+01:00", echostore.AsOf{Time: at}},
		{"2026-03-01T12:00:00.5Z", echostore.AsOf{Time: at.Add(500 * time.Millisecond)}},
	} {
		got, err := echostore.ParseAsOf(tc.in)
		if err != nil || got.LSN != tc.want.LSN || !got.Time.Equal(tc.want.Time) {
			t.Errorf("ParseAsOf(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "18446744073709551616", "1e3", "0001-01-01T00:00:00Z", "yesterday", "2026-03-01", "12:00", " 1", "1 "} {
		if got, err := echostore.ParseAsOf(bad); !errors.Is(err, echostore.ErrInvalid) {
			t.Errorf("ParseAsOf(%q) = %+v, %v; want ErrInvalid", bad, got, err)
		}
	}
}

// FuzzParseAsOf: ParseAsOf never panics, and what it reads prints back to
// the same AsOf.
func FuzzParseAsOf(f *testing.F) {
	for _, s := range []string{"1", "42", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00.123456789+02:00", "", "x", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := echostore.ParseAsOf(s)
		if err != nil {
			if !errors.Is(err, echostore.ErrInvalid) {
				t.Fatalf("ParseAsOf(%q): %v, not ErrInvalid", s, err)
			}
			return
		}
		if a.IsZero() {
			t.Fatalf("ParseAsOf(%q) = the zero AsOf", s)
		}
		b, err := echostore.ParseAsOf(a.String())
		if err != nil || b.LSN != a.LSN || !b.Time.Equal(a.Time) {
			t.Fatalf("ParseAsOf(%q) = %+v prints %q, which reads %+v, %v", s, a, a.String(), b, err)
		}
	})
}

// TestReadAsOf: with Config.History, a read as of an LSN, or a time, from
// before a retention drop returns what the archive held then; without it
// the state is gone once the cycle's GC passed it, and the read says so.
func TestReadAsOf(t *testing.T) {
	for _, history := range []time.Duration{time.Hour, 0} {
		t.Run(history.String(), func(t *testing.T) {
			ctx := t.Context()
			node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir(), History: history})
			ref := streamRef(t, "asof")
			appendN(t, node, ref, 100)
			res, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}})
			if err != nil || res.Folded != 99 {
				t.Fatalf("cycle: %+v, %v", res, err)
			}
			lsn, at := res.State.LSN, time.Now()
			res, err = node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}, Retain: echostore.Retention{Count: 10}})
			if err != nil || res.Dropped != 89 {
				t.Fatalf("retention cycle: %+v, %v", res, err)
			}
			read := func(opts echostore.ReadOptions) ([]echostore.Record, error) {
				var out []echostore.Record
				for r, err := range node.Read(ctx, ref, opts) {
					if err != nil {
						return out, err
					}
					out = append(out, r)
				}
				return out, nil
			}
			head, err := read(echostore.ReadOptions{Side: echostore.ReadArchiveOnly})
			if err != nil || len(head) != 10 {
				t.Fatalf("the archive now: %d records, %v; want the 10 retained", len(head), err)
			}
			if _, err := read(echostore.ReadOptions{AsOf: echostore.AsOf{LSN: lsn}, Side: echostore.ReadLiveOnly}); !errors.Is(err, echostore.ErrInvalid) {
				t.Fatalf("a live-only read as of an LSN: %v, want ErrInvalid", err)
			}
			if history == 0 {
				_, err := read(echostore.ReadOptions{AsOf: echostore.AsOf{LSN: lsn}})
				if !errors.Is(err, archive.ErrAsOfGone) {
					t.Fatalf("as of LSN %d with no history: %v, want archive.ErrAsOfGone", lsn, err)
				}
				t.Logf("%v", err)
				return
			}
			for _, as := range []echostore.AsOf{{LSN: lsn}, {Time: at}} {
				then, err := read(echostore.ReadOptions{AsOf: as})
				if err != nil || len(then) != 99 || then[98].ID != head[9].ID {
					t.Fatalf("as of %s: %d records, %v; want the 99 folded before the drop", as, len(then), err)
				}
				few, err := read(echostore.ReadOptions{AsOf: as, Reverse: true, Limit: 3})
				if err != nil || len(few) != 3 || few[0].ID != then[98].ID || few[2].ID != then[96].ID {
					t.Fatalf("as of %s, newest 3: %d records, %v", as, len(few), err)
				}
			}
		})
	}
}
