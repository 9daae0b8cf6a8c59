package champ

import (
	"iter"
	"math/bits"
	"slices"
)

// Collect builds a Map from the entries of seq in one pass, without the
// path copies of repeated Set (see Build for how). A key seen twice keeps
// its last value. The result is the Map that inserting the entries one by
// one gives: the same shape, and the same iteration order, that of a
// collision node included. sizeHint, if positive, is the expected number
// of entries.
func Collect[K comparable, V any](h Hasher[K], sizeHint int, seq iter.Seq2[K, V]) Map[K, V] {
	if h == nil {
		panic("champ: Collect with a nil Hasher")
	}
	src := make([]entry[K, V], 0, max(sizeHint, 0))
	for k, v := range seq {
		src = append(src, entry[K, V]{k, v})
	}
	return Build(h, len(src), func(i int) (K, V) { return src[i].key, src[i].val })
}

// Build builds a Map of the n entries at(0), …, at(n-1) the way Collect
// does, without an iterator: a caller that holds its entries in a slice
// (recovery's decoded records) hands them over by index. A key at several
// indexes keeps the value at the last (and, in a collision node, the place
// of the first, as Set does). The result is the Map that inserting the
// entries one by one gives: the same nodes, entries in the same order.
//
// How: at is called once for each index, in order, for the key, whose
// hash is kept; the hashes are sorted, with their indexes, into the order
// of the trie by a radix sort; one pass over the sorted hashes then makes
// every node once, with slices of exactly its size (see
// builder); and at is called again for each entry, in the order of the
// nodes' entries, which are written in one pass. Nothing in the sort
// holds a pointer, so the garbage collector has nothing to scan in it; the
// nodes, their entries and their children come from a few large
// allocations.
func Build[K comparable, V any](h Hasher[K], n int, at func(i int) (K, V)) Map[K, V] {
	if h == nil {
		panic("champ: Build with a nil Hasher")
	}
	if n <= 0 {
		return Map[K, V]{hash: h}
	}
	items := make([]item, n)
	for i := range items {
		k, _ := at(i)
		items[i] = item{hash: h(k), i: i}
	}
	sorted, spare, mask := sortItems(items, make([]item, n))
	b := &builder[K, V]{at: at, items: sorted, mask: mask, entries: make([]entry[K, V], n), perm: spare,
		chunk: min(max(n/4, 16), arenaChunk)}
	root, total := b.build()
	// The entries, in the order of the nodes' slices.
	for p, it := range b.perm[:b.used] {
		k, v := at(it.i)
		b.entries[p] = entry[K, V]{k, v}
	}
	return Map[K, V]{root: root, n: total, hash: h}
}

// The order of the trie: entries sorted by the slot of their hash at
// level 0, then at level 1, and so on (the low 5 bits of the hash first).
// Sorted so, the entries under any node form one run, and two distinct
// hashes share as many levels as their trailing zeros (of their xor) hold
// whole slots (see shared).

// slotAt is the slot at level l (0 to 12) of hash h.
func slotAt(h uint64, l int) uint32 { return uint32(h>>(bitsPerLevel*uint(l))) & 31 }

// shared is the number of leading levels whose slots two distinct hashes
// share (0 to 12): they part at that level.
func shared(a, b uint64) int { return bits.TrailingZeros64(a^b) / bitsPerLevel }

// less reports whether hash a comes before hash b in trie order.
func less(a, b uint64) bool {
	l := shared(a, b)
	return slotAt(a, l) < slotAt(b, l)
}

// item is an entry's hash and its index in the input.
type item struct {
	hash uint64
	i    int
}

// Radix sort parameters: each pass sorts by the slots of two levels, as a
// digit of 10 bits, the passes from the deepest levels up to level 0, and
// as many passes as leave groups of about one item sharing the sorted
// levels (they are sorted by comparison as the builder reaches them).
const (
	radixLevels  = 2
	radixBits    = radixLevels * bitsPerLevel
	radixBuckets = 1 << radixBits
	// smallSort is the length up to which a run is sorted by insertion.
	smallSort = 24
)

// radixDigit is the digit of hash h for pass p: the slots of levels 2p
// (high bits) and 2p+1.
func radixDigit(h uint64, p int) uint32 {
	s := radixBits * uint(p)
	return uint32(h>>s&31)<<bitsPerLevel | uint32(h>>(s+bitsPerLevel)&31)
}

