package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// DiscoverEvery is the least time between two discoveries of archived
// streams: each one SCANs the keyspace of every master.
const DiscoverEvery = time.Minute

// discoverer finds the archived streams registered in Redis: the members of
// every set emq:{Q}:archived (mq.ArchivedSetKey). The mq client has no
// listing of queues, so it keeps a connection of its own for SCAN.
type discoverer struct {
	rdb  rueidis.Client
	mu   sync.Mutex
	last time.Time          // the last discovery
	seen map[[2]string]bool // streams found and left alone (logged once)
}

// newDiscoverer connects to the Redis of url (an mq URL).
func newDiscoverer(url string) (*discoverer, error) {
	ep, err := mq.ParseURL(url)
	if err != nil {
		return nil, err
	}
	tc, err := ep.TLSConfig()
	if err != nil {
		return nil, err
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      ep.Addrs,
		Username:         ep.Username,
		Password:         ep.Password,
		SelectDB:         ep.DB,
		ClientName:       ep.ClientName,
		TLSConfig:        tc,
		Dialer:           net.Dialer{Timeout: ep.DialTimeout},
		ConnWriteTimeout: ep.Timeout,
		DisableCache:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", ep, err)
	}
	return &discoverer{rdb: rdb, seen: map[[2]string]bool{}}, nil
}

func (d *discoverer) close() { d.rdb.Close() }

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

// archived returns the archived streams registered in Redis, (queue,
// stream) pairs with valid names, from every node.
func (d *discoverer) archived(ctx context.Context) ([][2]string, error) {
	var out [][2]string
	for addr, n := range d.rdb.Nodes() {
		var cursor uint64
		for {
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match("emq:{*}:archived").Count(1000).Type("set").Build()).AsScanEntry()
			if err != nil {
				return out, fmt.Errorf("scan %s for archived streams: %w", addr, err)
			}
			for _, key := range e.Elements {
				q, ok := strings.CutPrefix(key, "emq:{")
				if q, ok = strings.CutSuffix(q, "}:archived"); !ok || mq.ArchivedSetKey(q) != key || names.Check(names.Queue, q) != nil {
					continue
				}
				members, err := d.rdb.Do(ctx, d.rdb.B().Smembers().Key(key).Build()).AsStrSlice()
				if err != nil {
					return out, fmt.Errorf("read %s: %w", key, err)
				}
				for _, s := range members {
					if names.Check(names.Stream, s) == nil {
						out = append(out, [2]string{q, s})
					}
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out, nil
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
	found, err := s.disc.archived(ctx)
	if err != nil {
		s.log.Warn("serve: discovery of archived streams", "err", err)
	}
	for _, k := range found {
		if _, known := s.lookup(k[0], k[1]); known {
			continue
		}
		vol, err := s.archiveVolume(ctx, k[0], k[1])
		if err != nil {
			s.log.Warn("serve: discovery", "queue", k[0], "stream", k[1], "err", err)
			continue
		}
		if vol == nil {
			_, folded, err := s.mq.GetArchived(ctx, k[0], k[1])
			if err != nil || folded {
				s.disc.mu.Lock()
				first := !s.disc.seen[k]
				s.disc.seen[k] = true
				s.disc.mu.Unlock()
				if first {
					s.log.Info("serve: archived stream left alone: its archive volume is not in this data dir (another node folds it)",
						"queue", k[0], "stream", k[1], "err", err)
				}
				continue
			}
		}
		st, err := s.cfg.resolve(k[0], k[1], StreamConfig{})
		if err != nil {
			continue
		}
		st.archived = true // registered as archived: retention would refuse it
		s.log.Info("serve: archived stream discovered in Redis", "queue", st.q, "stream", st.s,
			"keep", st.window.Keep, "max_age", st.window.MaxAge)
		if err := s.declare(st); err != nil {
			s.log.Warn("serve: discovery", "err", err)
		}
	}
}
