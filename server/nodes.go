package server

import (
	"cmp"
	"context"
	"net/http"
	"slices"
)

// maxListedShare bounds the streams GET /v1/nodes names per node (every
// one is counted).
const maxListedShare = 100

// NodeList is the answer of GET /v1/nodes: the live nodes of this node's
// group (one remote identity, one Redis) as its latest heartbeat read
// them, and which of the archived streams this node knows each one cycles.
type NodeList struct {
	// Group is the group's name (the remote's identity), "" before the
	// first heartbeat (the node then cycles every stream it knows, alone).
	Group string `json:"group"`
	// Self is this node's id.
	Self  string    `json:"self"`
	Nodes []NodeRow `json:"nodes"`
}

// NodeRow is one live node of a group.
type NodeRow struct {
	// ID is the node's id (its data dir's NodeIDFile); Self marks this node.
	ID   string `json:"id"`
	Self bool   `json:"self"`
	// Node is its node number, Addr its HTTP address and Started when it
	// started (RFC 3339), from its heartbeat ("" and 0 once expired).
	Node    int    `json:"node"`
	Addr    string `json:"addr"`
	Started string `json:"started"`
	// HeartbeatLeftMs is how long its last heartbeat had to live when this
	// node's last heartbeat read the group: a node is dropped when it
	// reaches 0.
	HeartbeatLeftMs int64 `json:"heartbeat_left_ms"`
	// Streams are the archived streams (their API paths, at most 100, by
	// path) of those this node knows that the node cycles; StreamsN counts
	// them all.
	Streams  []string `json:"streams"`
	StreamsN int      `json:"streams_n"`
}

func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.nodeList(r.Context()))
	return nil
}

// nodeList reads the group as the latest view has it, and each member's
// heartbeat value (one Redis round trip; a failure leaves them blank).
func (s *Server) nodeList(ctx context.Context) NodeList {
	id := s.node.ID()
	out := NodeList{Self: id, Nodes: []NodeRow{}}
	v := s.node.Group()
	refs := s.archivedStreams()
	if v == nil {
		// Alone: this node cycles every stream it knows.
		row := NodeRow{ID: id, Self: true, Node: s.cfg.Node, Addr: s.Addr().String()}
		for _, k := range refs {
			row.Streams = append(row.Streams, apiPath(k))
		}
		out.Nodes = append(out.Nodes, finishRow(row))
		return out
	}
	out.Group = v.Group
	rows := map[string]*NodeRow{}
	for _, id := range v.Nodes {
		rows[id] = &NodeRow{ID: id, Self: id == v.Self, HeartbeatLeftMs: v.Left[id]}
	}
	if ms, err := s.node.GroupMembers(ctx, v); err == nil {
		for _, m := range ms {
			r := rows[m.ID]
			r.Node, r.Addr, r.Started = m.Node, m.Addr, m.Started
		}
	}
	for _, k := range refs {
		if r := rows[v.Owner(k)]; r != nil {
			r.Streams = append(r.Streams, apiPath(k))
		}
	}
	for _, id := range v.Nodes {
		out.Nodes = append(out.Nodes, finishRow(*rows[id]))
	}
	return out
}

// finishRow sorts and bounds a row's streams.
func finishRow(r NodeRow) NodeRow {
	r.StreamsN = len(r.Streams)
	slices.SortFunc(r.Streams, cmp.Compare[string])
	if len(r.Streams) > maxListedShare {
		r.Streams = r.Streams[:maxListedShare]
	}
	if r.Streams == nil {
		r.Streams = []string{}
	}
	return r
}
