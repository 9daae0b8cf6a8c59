package champ

import (
	"cmp"
	"iter"
	"slices"
)

// Collect builds a Map from the entries of seq in one pass, without the
// path copies of repeated Set: it sorts the entries into trie order and
// builds each node once, with slices of exactly the right size. A key seen
// twice keeps its last value. The result has the same (canonical) shape as
// inserting the entries one by one. sizeHint, if positive, is the expected
// number of entries.
func Collect[K comparable, V any](h Hasher[K], sizeHint int, seq iter.Seq2[K, V]) Map[K, V] {
	if h == nil {
		panic("champ: Collect with a nil Hasher")
	}
	entries := make([]entry[K, V], 0, max(sizeHint, 0))
	items := make([]item, 0, max(sizeHint, 0))
	for k, v := range seq {
		hk := h(k)
		items = append(items, item{ord: trieOrder(hk), hash: hk, i: len(entries)})
		entries = append(entries, entry[K, V]{k, v})
	}
	// Among equal hashes, later entries stay later.
	slices.SortFunc(items, func(a, b item) int {
		if c := cmp.Compare(a.ord, b.ord); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	items = dedupe(items, entries)
	m := Map[K, V]{n: len(items), hash: h}
	if len(items) > 0 {
		m.root = build(items, entries, 0)
	}
	return m
}

// item is an entry's place in trie order.
type item struct {
	ord  uint64 // the hash with its 5-bit groups reversed: level 0 most significant
	hash uint64
	i    int // index into the entries
}

// trieOrder reverses the order of h's 5-bit groups (level 0 = bits 0-4
// first), so that sorting by it sorts entries the way the trie visits them.
func trieOrder(h uint64) uint64 {
	var o uint64
	for shift := uint(0); shift < maxShift; shift += bitsPerLevel {
		o |= (h >> shift & 31) << (maxShift - 1 - shift)
	}
	return o | h>>maxShift // level 12: the top 4 bits, least significant
}

// dedupe keeps, among items with equal keys (which have equal hashes and
// so are adjacent), only the last.
func dedupe[K comparable, V any](items []item, entries []entry[K, V]) []item {
	out := items[:0]
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].hash == items[i].hash {
			j++
		}
		if j == i+1 {
			out = append(out, items[i])
			i = j
			continue
		}
		run := items[i:j]
		for a := range run {
			later := false
			for b := a + 1; b < len(run); b++ {
				if entries[run[b].i].key == entries[run[a].i].key {
					later = true
					break
				}
			}
			if !later {
				out = append(out, run[a])
			}
		}
		i = j
	}
	return out
}

// build makes the node at shift for items, which all agree on the hash
// bits below shift and are in trie order.
func build[K comparable, V any](items []item, entries []entry[K, V], shift uint) *node[K, V] {
	if shift > maxShift {
		n := &node[K, V]{entries: make([]entry[K, V], len(items))}
		for i, it := range items {
			n.entries[i] = entries[it.i]
		}
		return n
	}
	n := &node[K, V]{}
	data, sub := 0, 0
	for i := 0; i < len(items); {
		j := groupEnd(items, i, shift)
		if j-i == 1 {
			data++
		} else {
			sub++
		}
		i = j
	}
	if data > 0 {
		n.entries = make([]entry[K, V], 0, data)
	}
	if sub > 0 {
		n.children = make([]*node[K, V], 0, sub)
	}
	for i := 0; i < len(items); {
		j := groupEnd(items, i, shift)
		bit := bitpos(items[i].hash, shift)
		if j-i == 1 {
			n.dataMap |= bit
			n.entries = append(n.entries, entries[items[i].i])
		} else {
			n.nodeMap |= bit
			n.children = append(n.children, build(items[i:j], entries, shift+bitsPerLevel))
		}
		i = j
	}
	return n
}

// groupEnd returns the end of the run of items from i that share the slot
// at shift.
func groupEnd(items []item, i int, shift uint) int {
	slot := (items[i].hash >> shift) & 31
	j := i + 1
	for j < len(items) && (items[j].hash>>shift)&31 == slot {
		j++
	}
	return j
}
