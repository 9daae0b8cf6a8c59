package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// The nodes of a group share its archived streams: the node's Run
// heartbeats and picks its share (echostore's group.go). What serve adds
// is the group's gauges, GET /v1/nodes (nodes.go) and the announcement of
// the archived streams its API meets first.

// NodeIDFile is the file of the data dir that holds the node's id
// (echostore.NodeIDFile).
const NodeIDFile = echostore.NodeIDFile

// fleetMetrics are the gauges of the node's group.
type fleetMetrics struct {
	nodesLive, owned, elsewhere prometheus.Gauge
}

// newFleetMetrics returns the group's gauges, registered on reg.
func newFleetMetrics(reg *prometheus.Registry) *fleetMetrics {
	m := &fleetMetrics{
		nodesLive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "echostore_nodes_live",
			Help: "Live nodes of this node's group (the serve processes on this Redis and this remote), itself included, at its last heartbeat.",
		}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "echostore_archived_streams_owned",
			Help: "Archived streams this node knows and cycles (its share of the group's) at its last beat.",
		}),
		elsewhere: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "echostore_archived_streams_elsewhere",
			Help: "Archived streams this node knows that another live node of its group cycles, at its last beat.",
		}),
	}
	reg.MustRegister(m.nodesLive, m.owned, m.elsewhere)
	return m
}

// onGroup observes each heartbeat of the node's Run that read the group:
// the live nodes' gauge (a changed view makes the node's next discovery
// due at once by itself).
func (s *Server) onGroup(v *echostore.GroupView, _ bool) {
	s.fm.nodesLive.Set(float64(len(v.Nodes)))
}

// countShare sets the gauges of the archived streams this node cycles and
// of those it leaves to another node.
func (s *Server) countShare() {
	refs := s.archivedStreams()
	owned := 0
	for _, k := range refs {
		if s.node.Owns(k) {
			owned++
		}
	}
	s.fm.owned.Set(float64(owned))
	s.fm.elsewhere.Set(float64(len(refs) - owned))
}

// announce registers ref, an archived stream met through the API whose
// first records were just appended, as archived in Redis and moves the
// group's streams epoch, so that the node whose share it is (maybe another)
// discovers it on its next beat, before any cycle has registered it. A
// failure is retried by the next beats.
func (s *Server) announce(ctx context.Context, ref names.StreamRef) {
	err := s.node.Announce(ctx, ref)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.unannounced[ref] = true
		s.log.Warn("serve: a new archived stream not announced to the group; retried at the next beat", ref.LogAttr(), "err", err)
		return
	}
	delete(s.unannounced, ref)
}

// announceAgain retries the announcements that failed.
func (s *Server) announceAgain(ctx context.Context) {
	s.mu.Lock()
	var refs []names.StreamRef
	for k := range s.unannounced {
		if st, ok := s.streams[k]; ok && st.archived {
			refs = append(refs, k)
		} else {
			delete(s.unannounced, k) // deleted since, or declared unarchived
		}
	}
	s.mu.Unlock()
	for _, k := range refs {
		s.announce(ctx, k)
	}
}

// NodeID returns the node's id (echostore.Node.ID).
func (s *Server) NodeID() string { return s.node.ID() }

// archivedStreams returns the archived streams the server knows.
func (s *Server) archivedStreams() []names.StreamRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]names.StreamRef, 0, len(s.streams))
	for k, st := range s.streams {
		if st.archived {
			refs = append(refs, k)
		}
	}
	return refs
}
