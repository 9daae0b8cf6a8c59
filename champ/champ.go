package champ

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

// Hasher hashes a key to 64 bits. Equal keys must hash equally; the better
// it spreads distinct keys over all 64 bits, the shallower the trie.
type Hasher[K any] func(K) uint64

// Uint64 hashes an integer key with the 64-bit finalizer of MurmurHash3. It
// is a bijection on 64 bits, so distinct keys never fully collide, and it
// spreads sequential keys (the low bits of branded ids) over every level.
func Uint64[K ~uint64 | ~int64 | ~uint | ~int | ~uint32 | ~int32](k K) uint64 {
	x := uint64(k)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// NewStringHasher returns a Hasher for strings using hash/maphash with a
// fresh random seed of its own, so two maps hash differently.
func NewStringHasher() Hasher[string] {
	seed := maphash.MakeSeed()
	return func(s string) uint64 { return maphash.String(seed, s) }
}

const (
	bitsPerLevel = 5
	// maxShift is the shift of the deepest level that has bitmaps (level 12,
	// hash bits 60-63). A node below it is a collision node.
	maxShift = 60
)

// owner is the token of one Transient. Nodes carrying a transient's token
// may be mutated in place by that transient, and by nothing else. It has a
// non-zero size so that every new(owner) is a distinct pointer.
type owner struct{ _ byte }

type entry[K comparable, V any] struct {
	key K
	val V
}

// node is a bitmap-indexed node, or, below maxShift, a collision node (both
// bitmaps zero, entries in insertion order, no children).
type node[K comparable, V any] struct {
	dataMap  uint32
	nodeMap  uint32
	entries  []entry[K, V]
	children []*node[K, V]
	owner    *owner
}

// Map is a persistent hash map. It is a value: Set and Delete return a new
// Map and leave the receiver unchanged, so a copy of a Map is an O(1)
// snapshot. The zero Map is empty; reading it is fine, but it has no Hasher,
// so Set on it panics: make Maps with New. A Map is safe for concurrent
// reads.
type Map[K comparable, V any] struct {
	root *node[K, V]
	n    int
	hash Hasher[K]
}

// New returns an empty Map that hashes keys with h. It panics if h is nil.
func New[K comparable, V any](h Hasher[K]) Map[K, V] {
	if h == nil {
		panic("champ: New with a nil Hasher")
	}
	return Map[K, V]{hash: h}
}

// Len returns the number of entries.
func (m Map[K, V]) Len() int { return m.n }

// Get returns the value of k and whether k is present.
func (m Map[K, V]) Get(k K) (V, bool) {
	if m.root == nil {
		var zero V
		return zero, false
	}
	return m.root.get(k, m.hash(k))
}

// Set returns a Map in which k maps to v. The receiver is unchanged.
func (m Map[K, V]) Set(k K, v V) Map[K, V] {
	if m.hash == nil {
		panic("champ: Set on a Map not made by New")
	}
	h := m.hash(k)
	if m.root == nil {
		return Map[K, V]{root: &node[K, V]{dataMap: bitpos(h, 0), entries: []entry[K, V]{{k, v}}}, n: 1, hash: m.hash}
	}
	root, added := m.root.set(nil, k, v, h, 0, m.hash, true)
	n := m.n
	if added {
		n++
	}
	return Map[K, V]{root: root, n: n, hash: m.hash}
}

// Delete returns a Map without k. The receiver is unchanged. If k is
// absent, the result is the receiver itself.
func (m Map[K, V]) Delete(k K) Map[K, V] {
	if m.root == nil {
		return m
	}
	root, found := m.root.del(nil, k, m.hash(k), 0)
	if !found {
		return m
	}
	if m.n == 1 {
		root = nil
	}
	return Map[K, V]{root: root, n: m.n - 1, hash: m.hash}
}

// All iterates over the entries. The order is a function of the key set
// (see the package documentation), not of insertion order.
func (m Map[K, V]) All() iter.Seq2[K, V] {
	root := m.root
	return func(yield func(K, V) bool) {
		if root != nil {
			root.each(yield)
		}
	}
}

// Transient returns a single-owner builder that starts from m's entries.
// m itself is never changed by it.
func (m Map[K, V]) Transient() *Transient[K, V] {
	if m.hash == nil {
		panic("champ: Transient of a Map not made by New")
	}
	return &Transient[K, V]{root: m.root, n: m.n, hash: m.hash, owner: new(owner)}
}

// Transient is a batch builder: Set and Delete mutate in place the nodes it
// created and copy the others once. It is not safe for concurrent use, and
// iterating it (All) while writing to it is undefined. Persistent seals it.
// A sealed Transient ignores Set and Delete (Delete reports false) and still
// answers Get, Len and All for its final state.
type Transient[K comparable, V any] struct {
	root  *node[K, V]
	n     int
	hash  Hasher[K]
	owner *owner // nil once sealed
}

// Persistent seals t and returns its entries as a Map in O(1). Nodes of the
// result are never mutated again.
func (t *Transient[K, V]) Persistent() Map[K, V] {
	t.owner = nil
	return Map[K, V]{root: t.root, n: t.n, hash: t.hash}
}

// Sealed reports whether Persistent has been called.
func (t *Transient[K, V]) Sealed() bool { return t.owner == nil }

// Len returns the number of entries.
func (t *Transient[K, V]) Len() int { return t.n }

// Get returns the value of k and whether k is present.
func (t *Transient[K, V]) Get(k K) (V, bool) {
	if t.root == nil {
		var zero V
		return zero, false
	}
	return t.root.get(k, t.hash(k))
}

// Set maps k to v. It is a no-op on a sealed Transient.
func (t *Transient[K, V]) Set(k K, v V) {
	t.set(k, v, true)
}

// Insert maps k to v if k is absent, and reports whether it did: Get and
// Set in one walk of the trie, hashing k once. A present k keeps its
// value. It is a no-op reporting false on a sealed Transient.
func (t *Transient[K, V]) Insert(k K, v V) bool {
	return t.set(k, v, false)
}

func (t *Transient[K, V]) set(k K, v V, replace bool) bool {
	if t.owner == nil {
		return false
	}
	h := t.hash(k)
	if t.root == nil {
		t.root = &node[K, V]{dataMap: bitpos(h, 0), entries: []entry[K, V]{{k, v}}, owner: t.owner}
		t.n = 1
		return true
	}
	root, added := t.root.set(t.owner, k, v, h, 0, t.hash, replace)
	t.root = root
	if added {
		t.n++
	}
	return added
}

// Delete removes k and reports whether it was present. It is a no-op
// reporting false on a sealed Transient.
func (t *Transient[K, V]) Delete(k K) bool {
	if t.owner == nil || t.root == nil {
		return false
	}
	root, found := t.root.del(t.owner, k, t.hash(k), 0)
	if !found {
		return false
	}
	t.n--
	if t.n == 0 {
		root = nil
	}
	t.root = root
	return true
}

// All iterates over the entries, in the same order as Map.All.
func (t *Transient[K, V]) All() iter.Seq2[K, V] {
	root := t.root
	return func(yield func(K, V) bool) {
		if root != nil {
			root.each(yield)
		}
	}
}

func bitpos(h uint64, shift uint) uint32 { return 1 << ((h >> shift) & 31) }

func index(bitmap, bit uint32) int { return bits.OnesCount32(bitmap & (bit - 1)) }

func (n *node[K, V]) get(k K, h uint64) (V, bool) {
	for shift := uint(0); ; shift += bitsPerLevel {
		if shift > maxShift {
			for i := range n.entries {
				if n.entries[i].key == k {
					return n.entries[i].val, true
				}
			}
			break
		}
		bit := bitpos(h, shift)
		if n.dataMap&bit != 0 {
			e := &n.entries[index(n.dataMap, bit)]
			if e.key == k {
				return e.val, true
			}
			break
		}
		if n.nodeMap&bit == 0 {
			break
		}
		n = n.children[index(n.nodeMap, bit)]
	}
	var zero V
	return zero, false
}

func (n *node[K, V]) each(yield func(K, V) bool) bool {
	for i := range n.entries {
		if !yield(n.entries[i].key, n.entries[i].val) {
			return false
		}
	}
	for _, c := range n.children {
		if !c.each(yield) {
			return false
		}
	}
	return true
}

// set returns the node replacing n (n itself if it was edited in place) and
// whether k was added rather than updated.
// set returns the node replacing n with k mapped to v, and whether k was
// absent. With replace false, a present k keeps its value and n is
// returned unchanged.
func (n *node[K, V]) set(o *owner, k K, v V, h uint64, shift uint, hash Hasher[K], replace bool) (*node[K, V], bool) {
	if shift > maxShift {
		for i := range n.entries {
			if n.entries[i].key == k {
				if !replace {
					return n, false
				}
				return n.withValue(o, i, v), false
			}
		}
		return n.withEntry(o, 0, len(n.entries), entry[K, V]{k, v}), true
	}
	bit := bitpos(h, shift)
	if n.dataMap&bit != 0 {
		i := index(n.dataMap, bit)
		e := n.entries[i]
		if e.key == k {
			if !replace {
				return n, false
			}
			return n.withValue(o, i, v), false
		}
		sub := mergeTwo(o, e, hash(e.key), entry[K, V]{k, v}, h, shift+bitsPerLevel)
		return n.entryToChild(o, bit, i, sub), true
	}
	if n.nodeMap&bit != 0 {
		ci := index(n.nodeMap, bit)
		c := n.children[ci]
		nc, added := c.set(o, k, v, h, shift+bitsPerLevel, hash, replace)
		if nc == c {
			return n, added
		}
		return n.withChild(o, ci, nc), added
	}
	return n.withEntry(o, bit, index(n.dataMap, bit), entry[K, V]{k, v}), true
}

// del returns the node replacing n and whether k was found. A returned
// node with one entry and no children is inlined by the caller.
func (n *node[K, V]) del(o *owner, k K, h uint64, shift uint) (*node[K, V], bool) {
	if shift > maxShift {
		for i := range n.entries {
			if n.entries[i].key == k {
				return n.withoutEntry(o, 0, i), true
			}
		}
		return n, false
	}
	bit := bitpos(h, shift)
	if n.dataMap&bit != 0 {
		i := index(n.dataMap, bit)
		if n.entries[i].key != k {
			return n, false
		}
		return n.withoutEntry(o, bit, i), true
	}
	if n.nodeMap&bit != 0 {
		ci := index(n.nodeMap, bit)
		c := n.children[ci]
		nc, found := c.del(o, k, h, shift+bitsPerLevel)
		if !found {
			return n, false
		}
		if len(nc.children) == 0 && len(nc.entries) == 1 {
			return n.childToEntry(o, bit, ci, nc.entries[0]), true
		}
		if nc == c {
			return n, true
		}
		return n.withChild(o, ci, nc), true
	}
	return n, false
}

// mergeTwo builds the sub-node holding two entries whose hashes agree
// below shift.
func mergeTwo[K comparable, V any](o *owner, e1 entry[K, V], h1 uint64, e2 entry[K, V], h2 uint64, shift uint) *node[K, V] {
	if shift > maxShift {
		return &node[K, V]{entries: []entry[K, V]{e1, e2}, owner: o}
	}
	b1, b2 := bitpos(h1, shift), bitpos(h2, shift)
	if b1 == b2 {
		return &node[K, V]{nodeMap: b1, children: []*node[K, V]{mergeTwo(o, e1, h1, e2, h2, shift+bitsPerLevel)}, owner: o}
	}
	if b1 > b2 {
		e1, e2 = e2, e1
	}
	p := &pairNode[K, V]{e: [2]entry[K, V]{e1, e2}}
	p.n = node[K, V]{dataMap: b1 | b2, entries: p.e[:], owner: o}
	return &p.n
}

// pairNode is a node made by mergeTwo together with the array of its two
// entries: one allocation instead of two, for the node that every insert
// into an occupied slot makes (a Transient's most frequent allocation).
// The entries' capacity is 2, so the first insert into the node moves them
// to a slice of their own; the array then stays, unused, as long as the
// node does.
type pairNode[K comparable, V any] struct {
	n node[K, V]
	e [2]entry[K, V]
}

// The editors below return n changed in place if o owns it, or else a copy.
// A copy made for a transient (o != nil) gets slices of its own, since it
// will be edited in place later; a persistent copy shares the slices it does
// not change.

func (n *node[K, V]) owned(o *owner) bool { return o != nil && n.owner == o }

func (n *node[K, V]) clone(o *owner, entries bool, children bool) *node[K, V] {
	c := &node[K, V]{dataMap: n.dataMap, nodeMap: n.nodeMap, entries: n.entries, children: n.children, owner: o}
	if entries || o != nil {
		c.entries = append([]entry[K, V](nil), n.entries...)
	}
	if children || o != nil {
		c.children = append([]*node[K, V](nil), n.children...)
	}
	return c
}

func (n *node[K, V]) withValue(o *owner, i int, v V) *node[K, V] {
	if !n.owned(o) {
		n = n.clone(o, true, false)
	}
	n.entries[i].val = v
	return n
}

func (n *node[K, V]) withChild(o *owner, ci int, c *node[K, V]) *node[K, V] {
	if !n.owned(o) {
		n = n.clone(o, false, true)
	}
	n.children[ci] = c
	return n
}

func (n *node[K, V]) withEntry(o *owner, bit uint32, i int, e entry[K, V]) *node[K, V] {
	if n.owned(o) {
		n.entries = insertAt(n.entries, i, e)
		n.dataMap |= bit
		return n
	}
	c := n.clone(nil, false, false)
	c.owner = o
	c.entries = insertCopy(n.entries, i, e)
	if o != nil {
		c.children = append([]*node[K, V](nil), n.children...)
	}
	c.dataMap |= bit
	return c
}

func (n *node[K, V]) withoutEntry(o *owner, bit uint32, i int) *node[K, V] {
	if n.owned(o) {
		n.entries = removeAt(n.entries, i)
		n.dataMap &^= bit
		return n
	}
	c := n.clone(nil, false, false)
	c.owner = o
	c.entries = removeCopy(n.entries, i)
	if o != nil {
		c.children = append([]*node[K, V](nil), n.children...)
	}
	c.dataMap &^= bit
	return c
}

// entryToChild replaces the entry at data index i by sub-node sub.
func (n *node[K, V]) entryToChild(o *owner, bit uint32, i int, sub *node[K, V]) *node[K, V] {
	ci := index(n.nodeMap, bit)
	if n.owned(o) {
		n.entries = removeAt(n.entries, i)
		n.children = insertAt(n.children, ci, sub)
	} else {
		n = &node[K, V]{dataMap: n.dataMap, nodeMap: n.nodeMap, entries: removeCopy(n.entries, i), children: insertCopy(n.children, ci, sub), owner: o}
	}
	n.dataMap &^= bit
	n.nodeMap |= bit
	return n
}

// childToEntry replaces the sub-node at child index ci by entry e.
func (n *node[K, V]) childToEntry(o *owner, bit uint32, ci int, e entry[K, V]) *node[K, V] {
	i := index(n.dataMap, bit)
	if n.owned(o) {
		n.children = removeAt(n.children, ci)
		n.entries = insertAt(n.entries, i, e)
	} else {
		n = &node[K, V]{dataMap: n.dataMap, nodeMap: n.nodeMap, entries: insertCopy(n.entries, i, e), children: removeCopy(n.children, ci), owner: o}
	}
	n.nodeMap &^= bit
	n.dataMap |= bit
	return n
}

// insertAt inserts x at i in place (growing s if needed, to a capacity
// of at least 4: a node a Transient grows in place gains entries and
// children one at a time, and append alone would reallocate at 1 and 2).
func insertAt[T any](s []T, i int, x T) []T {
	var zero T
	if len(s) == cap(s) && len(s) < 4 {
		s = append(make([]T, 0, 4), s...)
	}
	s = append(s, zero)
	copy(s[i+1:], s[i:])
	s[i] = x
	return s
}

// removeAt removes s[i] in place, clearing the freed slot.
func removeAt[T any](s []T, i int) []T {
	copy(s[i:], s[i+1:])
	var zero T
	s[len(s)-1] = zero
	return s[:len(s)-1]
}

// insertCopy returns a new slice: s with x inserted at i.
func insertCopy[T any](s []T, i int, x T) []T {
	c := make([]T, len(s)+1)
	copy(c, s[:i])
	c[i] = x
	copy(c[i+1:], s[i:])
	return c
}

// removeCopy returns a new slice: s without s[i], or nil if it would be
// empty.
func removeCopy[T any](s []T, i int) []T {
	if len(s) == 1 {
		return nil
	}
	c := make([]T, len(s)-1)
	copy(c, s[:i])
	copy(c[i:], s[i+1:])
	return c
}
