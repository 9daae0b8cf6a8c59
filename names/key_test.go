package names_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/echostore/echostore/names"
)

func TestParseKey(t *testing.T) {
	good := []string{"orders", "a", "{app}:orders", "a}b", "{}", "x y\n", "\x00\xff", "é", strings.Repeat("k", names.MaxKeyLen), "EMQ:x", "emq"}
	for _, s := range good {
		k, err := names.ParseKey(s)
		if err != nil || k.String() != s {
			t.Errorf("ParseKey(%q) = %q, %v", s, k, err)
		}
	}
	for _, s := range []string{"", strings.Repeat("k", names.MaxKeyLen+1), "emq:{q}:stream:s", "emq:"} {
		if _, err := names.ParseKey(s); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseKey(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

func TestKeyRef(t *testing.T) {
	r, err := names.ParseKeyRef("orders")
	if err != nil {
		t.Fatal(err)
	}
	k, ok := r.Key()
	if !ok || !r.IsKey() || k.String() != "orders" || r.IsZero() || !r.Queue().IsZero() || !r.Stream().IsZero() {
		t.Fatalf("ref %v: key %q %v", r, k, ok)
	}
	if r.String() != `key "orders"` || r.Volume().String() != "archive-key.orders" {
		t.Fatalf("String %q, Volume %q", r, r.Volume())
	}
	q, _ := names.ParseStreamRef("q", "s")
	if q.IsKey() {
		t.Fatal("a queue stream is a key stream")
	}
	if _, ok := q.Key(); ok {
		t.Fatal("Key() of a queue stream")
	}
	if !names.KeyRef(names.Key{}).IsZero() {
		t.Fatal("KeyRef of the zero key is not zero")
	}
	// A key ref is comparable and differs from the queue ref of any names.
	m := map[names.StreamRef]bool{r: true, q: true}
	if len(m) != 2 {
		t.Fatal("refs collide as map keys")
	}
}

// TestKeyVolume: the volume of every key is a valid volume name, the same
// for the same key, different for different keys, readable when the key
// is plain, and never of the form of a queue stream's volume.
func TestKeyVolume(t *testing.T) {
	cases := map[string]string{
		"orders":       "archive-key.orders",
		"app:orders":   "archive-key.app_3aorders",
		"{app}.events": "archive-key._7bapp_7d.events",
		"a_b":          "archive-key.a_5fb",
		"a-b.c":        "archive-key.a-b.c",
		".":            "archive-key..",
		"\x00\xff":     "archive-key._00_ff",
	}
	for k, want := range cases {
		r, err := names.ParseKeyRef(k)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Volume().String(); got != want {
			t.Errorf("volume of %q = %q, want %q", k, got, want)
		}
		back, ok := names.KeyOfVolume(r.Volume())
		if !ok || back.String() != k {
			t.Errorf("KeyOfVolume(%q) = %q, %v; want %q", r.Volume(), back, ok, k)
		}
	}
	// Too long to escape: hashed.
	long := strings.Repeat(":", 60)
	r, _ := names.ParseKeyRef(long)
	v := r.Volume().String()
	if !strings.HasPrefix(v, names.KeyHashVolumePrefix) || len(v) != len(names.KeyHashVolumePrefix)+64 {
		t.Fatalf("volume of a long key = %q", v)
	}
	if _, ok := names.KeyOfVolume(r.Volume()); ok {
		t.Fatal("KeyOfVolume of a hashed volume")
	}
	max := strings.Repeat("k", names.MaxLen-len(names.KeyVolumePrefix))
	r, _ = names.ParseKeyRef(max)
	if r.Volume().String() != names.KeyVolumePrefix+max {
		t.Fatalf("a key that just fits is hashed: %q", r.Volume())
	}
	r, _ = names.ParseKeyRef(max + "k")
	if !strings.HasPrefix(r.Volume().String(), names.KeyHashVolumePrefix) {
		t.Fatalf("a key one byte too long is not hashed: %q", r.Volume())
	}
	if !names.IsArchiveVolume(r.Volume()) {
		t.Fatal("IsArchiveVolume of a hashed key volume")
	}
}

func TestKeyVolumeInjective(t *testing.T) {
	seen := map[names.Volume]string{}
	add := func(k string) {
		r, err := names.ParseKeyRef(k)
		if err != nil {
			return
		}
		v := r.Volume()
		if _, err := names.ParseVolume(v.String()); err != nil {
			t.Fatalf("volume of %q is invalid: %v", k, err)
		}
		if strings.HasPrefix(v.String(), "archive.") {
			t.Fatalf("volume of key %q looks like a queue stream's: %q", k, v)
		}
		if o, ok := seen[v]; ok && o != k {
			t.Fatalf("keys %q and %q share volume %q", o, k, v)
		}
		seen[v] = k
	}
	const alphabet = "a_5f.-:{}/\\ \x00\xff"
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		add(prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("", 4)
	for i := 0; i < 200; i++ {
		add(strings.Repeat("x", 100+i))
		add(strings.Repeat("_", 30+i))
	}
}

func FuzzKeyVolume(f *testing.F) {
	for _, s := range []string{"orders", "{a}b", "a_5f", strings.Repeat("é", 80), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := names.ParseKeyRef(s)
		if err != nil {
			if !errors.Is(err, names.ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		v := r.Volume()
		if _, err := names.ParseVolume(v.String()); err != nil {
			t.Fatalf("volume of %q invalid: %v", s, err)
		}
		if k, ok := names.KeyOfVolume(v); ok && k.String() != s {
			t.Fatalf("KeyOfVolume(volume of %q) = %q", s, k)
		}
		// KeyOfVolume never panics on any volume.
		if vv, err := names.ParseVolume(strings.Map(func(r rune) rune { return r }, s)); err == nil {
			names.KeyOfVolume(vv)
		}
	})
}

func ExampleKeyRef() {
	k, err := names.ParseKey("app:orders")
	if err != nil {
		panic(err)
	}
	r := names.KeyRef(k)
	fmt.Println(r, r.Volume())
	// Output:
	// key "app:orders" archive-key.app_3aorders
}

// FuzzKeyOfVolume: the decoder of key volume names never panics, and what
// it decodes maps back to the very volume.
func FuzzKeyOfVolume(f *testing.F) {
	for _, s := range []string{"archive-key.orders", "archive-key._7bapp_7d", "archive-key._", "archive-key._zz", "archive-key._4", "archive-key.", "archive-keyh.00", "archive.q.s", "archive-key._5F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := names.ParseVolume(s)
		if err != nil {
			return
		}
		k, ok := names.KeyOfVolume(v)
		if !ok {
			return
		}
		if names.KeyRef(k).Volume() != v {
			t.Fatalf("KeyOfVolume(%q) = %q, whose volume is %q", s, k, names.KeyRef(k).Volume())
		}
	})
}
