package champ

import (
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// hashers under test: a good one, and weak ones that force deep chains and
// collision nodes.
var testHashers = map[string]Hasher[uint64]{
	"uint64": Uint64[uint64],
	// Three full-hash classes: every third key collides on all 64 bits.
	"collide3": func(k uint64) uint64 { return (k % 3) * 0x1111111111111111 },
	// Hashes differ only in the top 4 bits and the low 2: long chains, then
	// splits at the last level, and collision nodes below it.
	"chains": func(k uint64) uint64 { return Uint64(k) & 0xF000000000000003 },
	// Only the low 10 bits: two levels, then chains down to collisions.
	"low10": func(k uint64) uint64 { return Uint64(k) & 0x3FF },
}

func drawHasher(t *rapid.T) (string, Hasher[uint64]) {
	name := rapid.SampledFrom(slices.Sorted(maps.Keys(testHashers))).Draw(t, "hasher")
	return name, testHashers[name]
}

// check verifies the node invariants of m and that it holds exactly want.
func check[V comparable](t interface {
	Fatalf(string, ...any)
}, m Map[uint64, V], want map[uint64]V) {
	if m.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", m.Len(), len(want))
	}
	if m.root == nil {
		if len(want) != 0 {
			t.Fatalf("nil root with %d entries", len(want))
		}
		return
	}
	got := map[uint64]V{}
	var walk func(n *node[uint64, V], shift uint, root bool)
	walk = func(n *node[uint64, V], shift uint, root bool) {
		if !root && len(n.children) == 0 && len(n.entries) < 2 {
			t.Fatalf("non-canonical node at shift %d: %d entries, no children", shift, len(n.entries))
		}
		if shift > maxShift {
			if n.dataMap != 0 || n.nodeMap != 0 || len(n.children) != 0 {
				t.Fatalf("collision node with bitmaps or children")
			}
			h0 := m.hash(n.entries[0].key)
			for _, e := range n.entries {
				if m.hash(e.key) != h0 {
					t.Fatalf("collision node mixes hashes")
				}
				got[e.key] = e.val
			}
			return
		}
		if n.dataMap&n.nodeMap != 0 || bits.OnesCount32(n.dataMap) != len(n.entries) || bits.OnesCount32(n.nodeMap) != len(n.children) {
			t.Fatalf("bitmaps %032b/%032b do not match %d entries, %d children", n.dataMap, n.nodeMap, len(n.entries), len(n.children))
		}
		for _, e := range n.entries {
			bit := bitpos(m.hash(e.key), shift)
			if n.dataMap&bit == 0 || n.entries[index(n.dataMap, bit)].key != e.key {
				t.Fatalf("key %d in the wrong slot at shift %d", e.key, shift)
			}
			if _, dup := got[e.key]; dup {
				t.Fatalf("key %d twice", e.key)
			}
			got[e.key] = e.val
		}
		for _, c := range n.children {
			walk(c, shift+bitsPerLevel, false)
		}
	}
	walk(m.root, 0, true)
	if !maps.Equal(got, want) {
		t.Fatalf("entries differ from the model: got %d, want %d", len(got), len(want))
	}
	for k, v := range want {
		if g, ok := m.Get(k); !ok || g != v {
			t.Fatalf("Get(%d) = %v, %v; want %v", k, g, ok, v)
		}
	}
	n := 0
	for k, v := range m.All() {
		if want[k] != v {
			t.Fatalf("All yields %d=%v, want %v", k, v, want[k])
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("All yields %d entries, want %d", n, len(want))
	}
}

// shape is a structural dump of m: bitmaps and keys, node by node. Keys of
// a collision node are sorted (their order is insertion order).
func shape[V any](m Map[uint64, V]) string {
	var b strings.Builder
	var walk func(n *node[uint64, V], shift uint)
	walk = func(n *node[uint64, V], shift uint) {
		keys := make([]uint64, 0, len(n.entries))
		for _, e := range n.entries {
			keys = append(keys, e.key)
		}
		if shift > maxShift {
			slices.Sort(keys)
		}
		fmt.Fprintf(&b, "(%08x %08x %v", n.dataMap, n.nodeMap, keys)
		for _, c := range n.children {
			walk(c, shift+bitsPerLevel)
		}
		b.WriteString(")")
	}
	if m.root != nil {
		walk(m.root, 0)
	}
	return b.String()
}

func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, h := drawHasher(t)
		m := New[uint64, int](h)
		model := map[uint64]int{}
		keys := rapid.Uint64Range(0, 300)
		n := rapid.IntRange(0, 400).Draw(t, "ops")
		for i := 0; i < n; i++ {
			k := keys.Draw(t, "k")
			if rapid.Bool().Draw(t, "set") {
				m = m.Set(k, i)
				model[k] = i
			} else {
				m = m.Delete(k)
				delete(model, k)
			}
		}
		check(t, m, model)
	})
}

func TestTransientModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, h := drawHasher(t)
		m := New[uint64, int](h)
		model := map[uint64]int{}
		var snaps []Map[uint64, int]
		var snapModels []map[uint64]int
		keys := rapid.Uint64Range(0, 300)
		rounds := rapid.IntRange(1, 6).Draw(t, "rounds")
		for r := 0; r < rounds; r++ {
			tr := m.Transient()
			n := rapid.IntRange(0, 150).Draw(t, "ops")
			for i := 0; i < n; i++ {
				k := keys.Draw(t, "k")
				if rapid.Bool().Draw(t, "set") {
					if rapid.Bool().Draw(t, "insert") {
						// Insert: sets an absent key only, and says so.
						_, had := model[k]
						if got := tr.Insert(k, r*1000+i); got == had {
							t.Fatalf("Insert(%d) = %v with the key present: %v", k, got, had)
						}
						if !had {
							model[k] = r*1000 + i
						}
					} else {
						tr.Set(k, r*1000+i)
						model[k] = r*1000 + i
					}
				} else {
					_, had := model[k]
					if got := tr.Delete(k); got != had {
						t.Fatalf("Delete(%d) = %v, want %v", k, got, had)
					}
					delete(model, k)
				}
				if tr.Len() != len(model) {
					t.Fatalf("transient Len %d, want %d", tr.Len(), len(model))
				}
			}
			m = tr.Persistent()
			// A sealed transient ignores writes.
			tr.Set(1<<62, 1)
			if tr.Insert(1<<62+1, 1) {
				t.Fatalf("Insert on a sealed transient reported true")
			}
			if tr.Delete(keys.Draw(t, "k")) {
				t.Fatalf("Delete on a sealed transient reported true")
			}
			check(t, m, model)
			snaps = append(snaps, m)
			snapModels = append(snapModels, maps.Clone(model))
			// Persistent writes on the snapshot must not disturb it either.
			_ = m.Set(keys.Draw(t, "k"), -1).Delete(keys.Draw(t, "k"))
		}
		for i := range snaps {
			check(t, snaps[i], snapModels[i])
		}
	})
}

func TestSnapshotsUnaffected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, h := drawHasher(t)
		m := New[uint64, int](h)
		model := map[uint64]int{}
		var snaps []Map[uint64, int]
		var snapModels []map[uint64]int
		keys := rapid.Uint64Range(0, 200)
		n := rapid.IntRange(0, 300).Draw(t, "ops")
		for i := 0; i < n; i++ {
			k := keys.Draw(t, "k")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				m = m.Set(k, i)
				model[k] = i
			case 1:
				m = m.Delete(k)
				delete(model, k)
			case 2:
				snaps = append(snaps, m)
				snapModels = append(snapModels, maps.Clone(model))
			}
		}
		for i := range snaps {
			check(t, snaps[i], snapModels[i])
		}
		check(t, m, model)
	})
}

// TestCanonicalShape: inserting a set and deleting some of it yields exactly
// the shape of inserting the remainder, in any order, persistent or
// transient.
func TestCanonicalShape(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, h := drawHasher(t)
		n := rapid.IntRange(0, 600).Draw(t, "n")
		stride := rapid.Uint64Range(1, 7).Draw(t, "stride")
		all := make([]uint64, n)
		for i := range all {
			all[i] = uint64(i) * stride
		}
		del := map[uint64]bool{}
		for _, k := range all {
			if rapid.Bool().Draw(t, "del") {
				del[k] = true
			}
		}
		a := New[uint64, int](h)
		for _, k := range all {
			a = a.Set(k, 1)
		}
		tr := a.Transient()
		for _, k := range rapid.Permutation(all).Draw(t, "delOrder") {
			if del[k] {
				if rapid.Bool().Draw(t, "viaTransient") {
					tr.Delete(k)
				} else {
					m := tr.Persistent().Delete(k)
					tr = m.Transient()
				}
			}
		}
		a = tr.Persistent()
		b := New[uint64, int](h)
		rest := map[uint64]int{}
		for _, k := range rapid.Permutation(all).Draw(t, "insOrder") {
			if !del[k] {
				b = b.Set(k, 1)
				rest[k] = 1
			}
		}
		check(t, a, rest)
		check(t, b, rest)
		if sa, sb := shape(a), shape(b); sa != sb {
			t.Fatalf("shape after deletes differs from shape of inserting the rest:\n%s\n%s", sa, sb)
		}
	})
}

