package champ

import "iter"

// Collect builds a Map from the entries of seq in one pass, without the
// path copies of repeated Set: it partitions the entries by their 5-bit
// slot level by level (a stable counting sort per node, O(n) per level)
// and builds each node once, with slices of exactly the right size. A key
// seen twice keeps its last value. The result has the same (canonical)
// shape as inserting the entries one by one. sizeHint, if positive, is the
// expected number of entries.
func Collect[K comparable, V any](h Hasher[K], sizeHint int, seq iter.Seq2[K, V]) Map[K, V] {
	if h == nil {
		panic("champ: Collect with a nil Hasher")
	}
	entries := make([]entry[K, V], 0, max(sizeHint, 0))
	for k, v := range seq {
		entries = append(entries, entry[K, V]{k, v})
	}
	return Build(h, len(entries), func(i int) (K, V) { return entries[i].key, entries[i].val })
}

// Build builds a Map of the n entries at(0), …, at(n-1) the way Collect
// does, without gathering them first: a caller that holds its entries in a
// slice (recovery's decoded records) hands them over by index, and each is
// read twice, once for its hash and once when its node is built. A key at
// several indexes keeps the value at the last. The result has the same
// shape as inserting the entries one by one.
func Build[K comparable, V any](h Hasher[K], n int, at func(i int) (K, V)) Map[K, V] {
	if h == nil {
		panic("champ: Build with a nil Hasher")
	}
	m := Map[K, V]{hash: h}
	if n <= 0 {
		return m
	}
	items := make([]item, n)
	for i := range items {
		k, _ := at(i)
		items[i] = item{hash: h(k), i: i}
	}
	a := &arena[K, V]{at: at, entries: make([]entry[K, V], 0, n)}
	m.root, m.n = a.build(items, make([]item, n), 0)
	return m
}

// arena hands out the nodes and slices of one Collect from a few large
// allocations instead of one per node. Every slice it returns has its
// capacity clipped to its length, so a later append (by a Transient)
// reallocates instead of writing into a neighbour; nodes it makes have no
// owner, so nothing edits them in place. The price: a chunk stays
// allocated while any node or slice in it is reachable.
type arena[K comparable, V any] struct {
	at       func(int) (K, V)
	entries  []entry[K, V]
	nodes    []node[K, V]
	children []*node[K, V]
}

const arenaChunk = 512

func (a *arena[K, V]) node() *node[K, V] {
	if len(a.nodes) == cap(a.nodes) {
		a.nodes = make([]node[K, V], 0, arenaChunk)
	}
	a.nodes = a.nodes[:len(a.nodes)+1]
	return &a.nodes[len(a.nodes)-1]
}

func (a *arena[K, V]) entrySlice(n int) []entry[K, V] {
	if cap(a.entries)-len(a.entries) < n {
		a.entries = make([]entry[K, V], 0, max(n, arenaChunk))
	}
	l := len(a.entries)
	a.entries = a.entries[:l+n]
	return a.entries[l : l : l+n]
}

func (a *arena[K, V]) childSlice(n int) []*node[K, V] {
	if cap(a.children)-len(a.children) < n {
		a.children = make([]*node[K, V], 0, max(n, arenaChunk))
	}
	l := len(a.children)
	a.children = a.children[:l+n]
	return a.children[l : l : l+n]
}

// item is an entry's hash and its index in the input.
type item struct {
	hash uint64
	i    int
}

// build makes the node at shift for items (at least one; all agree on the
// hash bits below shift; in input order) and returns it with the number
// of distinct keys under it. scratch is as long as items.
func (a *arena[K, V]) build(items, scratch []item, shift uint) (*node[K, V], int) {
	if shift > maxShift {
		items = dedupe(items, a.at)
		n := a.node()
		n.entries = a.entrySlice(len(items))
		for _, it := range items {
			n.entries = append(n.entries, a.entry(it.i))
		}
		return n, len(items)
	}
	sortBySlot(items, scratch, shift)
	return a.fill(items, scratch, shift)
}

func (a *arena[K, V]) entry(i int) entry[K, V] {
	k, v := a.at(i)
	return entry[K, V]{k, v}
}

// runs returns the runs of equal slot at shift of items (sorted by that
// slot), in slot order, each deduplicated if it holds one hash only, and
// how many of them are single entries.
func (a *arena[K, V]) runs(items []item, shift uint, runs *[32]run) (nr, data int) {
	for i := 0; i < len(items); {
		slot := (items[i].hash >> shift) & 31
		j := i + 1
		for j < len(items) && (items[j].hash>>shift)&31 == slot {
			j++
		}
		g := items[i:j]
		if len(g) > 1 && sameHash(g) {
			g = dedupe(g, a.at)
		}
		if len(g) == 1 {
			data++
		}
		runs[nr] = run{i, len(g)}
		nr++
		i = j
	}
	return nr, data
}

// run is a run of items of one slot: where it starts and how many items
// (after deduplication) it holds.
type run struct{ start, n int }

// fill makes the node at shift for items, sorted by their slot at shift.
func (a *arena[K, V]) fill(items, scratch []item, shift uint) (*node[K, V], int) {
	// Runs of equal slot, in slot order. A run is an inline entry if it holds
	// one distinct key: one item, or items of one hash that dedupe to one.
	var rs [32]run
	nr, data := a.runs(items, shift, &rs)
	n := a.node()
	if data > 0 {
		n.entries = a.entrySlice(data)
	}
	if c := nr - data; c > 0 {
		n.children = a.childSlice(c)
	}
	total := 0
	for _, r := range rs[:nr] {
		g := items[r.start : r.start+r.n]
		bit := bitpos(g[0].hash, shift)
		if r.n == 1 {
			n.dataMap |= bit
			n.entries = append(n.entries, a.entry(g[0].i))
			total++
		} else {
			n.nodeMap |= bit
			c, cn := a.build(g, scratch[r.start:r.start+r.n], shift+bitsPerLevel)
			n.children = append(n.children, c)
			total += cn
		}
	}
	return n, total
}

// sortBySlot sorts items by their slot at shift, stably: insertion sort
// for a few items, a counting sort through scratch for more.
func sortBySlot(items, scratch []item, shift uint) {
	if len(items) <= 12 {
		for i := 1; i < len(items); i++ {
			it := items[i]
			s := (it.hash >> shift) & 31
			j := i
			for j > 0 && (items[j-1].hash>>shift)&31 > s {
				items[j] = items[j-1]
				j--
			}
			items[j] = it
		}
		return
	}
	var offs [33]int
	for _, it := range items {
		offs[(it.hash>>shift)&31+1]++
	}
	for s := 1; s <= 32; s++ {
		offs[s] += offs[s-1]
	}
	for _, it := range items {
		s := (it.hash >> shift) & 31
		scratch[offs[s]] = it
		offs[s]++
	}
	copy(items, scratch)
}

func sameHash(items []item) bool {
	for _, it := range items[1:] {
		if it.hash != items[0].hash {
			return false
		}
	}
	return true
}

// dedupe keeps, among items with equal keys, only the last, in place.
func dedupe[K comparable, V any](items []item, at func(int) (K, V)) []item {
	out := items[:0]
	for a := range items {
		later := false
		ka, _ := at(items[a].i)
		for b := a + 1; b < len(items); b++ {
			if kb, _ := at(items[b].i); kb == ka {
				later = true
				break
			}
		}
		if !later {
			out = append(out, items[a])
		}
	}
	return out
}
