package writerule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/echostore/echostore/xid"
)

// scratchIDs are the entries of the fuzz's scratch stream, oldest first.
var scratchIDs = []string{"1-0", "2-0", "3-0", "4-0", "5-0", "6-0", "7-0", "8-0", "9-1", "9-2"}

// pretendW are the watermarks the fuzz pretends the scratch stream has
// (nil: nothing folded yet).
var pretendW = []*xid.ID{nil, {}, {Ms: 1}, {Ms: 3}, {Ms: 5, Seq: 5}, {Ms: 8}, {Ms: 9, Seq: 1}, {Ms: 9, Seq: 2}, {Ms: 100}}

// oneKey is a Keys where key alone is an archived stream, with watermark w.
type oneKey struct {
	key []byte
	w   *xid.ID
}

func (k oneKey) Bounded(_ context.Context, key []byte) (bool, error) {
	return bytes.Equal(key, k.key), nil
}

func (k oneKey) Watermark(context.Context, []byte) (xid.ID, bool, error) {
	if k.w == nil {
		return xid.ID{}, false, nil
	}
	return *k.w, true, nil
}

// FuzzXTrimGrammar: for an XADD or XTRIM of a scratch stream with the
// arguments of raw (split at 0xff; the key is the scratch stream's), the
// rule's parse (ParseXAdd, ParseXTrim) agrees with a real redis-server run
// on the same arguments: it accepts what Redis runs and refuses what Redis
// answers with an error; the entries Redis removed are the ones the parse's
// trim removes (exactly for =; a prefix of them for ~); and a command that
// Check lets through for the stream as an archived one with watermark
// pretendW[w] removes no entry above that watermark.
func FuzzXTrimGrammar(f *testing.F) {
	for _, s := range []struct {
		xadd bool
		args string
	}{
		{true, "*\xfff\xffv"},
		{true, "MAXLEN\xff0\xff*\xfff\xffv"},
		{true, "NOMKSTREAM\xffMAXLEN\xff0\xff*\xfff\xffv"},
		{true, "LIMIT\xff100\xffMAXLEN\xff~\xff0\xff*\xfff\xffv"},
		{true, "MAXLEN\xff~\xff0\xffLIMIT\xff5\xffLIMIT\xff0\xff*\xfff\xffv"},
		{true, "MAXLEN\xff=\xff3\xff*\xfff\xffv"},
		{true, "MAXLEN\xff2\xffMAXLEN\xff3\xff*\xfff\xffv"},
		{true, "MAXLEN\xff2\xffLIMIT\xff1\xff*\xfff\xffv"},
		{true, "LIMIT\xff0\xff*\xfff\xffv"},
		{true, "MINID\xff5\xff*\xfff\xffv"},
		{true, "MINID\xff 5\xff*\xfff\xffv"},
		{true, "MINID\xff+5\xff*\xfff\xffv"},
		{true, "MINID\xff005\xff*\xfff\xffv"},
		{true, "MINID\xff5- 1\xff*\xfff\xffv"},
		{true, "MINID\xff5--01\xff*\xfff\xffv"},
		{true, "MINID\xff-\xff*\xfff\xffv"},
		{true, "MINID\xff5-\xff*\xfff\xffv"},
		{true, "MINID\xff5\x00x\xff*\xfff\xffv"},
		{true, "MAXLEN\x00x\xff0\xff*\xfff\xffv"},
		{true, "MAXLEN\xff0\xff*\x00\xfff\xffv"},
		{true, "MAXLEN\xff-0\xff*\xfff\xffv"},
		{true, "MAXLEN\xff+1\xff*\xfff\xffv"},
		{true, "MAXLEN\xff~\xff*\xfff\xffv"},
		{true, "MINID\xff9-2\xff10-*\xfff\xffv"},
		{true, "MAXLEN\xff0\xff3-0\xfff\xffv"},
		{true, "MAXLEN\xff0\xff0-0\xfff\xffv"},
		{true, "11-0\xffMAXLEN\xff0"},
		{true, "MAXLEN\xff0\xff*\xfff"},
		{true, "maxlen"},
		{false, "MAXLEN\xff3"},
		{false, "MAXLEN\xff3\xffMAXLEN\xff4"},
		{false, "MINID\xff~\xff5\xffLIMIT\xff0"},
		{false, "LIMIT\xff10\xffMINID\xff~\xff5"},
		{false, "MINID\xff5\xffLIMIT\xff1"},
		{false, "MINID\xff9-1"},
		{false, "MINID\xff9-2"},
		{false, "MINID\xff9-3"},
		{false, "MINID\xff18446744073709551615-18446744073709551615"},
		{false, "MINID\xff18446744073709551616"},
		{false, "MINID\xff-1"},
		{false, "MINID\xff -1"},
		{false, "MAXLEN\xff1\xfffoo"},
		{false, "NOMKSTREAM\xffMAXLEN\xff1"},
		{false, "MAXLEN"},
	} {
		for w := range pretendW {
			f.Add(s.xadd, uint8(w), []byte(s.args))
		}
	}
	r := servers.Redis(f)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, Protocol: 2, DisableIdentity: true})
	f.Cleanup(func() { rdb.Close() })
	key := "fuzz:scratch:" + strconv.Itoa(os.Getpid())
	f.Fuzz(func(t *testing.T, xadd bool, w uint8, raw []byte) {
		parts := bytes.Split(raw, []byte{0xff})
		if len(parts) > 16 || len(raw) > 1024 {
			return
		}
		name := "XTRIM"
		if xadd {
			name = "XADD"
		}
		args := append([][]byte{[]byte(name), []byte(key)}, parts...)
		pipe := rdb.Pipeline()
		pipe.Del(ctx, key)
		for _, id := range scratchIDs {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: id, Values: []string{"f", "v"}})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		// The parse's prediction.
		var trim Trim
		var perr error
		if xadd {
			var a Add
			a, perr = ParseXAdd(args)
			trim = a.Trim
			if perr == nil && !a.AutoID && !appendable(a, scratchIDs[len(scratchIDs)-1]) {
				perr = errors.New("the id is at or below the stream's top")
			}
		} else {
			trim, perr = ParseXTrim(args)
		}
		wm := pretendW[int(w)%len(pretendW)]
		v, err := Check(ctx, args, ScopeAdmin, oneKey{key: []byte(key), w: wm})
		if err != nil {
			t.Fatal(err)
		}
		// Redis's run.
		cmd := make([]any, len(args))
		for i, a := range args {
			cmd[i] = string(a)
		}
		_, rerr := rdb.Do(ctx, cmd...).Result()
		var re redis.Error
		if rerr != nil && !errors.As(rerr, &re) {
			t.Fatal(rerr)
		}
		if (perr == nil) != (rerr == nil) {
			t.Fatalf("%q: the parse says %v (trim %+v), Redis %v", args, perr, trim, rerr)
		}
		msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		for _, m := range msgs {
			left[m.ID] = true
		}
		var removed []string
		for _, id := range scratchIDs {
			if !left[id] {
				removed = append(removed, id)
			}
		}
		want := predicted(trim, xadd && perr == nil)
		if perr != nil {
			want = nil
		}
		switch {
		case trim.Approx && len(removed) > 0 && !slices.Equal(removed, want[:min(len(removed), len(want))]):
			t.Fatalf("%q: Redis removed %v, not a prefix of the parse's %v", args, removed, want)
		case !trim.Approx && !slices.Equal(removed, want):
			t.Fatalf("%q: Redis removed %v, the parse's trim %+v removes %v", args, removed, trim, want)
		}
		if !v.Allowed {
			return
		}
		for _, id := range removed {
			x, err := xid.Parse(id)
			if err != nil {
				t.Fatal(err)
			}
			if wm == nil || wm.Less(x) {
				t.Fatalf("%q, allowed by the rule with watermark %v, removed %s", args, wm, id)
			}
		}
	})
}

// appendable reports whether Redis appends a's explicit id (ms-seq or
// ms-*) to a stream whose top is top.
func appendable(a Add, top string) bool {
	t, err := xid.Parse(top)
	if err != nil {
		panic(err)
	}
	if a.AutoSeq {
		return a.ID.Ms > t.Ms || (a.ID.Ms == t.Ms && t.Seq != ^uint64(0))
	}
	return t.Less(a.ID)
}

// predicted returns the scratch entries the trim removes, exactly (an
// XADD's own entry, appended first, counts for MAXLEN but is not listed).
func predicted(t Trim, appended bool) []string {
	var out []string
	switch t.Strategy {
	case MaxLen:
		n := int64(len(scratchIDs))
		if appended {
			n++
		}
		for i := int64(0); i < n-t.MaxLen && i < int64(len(scratchIDs)); i++ {
			out = append(out, scratchIDs[i])
		}
	case MinID:
		for _, s := range scratchIDs {
			id, err := xid.Parse(s)
			if err != nil {
				panic(fmt.Sprint(err))
			}
			if id.Less(t.MinID) {
				out = append(out, s)
			}
		}
	}
	return out
}