func TestStringHasher(t *testing.T) {
	h := NewStringHasher()
	m := New[string, int](h)
	tr := m.Transient()
	for i := 0; i < 10000; i++ {
		tr.Set(fmt.Sprint("k", i), i)
	}
	m = tr.Persistent()
	for i := 0; i < 10000; i += 2 {
		m = m.Delete(fmt.Sprint("k", i))
	}
	if m.Len() != 5000 {
		t.Fatalf("Len = %d", m.Len())
	}
	for i := 0; i < 10000; i++ {
		v, ok := m.Get(fmt.Sprint("k", i))
		if ok != (i%2 == 1) || ok && v != i {
			t.Fatalf("Get(k%d) = %d, %v", i, v, ok)
		}
	}
}

func TestZeroMap(t *testing.T) {
	var m Map[uint64, int]
	if _, ok := m.Get(1); ok || m.Len() != 0 {
		t.Fatal("zero Map not empty")
	}
	if m.Delete(1).Len() != 0 {
		t.Fatal("Delete on zero Map")
	}
	for range m.All() {
		t.Fatal("zero Map yields")
	}
}

func TestUint64Spreads(t *testing.T) {
	// Sequential ids must fill the root's 32 slots evenly.
	var counts [32]int
	for i := uint64(0); i < 32*1000; i++ {
		counts[Uint64(i)&31]++
	}
	for s, c := range counts {
		if c < 800 || c > 1200 {
			t.Fatalf("slot %d got %d of 32,000 sequential keys", s, c)
		}
	}
}

// TestCollect: building in one pass gives the map, and the very shape, of
// inserting one by one; later duplicates win.
func TestCollect(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, h := drawHasher(t)
		n := rapid.IntRange(0, 1500).Draw(t, "n")
		keys := make([]uint64, n)
		span := rapid.Uint64Range(1, 4000).Draw(t, "span")
		seed := rapid.Uint64().Draw(t, "seed")
		for i := range keys {
			keys[i] = Uint64(seed+uint64(i)) % span // repeats when span < n
		}
		m := New[uint64, int](h)
		model := map[uint64]int{}
		for i, k := range keys {
			m = m.Set(k, i)
			model[k] = i
		}
		c := Collect(h, len(keys), func(yield func(uint64, int) bool) {
			for i, k := range keys {
				if !yield(k, i) {
					return
				}
			}
		})
		check(t, c, model)
		if sc, sm := shape(c), shape(m); sc != sm {
			t.Fatalf("Collect shape differs from inserts:\n%s\n%s", sc, sm)
		}
		// The result is an ordinary Map: it takes writes and transients.
		tr := c.Transient()
		for _, k := range keys {
			tr.Delete(k)
		}
		check(t, tr.Persistent(), map[uint64]int{})
	})
}

// TestCanonicalShapeLarge is TestCanonicalShape at a size rapid seldom
// draws: 20,000 keys, half deleted, under each hasher.
func TestCanonicalShapeLarge(t *testing.T) {
	for name, h := range testHashers {
		rng := rand.New(rand.NewPCG(1, 2))
		keys := rng.Perm(20000)
		a := New[uint64, int](h).Transient()
		for _, k := range keys {
			a.Set(uint64(k), k)
		}
		rest := map[uint64]int{}
		for i, k := range rng.Perm(20000) {
			if i%2 == 0 {
				a.Delete(uint64(k))
			} else {
				rest[uint64(k)] = k
			}
		}
		b := New[uint64, int](h)
		for k, v := range rest {
			b = b.Set(k, v)
		}
		am := a.Persistent()
		check(t, am, rest)
		if shape(am) != shape(b) {
			t.Fatalf("%s: shape after deletes differs from inserting the rest", name)
		}
	}
}

// TestBuildLarge: Build gives the map and the shape of inserting one by
// one at sizes rapid seldom draws, under every hasher (weak ones put many
// keys in few root slots), with repeated keys keeping their last value.
func TestBuildLarge(t *testing.T) {
	for name, h := range testHashers {
		for _, n := range []int{5000, 30000} {
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = uint64(rng.IntN(n * 3 / 4)) // about a third repeat
			}
			m := New[uint64, int](h).Transient()
			model := map[uint64]int{}
			for i, k := range keys {
				m.Set(k, i)
				model[k] = i
			}
			b := Build(h, n, func(i int) (uint64, int) { return keys[i], i })
			check(t, b, model)
			if shape(b) != shape(m.Persistent()) {
				t.Fatalf("%s, n=%d: Build shape differs from inserts", name, n)
			}
		}
	}
}

