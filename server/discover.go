package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// DiscoverEvery is the least time between two discoveries of archived
// streams: each one SCANs the keyspace of every master.
const DiscoverEvery = time.Minute

// discoverer paces the discovery of the archived streams registered in
// Redis (archive.ArchivedStreams) and remembers the streams it left alone.
type discoverer struct {
	mu   sync.Mutex
	last time.Time                // the last discovery
	seen map[names.StreamRef]bool // streams found and left alone (logged once)
}

func newDiscoverer() *discoverer { return &discoverer{seen: map[names.StreamRef]bool{}} }

// due reports whether a discovery is due now (the first always is), and
// if so counts it as done.
func (d *discoverer) due(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.last.IsZero() && now.Sub(d.last) < DiscoverEvery {
		return false
	}
	d.last = now
	return true
}

// discover adopts the archived streams registered in Redis that this server
// neither declared nor met through the API: those whose archive volume is in
// this data dir, and those nothing was folded for yet (no seam cache). A
// stream whose seam cache exists but whose volume is elsewhere belongs to
// another node's data dir and is left alone (logged once). Adopted streams
// are archived with the defaults' window and trim_after.
func (s *Server) discover(ctx context.Context) {
	if s.disc == nil || !s.disc.due(time.Now()) {
		return
	}
	for k, err := range archive.ArchivedStreams(ctx, s.mq) {
		if err != nil {
			s.log.Warn("serve: discovery of archived streams", "err", err)
			break
		}
		if _, known := s.lookup(k); known {
			continue
		}
		vol, err := s.archiveVolume(ctx, k)
		if err != nil {
			s.log.Warn("serve: discovery", "queue", k.Queue(), "stream", k.Stream(), "err", err)
			continue
		}
		if vol == nil {
			_, folded, err := archive.GetArchived(ctx, s.mq, k)
			if err != nil || folded {
				s.leftAlone(k, "serve: archived stream left alone: its archive volume is not in this data dir (another node folds it)", err)
				continue
			}
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
		s.log.Info("serve: archived stream discovered in Redis", "queue", st.ref.Queue(), "stream", st.ref.Stream(),
			"keep", st.window.Keep, "max_age", st.window.MaxAge)
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
		s.log.Info(msg, "queue", k.Queue(), "stream", k.Stream(), "err", err)
	}
}

// archiveVolume returns the archive volume of ref in the data dir, nil if
// there is none.
func (s *Server) archiveVolume(ctx context.Context, ref names.StreamRef) (*graft.Volume, error) {
	v, err := s.store.Volume(ctx, ref.Volume())
	if errors.Is(err, graft.ErrVolumeNotFound) {
		return nil, nil
	}
	return v, err
}