// sortItems sorts items in trie order of the levels it sorts by, stably
// (items of equal hash keep their input order, which deduplication relies
// on), using scratch (as long as items). It returns the slice that holds
// the result and the other one, and the mask of the hash bits of the
// levels it sorted by (all: in trie order).
func sortItems(items, scratch []item) (sorted, spare []item, mask uint64) {
	n := len(items)
	if n <= smallSort {
		insertionSort(items)
		return items, scratch, ^uint64(0)
	}
	passes := 1
	switch {
	case n > 1<<20:
		passes = 3
	case n > 1<<10:
		passes = 2
	}
	counts := make([]int, passes*radixBuckets)
	var c [3]*[radixBuckets]int
	for p := range passes {
		c[p] = (*[radixBuckets]int)(counts[p*radixBuckets:])
	}
	switch passes {
	case 1:
		c0 := c[0]
		for _, it := range items {
			c0[radixDigit(it.hash, 0)]++
		}
	case 2:
		c0, c1 := c[0], c[1]
		for _, it := range items {
			c0[radixDigit(it.hash, 0)]++
			c1[radixDigit(it.hash, 1)]++
		}
	default:
		c0, c1, c2 := c[0], c[1], c[2]
		for _, it := range items {
			c0[radixDigit(it.hash, 0)]++
			c1[radixDigit(it.hash, 1)]++
			c2[radixDigit(it.hash, 2)]++
		}
	}
	src, dst := items, scratch
	// The deepest levels' digit first; a pass whose items all share one
	// digit (a weak hash) moves nothing and is skipped.
	for p := passes - 1; p >= 0; p-- {
		cp := c[p]
		if cp[radixDigit(src[0].hash, p)] == n {
			continue
		}
		sum := 0
		for d, k := range cp {
			cp[d] = sum
			sum += k
		}
		for _, it := range src {
			d := radixDigit(it.hash, p)
			dst[cp[d]] = it
			cp[d]++
		}
		src, dst = dst, src
	}
	return src, dst, 1<<(radixBits*uint(passes)) - 1
}

// sortRun sorts items in trie order, stably.
func sortRun(items []item) {
	if len(items) <= smallSort {
		insertionSort(items)
	} else if !slices.IsSortedFunc(items, cmpItem) {
		slices.SortStableFunc(items, cmpItem)
	}
}

func cmpItem(a, b item) int {
	switch {
	case a.hash == b.hash:
		return 0
	case less(a.hash, b.hash):
		return -1
	}
	return 1
}

func insertionSort(items []item) {
	for i := 1; i < len(items); i++ {
		it := items[i]
		j := i
		for j > 0 && items[j-1].hash != it.hash && less(it.hash, items[j-1].hash) {
			items[j] = items[j-1]
			j--
		}
		items[j] = it
	}
}

// builder makes the nodes of one Build from its sorted items in one pass.
// An entry's level is where it parts from both of its neighbours in trie
// order (the deeper of the two levels shared with them), so the builder
// keeps the open nodes of the path from the root to the current entry, one
// per level, and finishes each once the next entry parts from the path
// above it.
//
// The nodes, entries and children it hands out come from a few large
// allocations. Every slice has its capacity clipped to its length, so a
// later append (by a Transient) reallocates instead of writing into a
// neighbour; nodes have no owner, so nothing edits them in place. The
// price: a chunk stays allocated while any node or slice in it is
// reachable.
type builder[K comparable, V any] struct {
	at    func(int) (K, V)
	items []item // sorted by the levels of mask; in trie order up to sortedTo
	mask  uint64
	// entries has room for every entry of the map; the first used are
	// handed out, and entries[p] is to hold the input's entry perm[p].i.
	entries  []entry[K, V]
	perm     []item
	used     int
	nodes    []node[K, V]
	children []*node[K, V]
	chunk    int // nodes and children per allocation
	// open are the open nodes of the path, by level.
	open [maxShift/bitsPerLevel + 1]openNode[K, V]
}

// openNode is a node being filled: its bitmaps so far, its entries (the
// input's indexes) and children by slot, and its slot in its parent.
type openNode[K comparable, V any] struct {
	dataMap, nodeMap uint32
	slot             uint32
	ent              [32]int
	kid              [32]*node[K, V]
}

// arenaChunk bounds the nodes (64 bytes each for word-sized keys and
// values) and children pointers of one allocation.
const arenaChunk = 4096

// build makes the nodes and returns the root and the number of distinct
// keys.
func (b *builder[K, V]) build() (*node[K, V], int) {
	items := b.items
	n := len(items)
	mask := b.mask
	sortedTo := b.sortGroup(0) // items before it are in trie order
	var root *node[K, V]
	total := 0
	depth := -1 // the deepest open level
	prev := 0   // levels the current entry shares with the one before
	for i := 0; i < n; {
		// The unit: the items of one hash (almost always one).
		h := items[i].hash
		j := i + 1
		for j < n && items[j].hash == h {
			j++
		}
		next := -1 // levels shared with the next unit; -1: none
		if j < n {
			if j >= sortedTo {
				sortedTo = j + 1
				if sortedTo < n && (items[sortedTo].hash^items[j].hash)&mask == 0 {
					sortedTo = b.sortGroup(j)
				}
			}
			next = shared(h, items[j].hash)
		}
		l := max(prev, next)
		for depth < l {
			depth++
			o := &b.open[depth]
			o.dataMap, o.nodeMap = 0, 0
			if depth > 0 {
				o.slot = slotAt(h, depth-1)
			}
		}
		o := &b.open[l]
		slot := slotAt(h, l)
		if j == i+1 {
			o.dataMap |= 1 << slot
			o.ent[slot] = items[i].i
			total++
		} else {
			total += b.unit(o, slot, items[i:j], l)
		}
		// Finish the nodes the next unit is not under.
		for depth > next {
			nd := b.finish(&b.open[depth])
			if depth == 0 {
				root = nd
			} else {
				s := b.open[depth].slot
				p := &b.open[depth-1]
				p.nodeMap |= 1 << s
				p.kid[s] = nd
			}
			depth--
		}
		prev = next
		i = j
	}
	return root, total
}

