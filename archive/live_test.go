package archive

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	goldenfile "github.com/echostore/echostore/internal/golden"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// A *mq.Client is the live tier the archive takes.
var _ Live = (*mq.Client)(nil)

// eachLive runs f against the plain server and the 3-master Cluster, with
// the masters' addresses.
func eachLive(t *testing.T, f func(t *testing.T, c *mq.Client, masters []string)) {
	t.Run("redis", func(t *testing.T) {
		r := servers.Redis(t)
		f(t, connect(t, r.URL), []string{r.Addr})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := servers.Cluster(t)
		f(t, connect(t, "redis://"+strings.Join(cl.Addrs, ",")), cl.Addrs)
	})
}

// scriptRaw runs one command on KEYS[1]: ARGV[1] the command, then its
// arguments after the key.
var scriptRaw = mq.NewScript(`return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))`)

// raw runs cmd on key with args through live (so that a Cluster routes
// it) and returns the reply.
func raw(t testing.TB, live Live, cmd, key string, args ...string) mq.Reply {
	t.Helper()
	r := live.Run(testCtx(t), scriptRaw, []string{key}, append([]string{cmd}, args...))
	if err := r.Err(); err != nil {
		t.Fatalf("%s %s %v: %v", cmd, key, args, err)
	}
	return r
}

// exists reports whether key exists.
func exists(t testing.TB, live Live, key string) bool {
	t.Helper()
	n, err := raw(t, live, "EXISTS", key).Int()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestGoldenArchiveKeysV1: the keys the archive keeps beside a stream
// (docs/FORMAT.md, "Redis keys"; moved here from mq's redis.v1.txt with the
// scripts that use them) against hand-written expectations and the golden
// file, and a seam cache as Redis holds it read by today's decoder. `go
// test ./archive -run Golden -update` rewrites the file.
func TestGoldenArchiveKeysV1(t *testing.T) {
	rows := []struct{ name, got, want string }{
		{"seam cache", SeamKey(mustRef(t, "q", "s")), "emq:{q}:stream:s:archived"},
		{"lease", LeaseKey(mustRef(t, "q", "s")), "emq:{q}:stream:s:lease"},
		{"lease seq", LeaseSeqKey(mustRef(t, "q", "s")), "emq:{q}:stream:s:lease:seq"},
	}
	var enc strings.Builder
	enc.WriteString("# Redis keys of the archive, layout 1 (docs/FORMAT.md): name<TAB>value\n")
	for _, r := range rows {
		enc.WriteString(r.name + "\t" + r.got + "\n")
	}
	file := goldenfile.Bytes(t, "redis.v1.txt", true, []byte(enc.String()))
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")[1:]
	if len(lines) != len(rows) {
		t.Fatalf("%d lines, want %d", len(lines), len(rows))
	}
	for i, r := range rows {
		name, val, _ := strings.Cut(lines[i], "\t")
		if name != r.name || val != r.want {
			t.Fatalf("%s = %s, the spec gives %s", name, val, r.want)
		}
	}
	seam, ok, err := parseSeam(SeamKey(mustRef(t, "q", "s")), map[string]string{"w": "EVT_0000000040005", "xid": "1704067200001-5", "lsn": "7"})
	if err != nil || !ok || seam.W != brand.ID(1<<22|5).XID() || seam.LSN != 7 {
		t.Fatalf("seam cache: %+v %v %v", seam, ok, err)
	}
}

func TestSeamCache(t *testing.T) {
	eachLive(t, func(t *testing.T, c *mq.Client, _ []string) {
		ctx := testCtx(t)
		q := queueName(t)
		if _, ok, err := GetArchived(ctx, c, mustRef(t, q, "s")); ok || err != nil {
			t.Fatalf("GetArchived before any put: %v, %v", ok, err)
		}
		w := brand.FirstAt(time.Now()) + 7
		if err := PutArchived(ctx, c, mustRef(t, q, "s"), Seam{W: w.XID(), LSN: 42}); err != nil {
			t.Fatal(err)
		}
		seam, ok, err := GetArchived(ctx, c, mustRef(t, q, "s"))
		if err != nil || !ok || seam != (Seam{W: w.XID(), LSN: 42}) {
			t.Fatalf("GetArchived = %+v, %v, %v", seam, ok, err)
		}
		// Plain strings any client can read.
		flat, err := raw(t, c, "HGETALL", SeamKey(mustRef(t, q, "s"))).Strings()
		want := map[string]string{"w": brand.EVT.Format(w), "xid": w.RedisID(), "lsn": "42"}
		if err != nil || len(flat) != 6 {
			t.Fatalf("seam hash %v, %v", flat, err)
		}
		for i := 0; i < len(flat); i += 2 {
			if want[flat[i]] != flat[i+1] {
				t.Fatalf("seam hash %v, want %v", flat, want)
			}
		}
		if ok, err := IsArchived(ctx, c, mustRef(t, q, "s")); !ok || err != nil {
			t.Fatalf("IsArchived after PutArchived = %v, %v", ok, err)
		}
		if ok, _ := IsArchived(ctx, c, mustRef(t, q, "t")); ok {
			t.Fatal("an unregistered stream is archived")
		}
		raw(t, c, "HSET", SeamKey(mustRef(t, q, "s")), "xid", "1-1")
		if _, _, err := GetArchived(ctx, c, mustRef(t, q, "s")); !errors.Is(err, ErrBadSeam) {
			t.Fatalf("GetArchived of a mismatched xid = %v, want ErrBadSeam", err)
		}
	})
}

// TestArchivedStreams: every stream registered as archived, in queues that
// hash to slots on several masters of the Cluster, is found once; keys that
// look like a registration set but name no valid queue, a key of another
// type, and a member that is not a valid stream name are skipped without
// failing the listing.
func TestArchivedStreams(t *testing.T) {
	eachLive(t, func(t *testing.T, c *mq.Client, masters []string) {
		ctx := testCtx(t)
		base := queueName(t)
		want := map[names.StreamRef]bool{}
		for i := range 40 {
			q := fmt.Sprintf("%s.q%d", base, i)
			for _, s := range []string{"a", "b.c"}[:1+i%2] {
				if err := RegisterArchived(ctx, c, mustRef(t, q, s)); err != nil {
					t.Fatal(err)
				}
				want[mustRef(t, q, s)] = true
			}
		}
		raw(t, c, "SADD", "emq:{"+base+".bad:name}:archived", "a")        // a queue name with ':'
		raw(t, c, "SADD", "emq:{"+base+".x}:y}:archived", "a")            // a queue name with '}'
		raw(t, c, "SADD", "emq:{"+base+".q0}:archived", "bad:stream", "") // members that are no stream names
		raw(t, c, "SET", "emq:{"+base+".string}:archived", "a")           // not a set

		got := map[names.StreamRef]bool{}
		for ref, err := range ArchivedStreams(ctx, c) {
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(ref.Queue().String(), base+".") {
				continue // another test's
			}
			if got[ref] {
				t.Fatalf("%v yielded twice", ref)
			}
			got[ref] = true
		}
		for ref := range got {
			if !want[ref] {
				t.Errorf("ArchivedStreams yielded %v, which is not a registered stream", ref)
			}
		}
		for ref := range want {
			if !got[ref] {
				t.Errorf("ArchivedStreams missed %v", ref)
			}
		}
		if t.Failed() {
			t.FailNow()
		}

		// The registrations are spread over the masters (several slots).
		holders := 0
		for _, addr := range masters {
			keys, err := testserver.Do(ctx, addr, "KEYS", "emq:{"+base+".q*}:archived")
			if err != nil {
				t.Fatal(err)
			}
			if keys != "" {
				holders++
			}
		}
		if holders != len(masters) {
			t.Fatalf("the registrations are on %d of %d masters", holders, len(masters))
		}

		// The caller can stop early.
		n := 0
		for _, err := range ArchivedStreams(ctx, c) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			break
		}
		if n != 1 {
			t.Fatalf("stopped after %d streams, want 1", n)
		}
	})
}

