package names

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// hostile are names built to escape a directory, a bucket prefix or a Redis
// hashtag, or to look like another name.
var hostile = []string{
	"", ".", "..", "../x", "../../etc/passwd", "x/..", "/abs", "a/b", `a\b`, `..\x`, "a\x00b", "\x00",
	"a:b", "x:archived", "{x}", "x}", "{x", "a b", "a\tb", "a\nb", "a\rb", "a*", "a?", "a[0]", "%2e%2e", "a%00",
	"é", "e\u0301", "\u0430dmin", "a\u200bb", "a\u202eb", "\ufeffa", "．．", "ａ", "a\u2044b", "a\u2215b",
	"\xff", "\xc0\xae\xc0\xae", strings.Repeat("x", MaxLen+1), strings.Repeat("é", 64),
}

// TestSecurityHostileNames: every hostile name is refused for every kind,
// with ErrInvalid and a message that names the rule.
func TestSecurityHostileNames(t *testing.T) {
	for _, n := range hostile {
		for _, k := range []Kind{KindQueue, KindStream, KindVolume, KindLane} {
			err := Check(k, n)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), string(k)+" name") {
				t.Errorf("Check(%s, %q) = %v, want ErrInvalid naming the kind", k, n, err)
			}
		}
		if _, err := ParseStreamRef(n, "s"); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseStreamRef(%q, s) = %v", n, err)
		}
		if _, err := ParseStreamRef("q", n); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseStreamRef(q, %q) = %v", n, err)
		}
		if _, err := ParseQueue(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseQueue(%q) = %v (no accept volume can be made of it)", n, err)
		}
	}
}

// TestSecurityAcceptedNamesAreInert: any name Check accepts (random bytes,
// biased to the dangerous ones) is one path element directly below a
// directory, one segment of an object key that does not start with '.'
// (the file remote's temporaries) when it names a volume, and cannot close
// a Redis hashtag or add a key part.
func TestSecurityAcceptedNamesAreInert(t *testing.T) {
	const alphabet = "aZ09._-./\\:{}\x00 é%*?\n"
	rng := rand.New(rand.NewPCG(1, 2))
	root := filepath.FromSlash("/data/dir")
	accepted := 0
	for range 200000 {
		b := make([]byte, 1+rng.IntN(6))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		n := string(b)
		for _, k := range []Kind{KindQueue, KindStream, KindVolume} {
			if Check(k, n) != nil {
				continue
			}
			accepted++
			p := filepath.Join(root, n)
			if filepath.Dir(p) != root || filepath.Base(p) != n {
				t.Fatalf("%s name %q is not one path element: %s", k, n, p)
			}
			if strings.ContainsAny(n, "{}:/\\\x00 \n%*?") {
				t.Fatalf("%s name %q holds a key or path metacharacter", k, n)
			}
			if k == KindVolume && n[0] == '.' {
				t.Fatalf("volume name %q starts with '.': its remote keys would be refused (a leading '.' is reserved for the file remote's temporaries)", n)
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no name accepted: the generator is broken")
	}
}

// TestSecurityArchiveVolumeIsOneToOne: the archive volume name is the
// contract ("archive.Q.S", so a fresh data dir knows which volume to pull)
// and, with '.' allowed in queue and stream names, it is not one-to-one:
// these pairs share a volume. What keeps the collision harmless is the
// volume's recorded owner (archive TestVolumeOwnerCollision) and serve's
// configuration check. What does hold: pairs without '.' in either name
// map to volumes no other such pair maps to.
func TestSecurityArchiveVolumeIsOneToOne(t *testing.T) {
	shared := [][2][2]string{
		{{"a.b", "c"}, {"a", "b.c"}},
		{{"orders.eu", "audit"}, {"orders", "eu.audit"}},
	}
	for _, p := range shared {
		r1, err1 := ParseStreamRef(p[0][0], p[0][1])
		r2, err2 := ParseStreamRef(p[1][0], p[1][1])
		v1, v2 := r1.Volume(), r2.Volume()
		if err1 != nil || err2 != nil || v1 != v2 {
			t.Errorf("%s/%s → %q, %v and %s/%s → %q, %v: want one shared volume (the documented collision)",
				p[0][0], p[0][1], v1, err1, p[1][0], p[1][1], v2, err2)
		}
	}
	// Without '.', the split is unique: "archive." then Q, '.', S.
	seen := map[Volume][2]string{}
	for _, q := range []string{"a", "ab", "a-b", "a_b", "b"} {
		for _, s := range []string{"c", "bc", "b-c", "b_c", "a"} {
			r, err := ParseStreamRef(q, s)
			if err != nil {
				t.Fatalf("ParseStreamRef(%q, %q): %v", q, s, err)
			}
			v := r.Volume()
			if o, ok := seen[v]; ok {
				t.Errorf("%s/%s and %s/%s share %s without a '.' in either name", o[0], o[1], q, s, v)
			}
			seen[v] = [2]string{q, s}
		}
	}
}
