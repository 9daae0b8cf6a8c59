package mq

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/redis/rueidis"

	"github.com/echostore/echostore/names"
)

// StreamRef names a stream: its queue and its name.
type StreamRef struct{ Queue, Stream string }

// scanCount is the COUNT hint of each SCAN and SSCAN of ArchivedStreams:
// the work one round trip asks of the server.
const scanCount = 1000

// ArchivedStreams yields every stream registered as archived: the members
// of every set emq:{Q}:archived (ArchivedSetKey), found with SCAN on each
// master (every master of a Cluster; replicas are skipped), each set read
// with SSCAN. No round trip asks more than scanCount keys or members of the
// server, so a large keyspace or set never blocks it, and the caller can
// stop at any time. A key that looks like such a set but does not name a
// valid queue (emq:{a:b}:archived), and a member that is not a valid stream
// name, are skipped, not errors. Each stream is yielded once; one
// registered or removed while the scan runs may or may not be yielded (SCAN
// guarantees only the keys that exist throughout). A failed round trip
// yields its error and ends the iteration.
func (c *Client) ArchivedStreams(ctx context.Context) iter.Seq2[StreamRef, error] {
	return func(yield func(StreamRef, error) bool) {
		seen := map[StreamRef]bool{}
		for addr, n := range c.rdb.Nodes() {
			master, err := isMaster(n.Do(ctx, n.B().Role().Build()))
			if err != nil {
				yield(StreamRef{}, fmt.Errorf("ROLE on %s: %w", addr, err))
				return
			}
			if !master {
				continue // its master is scanned
			}
			for key, err := range scanKeys(ctx, n, ArchivedSetKey("*"), "set") {
				if err != nil {
					yield(StreamRef{}, fmt.Errorf("scan %s for archived streams: %w", addr, err))
					return
				}
				q, ok := strings.CutPrefix(key, "emq:{")
				if q, ok = strings.CutSuffix(q, "}:archived"); !ok || checkQ(q) != nil {
					continue
				}
				for s, err := range c.setMembers(ctx, key) {
					if err != nil {
						yield(StreamRef{}, fmt.Errorf("read %s: %w", key, err))
						return
					}
					ref := StreamRef{q, s}
					if names.Check(names.KindStream, s) != nil || seen[ref] {
						continue
					}
					seen[ref] = true
					if !yield(ref, nil) {
						return
					}
				}
			}
		}
	}
}

// isMaster reports whether a ROLE reply is a master's.
func isMaster(r rueidis.RedisResult) (bool, error) {
	role, err := r.ToArray()
	if err != nil {
		return false, err
	}
	if len(role) == 0 {
		return false, fmt.Errorf("empty ROLE reply")
	}
	name, err := role[0].ToString()
	return name == "master", err
}

// scanKeys yields the keys of node n matching pattern and of type typ, one
// SCAN of scanCount at a time.
func scanKeys(ctx context.Context, n rueidis.Client, pattern, typ string) iter.Seq2[string, error] {
	return scanning(func(cursor uint64) (rueidis.ScanEntry, error) {
		return n.Do(ctx, n.B().Scan().Cursor(cursor).Match(pattern).Count(scanCount).Type(typ).Build()).AsScanEntry()
	})
}

// setMembers yields the members of the set key, one SSCAN of scanCount at a
// time.
func (c *Client) setMembers(ctx context.Context, key string) iter.Seq2[string, error] {
	return scanning(func(cursor uint64) (rueidis.ScanEntry, error) {
		return c.rdb.Do(ctx, c.rdb.B().Sscan().Key(key).Cursor(cursor).Count(scanCount).Build()).AsScanEntry()
	})
}

// scanning yields the elements of a SCAN-family iteration, calling step
// with the cursor for each round trip until the cursor comes back 0. An
// element may come more than once (SCAN's promise); a failed step yields
// its error and ends.
func scanning(step func(cursor uint64) (rueidis.ScanEntry, error)) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for cursor := uint64(0); ; {
			e, err := step(cursor)
			if err != nil {
				yield("", err)
				return
			}
			for _, el := range e.Elements {
				if !yield(el, nil) {
					return
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				return
			}
		}
	}
}
