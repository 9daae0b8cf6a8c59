// Package champ implements a CHAMP persistent hash map (Steindorfer & Vinju,
// OOPSLA 2015, "Optimizing Hash-Array Mapped Tries for Fast and Lean
// Immutable JVM Collections"): the in-memory map behind the accept outbox.
//
// # What it owns
//
// The package owns the trie and nothing else: no I/O, no locks, no global
// state. A Map is a value. Set and Delete return a new Map and never change
// the receiver, so keeping a Map is an O(1) snapshot: later writes share the
// unchanged nodes with it (structural sharing) and copy only the path they
// change.
//
// # Layout
//
// Each node covers 5 bits of a 64-bit hash (32 ways). It has two bitmaps: a
// data map, whose set bits say which of the 32 slots hold an inline
// key/value entry, and a node map, whose set bits say which slots point to a
// sub-node. Entries are stored in slot order, before (in a separate slice
// from) the sub-node pointers, also in slot order; a slot's position is the
// population count of the bitmap below its bit. Levels 0 to 12 consume bits
// 0-4, 5-9, …, 60-63 of the hash; keys whose 64-bit hashes are all equal end
// in a collision node below level 12, which keeps its entries in a plain
// list.
//
// # Promises
//
//   - Canonical form. Delete inlines a sub-node left with a single entry back
//     into its parent, recursively, so the shape of a Map depends only on its
//     set of keys (and their hashes), never on the order of inserts and
//     deletes that produced it. Iteration order (All) is therefore a function
//     of the key set: two maps with equal key sets iterate in the same order,
//     up to the order of keys inside a collision node.
//   - Snapshots are free and immutable. Nothing ever mutates a node reachable
//     from a Map value.
//   - Transients. Map.Transient returns a single-owner builder that mutates
//     in place the nodes it created itself (marked with its owner token) and
//     copies any other node on first write. Transient.Persistent seals it and
//     returns the Map; the nodes are never mutated again. Writing to a sealed
//     transient is a no-op (documented on each method); reads keep working
//     on the sealed state. A Transient is not safe for concurrent use.
//   - Hashers. A Map is generic over its key with a Hasher; Uint64 mixes the
//     bits of integer keys (branded ids have sequential low bits) and
//     NewStringHasher hashes strings with maphash under a seed of its own.
package champ
