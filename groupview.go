package echostore

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/echostore/echostore/names"
)

// A group's view and its shares: which live node of a group cycles an
// archived stream (rendezvous hashing). The heartbeats that read a view
// are group.go's.

// GroupView is one reading of a node's group, made by a heartbeat.
type GroupView struct {
	// Group names the group: the remote's identity.
	Group string
	// Self is the node's id; Nodes the live nodes' ids, sorted, Self among
	// them.
	Self  string
	Nodes []string
	// Epoch is the group's streams epoch (StreamsEpochKey).
	Epoch string
	// Gen counts the changes of Nodes the node saw since it started (a
	// node that joined and left again makes two): what a node remembers of
	// a stream's last cycle holds under one Gen only.
	Gen uint64
	// Left is, per live node, the milliseconds its heartbeat had left when
	// this view was read.
	Left map[string]int64
}

// Owner returns the live node of v that cycles ref: the highest rendezvous
// score, ties to the lower id ("" for a view of no nodes).
func (v *GroupView) Owner(ref names.StreamRef) string {
	var best string
	var bestScore uint64
	for _, n := range v.Nodes {
		if sc := score(n, ref); best == "" || sc > bestScore {
			best, bestScore = n, sc
		}
	}
	return best
}

// Key names the membership v was read under: its generation and its live
// nodes ("" for a nil view).
func (v *GroupView) Key() string {
	if v == nil {
		return ""
	}
	return strconv.FormatUint(v.Gen, 10) + ":" + strings.Join(v.Nodes, ",")
}

// name is v's group, "" for a nil view.
func (v *GroupView) name() string {
	if v == nil {
		return ""
	}
	return v.Group
}

// ShareOf returns which of the nodes (ids) cycles the archived stream ref
// when they are its group's live nodes: the one rendezvous hashing picks,
// as every node computes it ("" for no nodes).
func ShareOf(nodes []string, ref names.StreamRef) string {
	return (&GroupView{Nodes: nodes}).Owner(ref)
}

// score is the rendezvous score of node id for ref: FNV-1a over the id, a
// zero byte and the stream's name, finished by SplitMix64's mixer.
func score(id string, ref names.StreamRef) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(ref.String()))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
