package archive

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	xidpkg "github.com/echostore/echostore/xid"
)

// TestKeyStreamCycle: a stream at an application's own key (awkward ones:
// a hashtag, a '}' without one, an empty tag) is folded, trimmed and
// merge-read in place on the plain server and on the Cluster, where every
// script touches K and its metadata keys in one slot; it is registered in
// its slot's key registry, which trim-only retention respects and
// ArchivedStreams lists; a delete removes K and its metadata.
func TestKeyStreamCycle(t *testing.T) {
	eachLive(t, func(t *testing.T, c *mq.Client, _ []string) {
		ctx := testCtx(t)
		for i, k := range []string{"orders", "{app}:orders", "a}b", "{}x", "x{y"} {
			k = fmt.Sprintf("%s.%s.%d", k, queueName(t), i)
			e := &env{t: t, live: c, st: openStore(t, t.TempDir())}
			a, err := New(Options{Store: e.st, Live: c, Logger: quietLog(), Chunk: 4})
			if err != nil {
				t.Fatal(err)
			}
			key, err := names.ParseKey(k)
			if err != nil {
				t.Fatal(err)
			}
			ref := names.KeyRef(key)
			// Nothing at the key yet: the cycle does nothing, registers nothing.
			res, err := a.Cycle(ctx, ref, Window{Keep: 2})
			if err != nil || !res.Missing || res.Token != 0 {
				t.Fatalf("%q: cycle of a missing key: %+v %v", k, res, err)
			}
			if ok, err := IsArchived(ctx, c, ref); ok || err != nil {
				t.Fatalf("%q: registered by a cycle of nothing: %v %v", k, ok, err)
			}
			if exists(t, c, LeaseSeqKey(ref)) {
				t.Fatalf("%q: a cycle of nothing took a lease", k)
			}
			// The application's producer, with its own ids.
			var want []xidpkg.ID
			for j := range 10 {
				xid := fmt.Sprintf("1733052000%03d-0", j)
				raw(t, c, "XADD", k, xid, "n", fmt.Sprint(j))
				id, err := xidpkg.Parse(xid)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, id)
			}
			res, err = a.Cycle(ctx, ref, Window{Keep: 2})
			if err != nil || res.Folded != 8 || res.Trimmed != 8 || res.State.W != want[7] {
				t.Fatalf("%q: cycle: %+v %v", k, res, err)
			}
			if n, _ := raw(t, c, "XLEN", k).Int(); n != 2 {
				t.Fatalf("%q: XLEN %d after the cycle, want 2", k, n)
			}
			if ok, err := IsArchived(ctx, c, ref); !ok || err != nil {
				t.Fatalf("%q: not registered: %v %v", k, ok, err)
			}
			if _, err := c.TrimMinID(ctx, ref, want[9]); !errors.Is(err, mq.ErrArchived) {
				t.Fatalf("%q: trim-only retention of an archived key stream: %v", k, err)
			}
			vol, err := e.st.Volume(ctx, ref.Volume())
			if err != nil {
				t.Fatal(err)
			}
			var got []xidpkg.ID
			for r, err := range MergeRead(ctx, Source{Ref: ref, Live: c, Volume: vol}, Range{To: xidpkg.Max}) {
				if err != nil {
					t.Fatalf("%q: merge-read: %v", k, err)
				}
				got = append(got, r.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%q: merge-read %v, want %v", k, got, want)
			}
			if o, ok, err := VolumeOwner(ctx, vol); err != nil || !ok || o != ref {
				t.Fatalf("%q: owner %v %v %v", k, o, ok, err)
			}
			found := false
			for r, err := range ArchivedStreams(ctx, c) {
				if err != nil {
					t.Fatal(err)
				}
				found = found || r == ref
			}
			if !found {
				t.Fatalf("%q: ArchivedStreams does not list it", k)
			}
			if _, err := a.Delete(ctx, ref); err != nil {
				t.Fatalf("%q: delete: %v", k, err)
			}
			for _, mk := range []string{k, SeamKey(ref), LeaseKey(ref)} {
				if exists(t, c, mk) {
					t.Fatalf("%q: %q left after the delete", k, mk)
				}
			}
			if ok, _ := IsArchived(ctx, c, ref); ok {
				t.Fatalf("%q: still registered after the delete", k)
			}
		}
	})
}

// TestKeyOwnerRoundTrip: the owner record of a key stream decodes to the
// same ref, and never reads as a queue stream's.
func TestKeyOwnerRoundTrip(t *testing.T) {
	for _, k := range []string{"orders", "q/s", "{key}x", "a}b"} {
		ref, err := names.ParseKeyRef(k)
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeOwner(encodeOwner(ref))
		if err != nil || o != ref {
			t.Fatalf("owner of %q: %v %v", k, o, err)
		}
	}
	q := mustRef(t, "q", "s")
	if o, err := decodeOwner(encodeOwner(q)); err != nil || o != q {
		t.Fatalf("owner of q/s: %v %v", o, err)
	}
}

// FuzzDecodeOwner: the owner decoder never panics, and an owner it
// accepts encodes back to the same bytes.
func FuzzDecodeOwner(f *testing.F) {
	for _, s := range []string{"q/s", "{key}orders", "{key}", "{key}emq:x", "a/b/c", "", "{key}\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := decodeOwner(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeOwner(%q): %v, want ErrCorrupt", b, err)
			}
			return
		}
		if got := encodeOwner(o); string(got) != string(b) {
			t.Fatalf("decodeOwner(%q) = %v, which encodes as %q", b, o, got)
		}
	})
}

// BenchmarkCycleKeyStream: one cycle folding and trimming 10,000 records
// of a stream of a queue and of a stream at a key (with a '}' and no
// hashtag, the slowest slot tag to find), same records, same window: the
// key form should cost nothing measurable (records/s).
func BenchmarkCycleKeyStream(b *testing.B) {
	ctx := context.Background()
	const n = 10_000
	e := newEnv(b, servers.Redis(b).URL, Options{Chunk: 1000})
	batch := make([][]mq.Field, 1000)
	for i := range batch {
		batch[i] = []mq.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: fmt.Sprint(i)}}
	}
	run := func(b *testing.B, ref names.StreamRef) {
		var folded int64
		for b.Loop() {
			b.StopTimer()
			for range n / len(batch) {
				if _, err := e.live.AppendBatch(ctx, ref, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			res, err := e.a.Cycle(ctx, ref, Window{Keep: 1})
			if err != nil {
				b.Fatal(err)
			}
			folded += res.Folded
		}
		b.ReportMetric(float64(folded)/b.Elapsed().Seconds(), "records/s")
	}
	b.Run("queue", func(b *testing.B) { run(b, mustRef(b, e.q, "bench")) })
	key, err := names.ParseKeyRef("bench}" + e.q)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("key", func(b *testing.B) { run(b, key) })
}
