package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// DiscoverEvery is the least time between two discoveries of archived
// streams: each one SCANs the keyspace of every master.
const DiscoverEvery = time.Minute

// discoverer paces the discovery of the archived streams registered in
// Redis (archive.ArchivedStreams) and remembers the streams it left alone.
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

// discover adopts the archived streams registered in Redis that this server
// neither declared nor met through the API and that are its share (owns:
// with other live nodes in its group, the streams rendezvous hashing gives
// it; alone, all of them): those whose archive volume is in this data dir,
// those nothing was folded for yet (no seam cache), and those whose volume
// is in the remote (a cycle pulls it first: the takeover of a dead or
// departed node's stream). A stream folded whose volume is in neither
// (folded with trim_after local on another data dir, never pushed) is left
// alone (logged once): a cycle here would refuse it, its volume behind the
// seam. Adopted streams are archived with the defaults' window and
// trim_after.
func (s *Server) discover(ctx context.Context) {
	if s.disc == nil || !s.disc.due(time.Now()) {
		return
	}
	for k, err := range archive.ArchivedStreams(ctx, s.mq) {
		if err != nil {
			s.log.Warn("serve: discovery of archived streams", "err", err)
			break
		}
		if _, known := s.lookup(k); known || !s.node.Owns(k) {
			continue
		}
		vol, err := s.archiveVolume(ctx, k)
		if err != nil {
			s.log.Warn("serve: discovery", k.LogAttr(), "err", err)
			continue
		}
		if vol == nil {
			_, folded, err := archive.GetArchived(ctx, s.mq, k)
			if err == nil && folded {
				var head uint64
				if head, err = s.remoteHead(ctx, k); err == nil && head == 0 {
					s.leftAlone(k, "serve: archived stream left alone: its archive volume is neither in this data dir nor in the remote (another node folds it, or folded it with trim_after local and never pushed it)", nil)
					continue
				}
			}
			if err != nil {
				s.leftAlone(k, "serve: archived stream left alone: its seam cache or remote log cannot be read", err)
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
		s.log.Info("serve: archived stream discovered in Redis", k.LogAttr(),
			"keep", st.window.Keep, "max_age", st.window.MaxAge, "local_volume", vol != nil)
		if err := s.declare(st); err != nil {
			s.unadmit(k)
			s.log.Warn("serve: discovery", "err", err)
		}
	}
}

// remoteHead returns the head of ref's archive volume in the remote (0:
// none, or no remote).
func (s *Server) remoteHead(ctx context.Context, ref names.StreamRef) (uint64, error) {
	if s.rs == nil {
		return 0, nil
	}
	l, err := remote.NewLog(s.rs, ref.Volume())
	if err != nil {
		return 0, err
	}
	head, err := l.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("remote head of %s: %w", ref.Volume(), err)
	}
	return head, nil
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

// archiveVolume returns the archive volume of ref in the data dir, nil if
// there is none.
func (s *Server) archiveVolume(ctx context.Context, ref names.StreamRef) (*graft.Volume, error) {
	v, err := s.store.Volume(ctx, ref.Volume())
	if errors.Is(err, graft.ErrVolumeNotFound) {
		return nil, nil
	}
	return v, err
}
