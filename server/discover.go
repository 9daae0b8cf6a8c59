package server

import (
	"context"
	"sync"
	"time"

	"github.com/echostore/echostore/names"
)

// DiscoverEvery is the least time between two discoveries of archived
// streams: each one SCANs the keyspace of every master.
const DiscoverEvery = time.Minute

// discoverer paces the discovery of the archived streams registered in
// Redis (echostore.Node.Adoptable) and remembers the streams it left alone
// for max_streams.
type discoverer struct {
	mu     sync.Mutex
	last   time.Time                // the last discovery
	forced bool                     // a discovery is due at once (force)
	seen   map[names.StreamRef]bool // streams found and left alone (logged once)
}

func newDiscoverer() *discoverer { return &discoverer{seen: map[names.StreamRef]bool{}} }

// due reports whether a discovery is due now (the first always is, and
// one forced since the last), and if so counts it as done.
func (d *discoverer) due(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.last.IsZero() && now.Sub(d.last) < DiscoverEvery && !d.forced {
		return false
	}
	d.last, d.forced = now, false
	return true
}

// force makes the next discovery due at once: the group's nodes changed,
// or one of them met a new archived stream. A nil discoverer (discovery
// off) ignores it.
func (d *discoverer) force() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.forced = true
	d.mu.Unlock()
}

// discover adopts, at most once per DiscoverEvery or when forced, the
// archived streams registered in Redis that the node can adopt
// (echostore.Node.Adoptable: not declared, its share, its archive within
// reach) and that this server did not meet through the API: each is
// archived with the defaults' window and trim_after, within max_streams.
func (s *Server) discover(ctx context.Context) {
	if s.disc == nil || !s.disc.due(time.Now()) {
		return
	}
	for a, err := range s.node.Adoptable(ctx) {
		if err != nil {
			s.log.Warn("serve: discovery of archived streams", "err", err)
			break
		}
		k := a.Ref
		if _, known := s.lookup(k); known {
			continue
		}
		st, err := s.cfg.resolve(k, StreamConfig{})
		if err != nil {
			continue
		}
		if err := s.admit(k); err != nil {
			s.leftAlone(k, "serve: archived stream left alone: max_streams reached", err)
			continue
		}
		st.archived = true // registered as archived: retention would refuse it
		s.log.Info("serve: archived stream discovered in Redis", k.LogAttr(),
			"keep", st.window.Keep, "max_age", st.window.MaxAge, "local_volume", a.LocalVolume)
		if err := s.declare(st); err != nil {
			s.unadmit(k)
			s.log.Warn("serve: discovery", "err", err)
		}
	}
}

// leftAlone logs, once per stream, that discovery leaves k alone and why.
func (s *Server) leftAlone(k names.StreamRef, msg string, err error) {
	s.disc.mu.Lock()
	first := !s.disc.seen[k]
	s.disc.seen[k] = true
	s.disc.mu.Unlock()
	if first {
		s.log.Info(msg, k.LogAttr(), "err", err)
	}
}