// unit puts the items of one hash (at least two) in slot of o, at level l,
// and returns how many distinct keys they hold: one, an entry; more, a
// chain of single-child nodes down to a collision node.
func (b *builder[K, V]) unit(o *openNode[K, V], slot uint32, items []item, l int) int {
	g := b.dedupe(items)
	if len(g) == 1 {
		o.dataMap |= 1 << slot
		o.ent[slot] = g[0].i
		return 1
	}
	o.nodeMap |= 1 << slot
	o.kid[slot] = b.chain(g, l+1)
	return len(g)
}

// sortGroup sorts the group of items from i on that share the levels the
// radix sort sorted by into trie order, and returns where the group ends.
func (b *builder[K, V]) sortGroup(i int) int {
	items := b.items
	e := i + 1
	for e < len(items) && (items[e].hash^items[i].hash)&b.mask == 0 {
		e++
	}
	if e-i > 1 && b.mask != ^uint64(0) {
		sortRun(items[i:e])
	}
	return e
}

// finish makes the node of o.
func (b *builder[K, V]) finish(o *openNode[K, V]) *node[K, V] {
	nd := b.node()
	nd.dataMap, nd.nodeMap = o.dataMap, o.nodeMap
	if o.dataMap != 0 {
		var p int
		nd.entries, p = b.entrySlice(bits.OnesCount32(o.dataMap))
		perm := b.perm[p : p+len(nd.entries)]
		for m, x := o.dataMap, 0; m != 0; m, x = m&(m-1), x+1 {
			perm[x].i = o.ent[bits.TrailingZeros32(m)]
		}
	}
	if o.nodeMap != 0 {
		nd.children = b.childSlice(bits.OnesCount32(o.nodeMap))
		for m := o.nodeMap; m != 0; m &= m - 1 {
			nd.children = append(nd.children, o.kid[bits.TrailingZeros32(m)])
		}
	}
	return nd
}

// chain makes the node at level l for items of one hash and distinct keys
// (at least two): above the last level a node whose only child is the
// chain below, and below it the collision node, its entries in input
// order.
func (b *builder[K, V]) chain(items []item, l int) *node[K, V] {
	nd := b.node()
	if l > maxShift/bitsPerLevel {
		var p int
		nd.entries, p = b.entrySlice(len(items))
		for x, it := range items {
			b.perm[p+x].i = it.i
		}
		return nd
	}
	nd.nodeMap = 1 << slotAt(items[0].hash, l)
	nd.children = b.childSlice(1)
	nd.children = append(nd.children, b.chain(items, l+1))
	return nd
}

func (b *builder[K, V]) node() *node[K, V] {
	if len(b.nodes) == cap(b.nodes) {
		b.nodes = make([]node[K, V], 0, b.chunk)
	}
	b.nodes = b.nodes[:len(b.nodes)+1]
	return &b.nodes[len(b.nodes)-1]
}

// entrySlice returns the next n entries, to be filled with the input's
// entries at the indexes set in perm[p:p+n].
func (b *builder[K, V]) entrySlice(n int) (s []entry[K, V], p int) {
	p = b.used
	b.used += n
	return b.entries[p:b.used:b.used], p
}

func (b *builder[K, V]) childSlice(n int) []*node[K, V] {
	if cap(b.children)-len(b.children) < n {
		b.children = make([]*node[K, V], 0, max(n, b.chunk))
	}
	l := len(b.children)
	b.children = b.children[:l+n]
	return b.children[l : l : l+n]
}

// dedupe keeps one item per distinct key of items (all of one hash, in
// input order), in place, and returns them: each key's first item, with
// the index of its last, as repeated Set keeps the first place (in a
// collision node) and the last value.
func (b *builder[K, V]) dedupe(items []item) []item {
	out := items[:0]
	var keys []K // the keys of out
	var first map[K]int
	if len(items) > 32 {
		first = make(map[K]int, len(items))
	}
next:
	for _, it := range items {
		k, _ := b.at(it.i)
		if first != nil {
			if f, ok := first[k]; ok {
				out[f].i = it.i
				continue
			}
			first[k] = len(out)
		} else {
			for f := range keys {
				if keys[f] == k {
					out[f].i = it.i
					continue next
				}
			}
			keys = append(keys, k)
		}
		out = append(out, it)
	}
	return out
}