// exactShape is shape without sorting the keys of a collision node: their
// order, which iteration follows, is part of it.
func exactShape[V any](m Map[uint64, V]) string {
	var b strings.Builder
	var walk func(n *node[uint64, V])
	walk = func(n *node[uint64, V]) {
		fmt.Fprintf(&b, "(%08x %08x [", n.dataMap, n.nodeMap)
		for _, e := range n.entries {
			fmt.Fprintf(&b, "%d=%v ", e.key, e.val)
		}
		b.WriteString("]")
		for _, c := range n.children {
			walk(c)
		}
		b.WriteString(")")
	}
	if m.root != nil {
		walk(m.root)
	}
	return b.String()
}

// sameNodes reports whether the tries under a and b have the same nodes:
// bitmaps, entries in order, and children.
func sameNodes[V comparable](a, b *node[uint64, V]) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.dataMap != b.dataMap || a.nodeMap != b.nodeMap || !slices.Equal(a.entries, b.entries) || len(a.children) != len(b.children) {
		return false
	}
	for i := range a.children {
		if !sameNodes(a.children[i], b.children[i]) {
			return false
		}
	}
	return true
}

// sameAsInserts fails unless b is the map that Set of keys[i] → i, one by
// one in order, gives: the same entries and lookups, the same nodes (the
// order of a collision node's entries included), and the same iteration.
func sameAsInserts(t interface {
	Fatalf(string, ...any)
}, h Hasher[uint64], keys []uint64, b Map[uint64, int]) {
	m := New[uint64, int](h)
	model := map[uint64]int{}
	if len(keys) > 10000 {
		// The same map as Set's (TestTransientModel), in less time.
		tr := m.Transient()
		for i, k := range keys {
			tr.Set(k, i)
			model[k] = i
		}
		m = tr.Persistent()
	} else {
		for i, k := range keys {
			m = m.Set(k, i)
			model[k] = i
		}
	}
	check(t, b, model)
	if !sameNodes(b.root, m.root) {
		t.Fatalf("Build's nodes differ from inserts':\n%.2000s\n%.2000s", exactShape(b), exactShape(m))
	}
	var ib, im []uint64
	for k, v := range b.All() {
		ib = append(ib, k, uint64(v))
	}
	for k, v := range m.All() {
		im = append(im, k, uint64(v))
	}
	if !slices.Equal(ib, im) {
		t.Fatalf("Build iterates %v, inserts %v", ib, im)
	}
}

// TestBuildEqualsInserts: Build of entries is the map that inserting them
// one by one gives, node for node and in iteration order, under every
// hasher (full 64-bit collisions, long chains, collision nodes), with
// repeated keys (the last value, the place of the first in a collision
// node), at sizes on both sides of each of the radix sort's pass counts.
func TestBuildEqualsInserts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, h := drawHasher(t)
		n := rapid.SampledFrom([]int{0, 1, 2, 3, 24, 25}).Draw(t, "base")
		n += rapid.IntRange(0, 1100).Draw(t, "extra") * rapid.IntRange(0, 3).Draw(t, "mul")
		span := rapid.Uint64Range(1, 5000).Draw(t, "span")
		seed := rapid.Uint64().Draw(t, "seed")
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = Uint64(seed+uint64(i)) % span // repeats when span < n
		}
		b := Build(h, n, func(i int) (uint64, int) { return keys[i], i })
		sameAsInserts(t, h, keys, b)
		c := Collect(h, n, func(yield func(uint64, int) bool) {
			for i, k := range keys {
				if !yield(k, i) {
					return
				}
			}
		})
		if exactShape(c) != exactShape(b) {
			t.Fatalf("Collect differs from Build")
		}
	})
}

// TestBuildEqualsInsertsLarge is TestBuildEqualsInserts at sizes rapid
// does not draw: past 2^20 entries, where the radix sort takes three
// passes, and a weak hasher's groups too large for insertion sort.
func TestBuildEqualsInsertsLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a map of a million entries")
	}
	cases := []struct {
		hasher string
		n      int
	}{{"uint64", 1<<20 + 3000}, {"chains", 40000}, {"low10", 40000}, {"collide3", 3000}}
	for _, c := range cases {
		if raceEnabled && c.n > 1<<20 {
			continue // the third pass is the second's loop once more
		}
		h := testHashers[c.hasher]
		rng := rand.New(rand.NewPCG(uint64(c.n), 11))
		keys := make([]uint64, c.n)
		for i := range keys {
			keys[i] = uint64(rng.IntN(c.n * 7 / 8))
		}
		b := Build(h, c.n, func(i int) (uint64, int) { return keys[i], i })
		sameAsInserts(t, h, keys, b)
	}
}
