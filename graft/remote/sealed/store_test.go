package sealed_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/mem"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/names"
)

const C = sealed.ChunkSize

func newKey(t testing.TB) (sealed.Key, []byte) {
	t.Helper()
	raw := make([]byte, sealed.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	k, err := sealed.NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k, raw
}

func ring(t testing.TB, write sealed.Key, read ...sealed.Key) *sealed.Keyring {
	t.Helper()
	r, err := sealed.NewKeyring(write, read...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func memStore(t testing.TB) remote.Store {
	t.Helper()
	s, err := remote.Open(context.Background(), "mem://", mem.Driver{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func randBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

var sizes = []int{0, 1, 100, C - 1, C, C + 1, 2 * C, 3*C + 5}

func TestRoundTripAndSizes(t *testing.T) {
	ctx := context.Background()
	inner := memStore(t)
	k, _ := newKey(t)
	s := sealed.New(inner, ring(t, k))
	for _, n := range sizes {
		key := fmt.Sprintf("obj/%08d", n)
		plain := randBytes(t, n)
		if err := s.Put(ctx, key, plain); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, key)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("size %d: got %d bytes, %v", n, len(got), err)
		}
		env, err := inner.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(env)) != sealed.SealedSize(int64(n)) {
			t.Fatalf("size %d: stored %d bytes, SealedSize says %d", n, len(env), sealed.SealedSize(int64(n)))
		}
		if p, ok := sealed.PlainSize(int64(len(env))); !ok || p != int64(n) {
			t.Fatalf("size %d: PlainSize(%d) = %d, %v", n, len(env), p, ok)
		}
		if n >= 16 && bytes.Contains(env, plain[:16]) {
			t.Fatalf("size %d: the envelope holds plaintext", n)
		}
		if string(env[:4]) != remote.SealedMagic || !bytes.Equal(env[8:16], idBytes(k)) {
			t.Fatalf("size %d: header %x", n, env[:16])
		}
	}
	objs, err := s.List(ctx, "obj/", 0)
	if err != nil || len(objs) != len(sizes) {
		t.Fatalf("list: %d objects, %v", len(objs), err)
	}
	for i, o := range objs {
		if o.Size != int64(sizes[i]) {
			t.Fatalf("list %s: size %d, want the plaintext's %d", o.Key, o.Size, sizes[i])
		}
	}
	// PutIfAbsent keeps the fence of the wrapped store.
	if err := s.PutIfAbsent(ctx, "obj/00000001", []byte("x")); !errors.Is(err, remote.ErrExists) {
		t.Fatalf("PutIfAbsent over an object: %v, want ErrExists", err)
	}
	if err := s.PutIfAbsent(ctx, "fresh", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := s.GetRange(ctx, "missing", C*2, 5); !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("missing range: %v", err)
	}
}

// TestRanges reads ranges around every chunk edge of objects of several
// sizes, through a fresh store (no header known) and the same store again
// (header cached), and compares them with the plaintext.
func TestRanges(t *testing.T) {
	ctx := context.Background()
	inner := memStore(t)
	k, _ := newKey(t)
	r := ring(t, k)
	w := sealed.New(inner, r)
	for _, n := range []int{0, 1, C - 1, C, C + 1, 3*C + 5, 4 * C} {
		key := fmt.Sprintf("seg/%08d", n)
		plain := randBytes(t, n)
		if err := w.Put(ctx, key, plain); err != nil {
			t.Fatal(err)
		}
		var offs []int64
		for _, e := range []int64{0, C, 2 * C, 3 * C, 4 * C, int64(n)} {
			for _, d := range []int64{-2, -1, 0, 1, 2} {
				if o := e + d; o >= 0 {
					offs = append(offs, o)
				}
			}
		}
		for _, off := range offs {
			for _, ln := range []int64{0, 1, 2, 3, C - 1, C, C + 2, 2*C + 7, 5 * C} {
				want := plain[min(int(off), n):min(int(off+ln), n)]
				for _, rd := range []*sealed.Store{sealed.New(inner, r), w} {
					got, err := rd.GetRange(ctx, key, off, ln)
					if err != nil {
						t.Fatalf("size %d: range %d+%d: %v", n, off, ln, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("size %d: range %d+%d: %d bytes, want %d (or other bytes)", n, off, ln, len(got), len(want))
					}
				}
			}
		}
	}
	if _, err := w.GetRange(ctx, "seg/00000001", -1, 1); !errors.Is(err, remote.ErrInvalid) {
		t.Fatalf("negative offset: %v", err)
	}
}

// TestRangeCost: once a store knows an object's header, a range is one
// ranged read of the wrapped store; the first range past chunk 0 costs one
// more (the header).
func TestRangeCost(t *testing.T) {
	ctx := context.Background()
	inner := remote.NewCountingStore(memStore(t))
	k, _ := newKey(t)
	s := sealed.New(inner, ring(t, k))
	plain := randBytes(t, 5*C)
	if err := s.Put(ctx, "seg", plain); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{2, 1, 1} {
		inner.Reset()
		got, err := s.GetRange(ctx, "seg", int64(2*C+i*100), 4000)
		if err != nil || !bytes.Equal(got, plain[2*C+i*100:2*C+i*100+4000]) {
			t.Fatalf("range %d: %v", i, err)
		}
		if c := inner.Counts().GetRange; c != want {
			t.Fatalf("range %d: %d ranged reads of the wrapped store, want %d", i, c, want)
		}
	}
	// A replaced object: the stale header fails, the store reads the new
	// one and retries.
	plain2 := randBytes(t, 5*C)
	if err := sealed.New(inner, s.Keyring()).Put(ctx, "seg", plain2); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRange(ctx, "seg", 3*C, 10)
	if err != nil || !bytes.Equal(got, plain2[3*C:3*C+10]) {
		t.Fatalf("range of a replaced object: %v", err)
	}
}

func TestTamper(t *testing.T) {
	ctx := context.Background()
	inner := memStore(t)
	k, _ := newKey(t)
	s := sealed.New(inner, ring(t, k))
	plain := randBytes(t, 3*C+10)
	if err := s.Put(ctx, "a", plain); err != nil {
		t.Fatal(err)
	}
	env, err := inner.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	full := sealed.HeaderSize + C + sealed.TagSize // the stored size of a full chunk
	cases := map[string]struct {
		b    []byte
		want error
	}{}
	flip := func(i int) []byte {
		b := bytes.Clone(env)
		b[i] ^= 0x40
		return b
	}
	cases["version"] = struct {
		b    []byte
		want error
	}{flip(4), remote.ErrCorrupt}
	cases["flags"] = struct {
		b    []byte
		want error
	}{flip(6), remote.ErrCorrupt}
	cases["key id"] = struct {
		b    []byte
		want error
	}{flip(9), sealed.ErrUnknownKey}
	for name, i := range map[string]int{"nonce": 20, "first chunk": sealed.HeaderSize + 5, "a tag": full - 3,
		"the last chunk": len(env) - 20, "the last tag": len(env) - 1} {
		cases[name] = struct {
			b    []byte
			want error
		}{flip(i), sealed.ErrTampered}
	}
	add := func(name string, b []byte, want error) {
		cases[name] = struct {
			b    []byte
			want error
		}{b, want}
	}
	add("cut to three full chunks", env[:sealed.HeaderSize+3*(C+sealed.TagSize)], sealed.ErrTampered)
	add("cut to one chunk", env[:full], sealed.ErrTampered)
	add("cut inside a chunk", env[:len(env)-5], sealed.ErrTampered)
	add("header alone", env[:sealed.HeaderSize], sealed.ErrTampered)
	add("half a header", env[:20], remote.ErrCorrupt)
	add("extended by a chunk", append(bytes.Clone(env), env[sealed.HeaderSize:full]...), sealed.ErrTampered)
	add("chunks swapped", append(append(bytes.Clone(env[:sealed.HeaderSize]), env[full:full+C+sealed.TagSize]...), env[sealed.HeaderSize:full]...), sealed.ErrTampered)
	add("plaintext", plain, sealed.ErrNotSealed)
	add("empty", []byte{}, sealed.ErrNotSealed)
	for name, c := range cases {
		if err := inner.Put(ctx, "a", c.b); err != nil {
			t.Fatal(err)
		}
		rd := sealed.New(inner, s.Keyring())
		got, err := rd.Get(ctx, "a")
		if !errors.Is(err, c.want) || got != nil {
			t.Errorf("%s: Get: %d bytes, %v; want %v", name, len(got), err, c.want)
		}
		// Every range that covers a damaged chunk fails, whether the store
		// knows the header or not.
		for _, off := range []int64{0, C + 1, 2*C + 3, 3 * C} {
			got, err := sealed.New(inner, s.Keyring()).GetRange(ctx, "a", off, C)
			// A range past the end of an object cut short reads less, as
			// of any object that ends first: never other bytes.
			if err == nil && !bytes.HasPrefix(plain[off:min(int(off)+C, len(plain))], got) {
				t.Errorf("%s: range at %d: other bytes than written", name, off)
			}
		}
	}
	// The whole object and every range at its end fail for the damages
	// that reach the end.
	for name, c := range map[string]struct {
		b   []byte
		off int64
	}{"cut to three full chunks": {cases["cut to three full chunks"].b, 2*C + 1},
		"the last tag": {cases["the last tag"].b, 3*C + 1}, "extended": {cases["extended by a chunk"].b, 3*C + 1}} {
		if err := inner.Put(ctx, "a", c.b); err != nil {
			t.Fatal(err)
		}
		if _, err := sealed.New(inner, s.Keyring()).GetRange(ctx, "a", c.off, 5); !errors.Is(err, sealed.ErrTampered) {
			t.Errorf("%s: range of the last chunk: %v, want ErrTampered", name, err)
		}
	}
	// An object moved to another key does not authenticate.
	if err := inner.Put(ctx, "b", env); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "b"); !errors.Is(err, sealed.ErrTampered) {
		t.Fatalf("moved object: %v, want ErrTampered", err)
	}
	if _, err := sealed.New(inner, s.Keyring()).GetRange(ctx, "b", 2*C, 5); !errors.Is(err, sealed.ErrTampered) {
		t.Fatalf("moved object, range: %v, want ErrTampered", err)
	}
	if !errors.Is(sealed.ErrTampered, remote.ErrCorrupt) {
		t.Fatal("ErrTampered does not wrap remote.ErrCorrupt")
	}
}

func TestWrongKeyAndPlainStores(t *testing.T) {
	ctx := context.Background()
	inner := memStore(t)
	a, _ := newKey(t)
	b, _ := newKey(t)
	sa := sealed.New(inner, ring(t, a))
	sb := sealed.New(inner, ring(t, b))
	plain := randBytes(t, 2*C)
	if err := sa.Put(ctx, "x", plain); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.Get(ctx, "x"); !errors.Is(err, sealed.ErrUnknownKey) || got != nil {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := sb.GetRange(ctx, "x", C+5, 10); !errors.Is(err, sealed.ErrUnknownKey) {
		t.Fatalf("wrong key, range: %v", err)
	}
	// A plaintext object met by a sealed store.
	if err := inner.Put(ctx, "p", plain); err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Get(ctx, "p"); !errors.Is(err, sealed.ErrNotSealed) {
		t.Fatalf("plain object: %v", err)
	}
	if _, err := sa.GetRange(ctx, "p", C+5, 10); !errors.Is(err, sealed.ErrNotSealed) {
		t.Fatalf("plain object, range: %v", err)
	}
	// The reverse: a remote log written sealed, read without the key.
	vol, err := names.ParseVolume("v1")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := remote.NewLog(sa, vol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sl.Append(ctx, remote.Draft{LSN: 1, LocalFrom: 1, LocalTo: 1, Pages: []remote.Page{{Index: 0, Data: plain[:4000]}}}); err != nil {
		t.Fatal(err)
	}
	pl, err := remote.NewLog(inner, vol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pl.Read(ctx, 1); !errors.Is(err, remote.ErrSealed) || !errors.Is(err, remote.ErrCorrupt) {
		t.Fatalf("a sealed commit read without the key: %v, want remote.ErrSealed", err)
	}
	// And the right key reads it.
	if e, err := sl.Read(ctx, 1); err != nil || len(e.Commit.Pages()) != 1 {
		t.Fatalf("sealed log: %v", err)
	}
}

// TestRemoteLog runs a remote log (segments, frames faulted by range,
// checkpoints) over a sealed store.
func TestRemoteLog(t *testing.T) {
	ctx := context.Background()
	inner := memStore(t)
	k, _ := newKey(t)
	s := sealed.New(inner, ring(t, k))
	vol, _ := names.ParseVolume("vol")
	l, err := remote.NewLog(s, vol)
	if err != nil {
		t.Fatal(err)
	}
	pages := map[uint64][]byte{}
	var prev remote.Entry
	for lsn := uint64(1); lsn <= 3; lsn++ {
		var ps []remote.Page
		for i := range 40 {
			idx := uint64(i)*3 + lsn
			pages[idx] = randBytes(t, 8000) // incompressible: frames span chunks
			ps = append(ps, remote.Page{Index: idx, Data: pages[idx]})
		}
		prev, err = l.Append(ctx, remote.Draft{LSN: lsn, Prev: prev.Hash, LocalFrom: lsn, LocalTo: lsn, Pages: ps})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	fresh, _ := remote.NewLog(sealed.New(inner, s.Keyring()), vol)
	st, err := fresh.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range st.Pages {
		got, err := fresh.FetchPage(ctx, r)
		if err != nil || !bytes.Equal(got, pages[r.Index]) {
			t.Fatalf("page %d: %v", r.Index, err)
		}
		n++
	}
	if n != len(pages) {
		t.Fatalf("%d pages read, %d written", n, len(pages))
	}
	if _, _, err := fresh.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestParseKey(t *testing.T) {
	raw := randBytes(t, 32)
	want, err := sealed.NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(raw)
	b64 := base64Std(raw)
	for _, in := range []string{string(raw), h, h + "\n", h + "\r\n", bytesUpper(h), b64, b64 + "\n"} {
		k, err := sealed.ParseKey([]byte(in))
		if err != nil || k.ID() != want.ID() {
			t.Fatalf("form of %d bytes: %v", len(in), err)
		}
	}
	for _, in := range []string{"", "short", string(raw) + "\n", h[:63], h + "0", " " + h, h + "\n\n", "zz" + h[2:],
		b64[:43] + "!", b64 + " ", h + "\nsecond line"} {
		_, err := sealed.ParseKey([]byte(in))
		if !errors.Is(err, sealed.ErrBadKey) {
			t.Fatalf("%q: %v, want ErrBadKey", in, err)
		}
		if len(in) > 8 && (bytes.Contains([]byte(err.Error()), []byte(in[2:8])) || bytes.Contains([]byte(err.Error()), []byte(h[:8]))) {
			t.Fatalf("the error shows the key: %v", err)
		}
	}
	if _, err := sealed.NewKeyring(sealed.Key{}); !errors.Is(err, sealed.ErrBadKey) {
		t.Fatalf("zero write key: %v", err)
	}
}

// TestNoSecretPrinted: no way of printing a key or a keyring shows its
// bytes.
func TestNoSecretPrinted(t *testing.T) {
	k, raw := newKey(t)
	old, oraw := newKey(t)
	r := ring(t, k, old)
	type config struct {
		Keys *sealed.Keyring
		Key  sealed.Key
		keys sealed.Keyring
	}
	c := config{Keys: r, Key: k, keys: *r}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "ring", r, "key", k, "cfg", c)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "ring", r, "key", k, "cfg", c)
	out := fmt.Sprintf("%v %+v %#v %s %v %+v %#v %v %+v %#v %x", r, r, r, r, k, k, k, c, c, c, *r) + logged.String()
	for _, secret := range [][]byte{raw, oraw} {
		for _, form := range []string{hex.EncodeToString(secret), fmt.Sprint(secret), base64Std(secret), string(secret[:8]), fmt.Sprint(secret[:4])[1:]} {
			if bytes.Contains([]byte(out), []byte(form)) {
				t.Fatalf("a key shows in %q", out)
			}
		}
	}
	if !bytes.Contains([]byte(out), []byte(k.ID().String())) || !bytes.Contains([]byte(out), []byte(old.ID().String())) {
		t.Fatalf("the key ids do not show: %s", out)
	}
}

func bytesUpper(s string) string { return string(bytes.ToUpper([]byte(s))) }

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func idBytes(k sealed.Key) []byte {
	id := k.ID()
	return id[:]
}
