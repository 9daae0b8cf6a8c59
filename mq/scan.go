package mq

import (
	"context"
	"fmt"
	"iter"

	"github.com/redis/rueidis"
)

// scanCount is the COUNT hint of each SCAN and SSCAN of ScanKeys and
// SetMembers: the work one round trip asks of the server.
const scanCount = 1000

// ScanKeys yields the keys that match pattern (SCAN MATCH) and are of type
// typ ("set", "hash", …) on every master (every master of a Cluster;
// replicas are skipped), one SCAN of scanCount at a time, so a large
// keyspace never blocks a server and the caller can stop at any time. A key
// may be yielded more than once (SCAN's promise); one created or deleted
// while the scan runs may or may not be. A failed round trip yields its
// error and ends the iteration.
func (c *Client) ScanKeys(ctx context.Context, pattern, typ string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for addr, n := range c.rdb.Nodes() {
			master, err := isMaster(n.Do(ctx, n.B().Role().Build()))
			if err != nil {
				yield("", fmt.Errorf("ROLE on %s: %w", addr, err))
				return
			}
			if !master {
				continue // its master is scanned
			}
			for key, err := range scanKeys(ctx, n, pattern, typ) {
				if err != nil {
					yield("", fmt.Errorf("scan %s: %w", addr, err))
					return
				}
				if !yield(key, nil) {
					return
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

// SetMembers yields the members of the set key, one SSCAN of scanCount at a
// time. A member may come more than once (SSCAN's promise); a failed round
// trip yields its error and ends.
func (c *Client) SetMembers(ctx context.Context, key string) iter.Seq2[string, error] {
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

// HGetAll returns the fields and values of the hash key (HGETALL): empty
// when the key is missing. It is a read, sent again after a network error.
func (c *Client) HGetAll(ctx context.Context, key string) (map[string]string, error) {
	return c.rdb.Do(ctx, c.rdb.B().Hgetall().Key(key).Build()).AsStrMap()
}

// SIsMember reports whether member is in the set key (SISMEMBER). It is a
// read, sent again after a network error.
func (c *Client) SIsMember(ctx context.Context, key, member string) (bool, error) {
	return c.rdb.Do(ctx, c.rdb.B().Sismember().Key(key).Member(member).Build()).AsBool()
}

// SAdd adds member to the set key (SADD).
func (c *Client) SAdd(ctx context.Context, key, member string) error {
	return c.rdb.Do(ctx, c.rdb.B().Sadd().Key(key).Member(member).Build()).Error()
}