// TestDeleteLiveStream: the delete is fenced by the lease token (no token,
// a stale token and another holder's token delete nothing), deletes exactly
// the stream's live keys, keeps the token counter (the next lease's token
// is higher) and leaves a sibling stream alone. Plain and cluster.
func TestDeleteLiveStream(t *testing.T) {
	eachLive(t, func(t *testing.T, c *mq.Client, _ []string) {
		ctx := testCtx(t)
		q := queueName(t)
		setup := func(s string) {
			t.Helper()
			for i := 0; i < 3; i++ {
				if _, err := c.Append(ctx, mustRef(t, q, s), mq.Field{Name: "k", Value: "v"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := PutArchived(ctx, c, mustRef(t, q, s), Seam{W: (brand.ID(1) << 22).XID(), LSN: 1}); err != nil {
				t.Fatal(err)
			}
		}
		setup("s")
		setup("sib")
		allThere := func(s string) {
			t.Helper()
			for _, k := range []string{mq.StreamKey(mustRef(t, q, s)), SeamKey(mustRef(t, q, s))} {
				if !exists(t, c, k) {
					t.Fatalf("%s deleted", k)
				}
			}
			if ok, err := IsArchived(ctx, c, mustRef(t, q, s)); err != nil || !ok {
				t.Fatalf("IsArchived(%s) = %v, %v", s, ok, err)
			}
		}

		// No lease at all: fenced.
		if _, err := deleteLiveStream(ctx, c, mustRef(t, q, "s"), 1); !errors.Is(err, ErrFenced) {
			t.Fatalf("delete without lease: %v, want ErrFenced", err)
		}
		allThere("s")

		// Another holder's token: fenced, its lease kept.
		other, err := takeLease(ctx, c, mustRef(t, q, "s"), 0, time.Minute)
		if err != nil || other.Held {
			t.Fatalf("takeLease: %+v, %v", other, err)
		}
		for _, tok := range []int64{other.Token + 1, other.Token - 1, 0} {
			if _, err := deleteLiveStream(ctx, c, mustRef(t, q, "s"), tok); !errors.Is(err, ErrFenced) {
				t.Fatalf("delete with token %d while %d holds: %v, want ErrFenced", tok, other.Token, err)
			}
		}
		allThere("s")
		if !exists(t, c, LeaseKey(mustRef(t, q, "s"))) {
			t.Fatal("a fenced delete removed the holder's lease")
		}
		if _, err := releaseLease(ctx, c, mustRef(t, q, "s"), other.Token); err != nil {
			t.Fatal(err)
		}

		// Our own lease: deleted.
		mine, err := takeLease(ctx, c, mustRef(t, q, "s"), 0, time.Minute)
		if err != nil || mine.Held || mine.Token <= other.Token {
			t.Fatalf("takeLease: %+v, %v (previous token %d)", mine, err, other.Token)
		}
		n, err := deleteLiveStream(ctx, c, mustRef(t, q, "s"), mine.Token)
		if err != nil || n != 3 {
			t.Fatalf("deleteLiveStream = %d, %v; want 3 entries", n, err)
		}
		for _, k := range []string{mq.StreamKey(mustRef(t, q, "s")), SeamKey(mustRef(t, q, "s")), LeaseKey(mustRef(t, q, "s"))} {
			if exists(t, c, k) {
				t.Errorf("%s still exists", k)
			}
		}
		if !exists(t, c, LeaseSeqKey(mustRef(t, q, "s"))) {
			t.Error("the token counter was deleted")
		}
		if ok, err := IsArchived(ctx, c, mustRef(t, q, "s")); err != nil || ok {
			t.Errorf("IsArchived after delete = %v, %v", ok, err)
		}
		allThere("sib")

		// The same (stale) token again: the lease is gone, fenced.
		if _, err := deleteLiveStream(ctx, c, mustRef(t, q, "s"), mine.Token); !errors.Is(err, ErrFenced) {
			t.Fatalf("second delete with the released token: %v, want ErrFenced", err)
		}
		// Tokens keep increasing.
		next, err := takeLease(ctx, c, mustRef(t, q, "s"), 0, time.Minute)
		if err != nil || next.Token <= mine.Token {
			t.Fatalf("lease after delete: %+v, %v; want a token above %d", next, err, mine.Token)
		}
		// A missing stream with the lease held: deletes what is there.
		if n, err := deleteLiveStream(ctx, c, mustRef(t, q, "s"), next.Token); err != nil || n != 0 {
			t.Fatalf("delete of a deleted stream = %d, %v", n, err)
		}
	})
}

// TestSecurityLiveRefusesBadNames: a bad queue or stream name cannot be
// made into the names.StreamRef every function of the archive that builds
// a live-tier key takes, and each refuses the zero one (no stream) with
// names.ErrInvalid, leaving Redis without any key of it.
func TestSecurityLiveRefusesBadNames(t *testing.T) {
	r := servers.Redis(t)
	c := connect(t, r.URL)
	ctx := testCtx(t)
	good := queueName(t)
	for _, n := range []string{"../x", "x}", "{x", "x:archived", "a\x00b", "é", strings.Repeat("a", names.MaxLen+1), ""} {
		if _, err := names.ParseStreamRef(n, "s"); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseStreamRef(queue %q): %v, want names.ErrInvalid", n, err)
		}
		if _, err := names.ParseStreamRef(good, n); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseStreamRef(stream %q): %v, want names.ErrInvalid", n, err)
		}
	}
	var ref names.StreamRef
	calls := map[string]func() error{
		"PutArchived":      func() error { return PutArchived(ctx, c, ref, Seam{W: xid.ID{Seq: 1}, LSN: 1}) },
		"GetArchived":      func() error { _, _, err := GetArchived(ctx, c, ref); return err },
		"RegisterArchived": func() error { return RegisterArchived(ctx, c, ref) },
		"IsArchived":       func() error { _, err := IsArchived(ctx, c, ref); return err },
		"dropArchived":     func() error { _, err := dropArchived(ctx, c, ref, xid.ID{Seq: 1}); return err },
		"takeLease":        func() error { _, err := takeLease(ctx, c, ref, 1, time.Second); return err },
		"releaseLease":     func() error { _, err := releaseLease(ctx, c, ref, 1); return err },
		"fencedTrim":       func() error { _, err := fencedTrim(ctx, c, ref, 1, xid.ID{Seq: 5}); return err },
		"deleteLiveStream": func() error { _, err := deleteLiveStream(ctx, c, ref, 1); return err },
	}
	for what, call := range calls {
		if err := call(); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("%s(no stream): %v, want names.ErrInvalid", what, err)
		}
	}
	if keys, err := testserver.Do(ctx, r.Addr, "KEYS", "emq:{}*"); err != nil || keys != "" {
		t.Fatalf("keys left behind: %q, %v", keys, err)
	}
}

// TestPresent: a nil Live and a nil *mq.Client (what callers pass when
// Redis is unreachable) are no live tier; a client is one.
func TestPresent(t *testing.T) {
	var none *mq.Client
	if present(nil) || present(none) {
		t.Fatal("a nil live tier counts as present")
	}
	if !present(connect(t, servers.Redis(t).URL)) {
		t.Fatal("a connected client counts as absent")
	}
}
