package archive

import (
	"fmt"
	"testing"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// TestAppTrimDetected: an application that trims its stream itself
// (XTRIM MAXLEN, XDEL) past what the archive folded is reported by the
// next cycle (AppTrimmed) and by the status (AppTrimStatus), from the id
// on which entries are missing; a trim of what was folded already and
// plain cycles are not reported.
func TestAppTrimDetected(t *testing.T) {
	eachLive(t, func(t *testing.T, c *mq.Client, _ []string) {
		ctx := testCtx(t)
		setup := func(name string) (*Archiver, names.StreamRef, string) {
			k := name + "." + queueName(t)
			a, err := New(Options{Store: openStore(t, t.TempDir()), Live: c, Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := names.ParseKeyRef(k)
			if err != nil {
				t.Fatal(err)
			}
			for j := range 10 {
				raw(t, c, "XADD", k, fmt.Sprintf("1733052000%03d-0", j), "n", fmt.Sprint(j))
			}
			res, err := a.Cycle(ctx, ref, Window{Keep: 5})
			if err != nil || res.Folded != 5 || res.AppTrimmed.Detected() {
				t.Fatalf("first cycle: %+v %v", res, err)
			}
			return a, ref, k
		}
		status := func(a *Archiver, ref names.StreamRef) AppTrim {
			t.Helper()
			vol, err := a.opts.Store.Volume(ctx, ref.Volume())
			if err != nil {
				t.Fatal(err)
			}
			st, err := Frontier(ctx, vol)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := AppTrimStatus(ctx, c, ref, st)
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}

		// Plain appends and cycles, and a trim below W: nothing reported.
		a, ref, k := setup("quiet")
		raw(t, c, "XADD", k, "1733052000010-0", "n", "10")
		if res, err := a.Cycle(ctx, ref, Window{Keep: 5}); err != nil || res.AppTrimmed.Detected() {
			t.Fatalf("plain cycle: %+v %v", res, err)
		}
		raw(t, c, "XTRIM", k, "MINID", "1733052000003-0") // all folded already
		if res, err := a.Cycle(ctx, ref, Window{Keep: 5}); err != nil || res.AppTrimmed.Detected() {
			t.Fatalf("cycle after a trim of folded entries: %+v %v", res, err)
		}
		if tr := status(a, ref); tr.Detected() {
			t.Fatalf("status after plain cycles: %+v", tr)
		}

		// MAXLEN past W: entries 5..7 were never folded.
		a, ref, k = setup("maxlen")
		if tr := status(a, ref); tr.Detected() {
			t.Fatalf("status before the trim: %+v", tr)
		}
		raw(t, c, "XTRIM", k, "MAXLEN", "2")
		if tr := status(a, ref); tr != (AppTrim{Kind: "trim", From: "1733052000005-0"}) {
			t.Fatalf("status after MAXLEN 2, before a cycle: %+v", tr)
		}
		res, err := a.Cycle(ctx, ref, Window{Keep: 1})
		if err != nil || res.AppTrimmed != (AppTrim{Kind: "trim", From: "1733052000005-0"}) {
			t.Fatalf("cycle after MAXLEN 2: %+v %v", res, err)
		}
		// It stays reported: the history is gone for good.
		if tr := status(a, ref); tr != (AppTrim{Kind: "trim", From: "1733052000005-0"}) {
			t.Fatalf("status after the cycle: %+v", tr)
		}

		// XDEL of an entry above W.
		a, ref, k = setup("xdel")
		raw(t, c, "XDEL", k, "1733052000007-0")
		res, err = a.Cycle(ctx, ref, Window{Keep: 1})
		if err != nil || res.AppTrimmed != (AppTrim{Kind: "xdel", From: "1733052000007-0"}) {
			t.Fatalf("cycle after XDEL: %+v %v", res, err)
		}
		if tr := status(a, ref); tr.Kind != "xdel" {
			t.Fatalf("status after XDEL: %+v", tr)
		}
	})
}

func TestXIDAbove(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"2-0", "1-9", true}, {"1-9", "1-10", false}, {"1-10", "1-9", true}, {"1-1", "1-1", false},
		{"", "1-0", false}, {"1-0", "", false}, {"x-1", "0-0", false}, {"18446744073709551615-18446744073709551615", "0-0", true},
	} {
		if got := xidAbove(c.a, c.b); got != c.want {
			t.Errorf("xidAbove(%q, %q) = %v", c.a, c.b, got)
		}
	}
}
