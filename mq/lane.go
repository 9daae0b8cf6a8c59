package mq

import (
	"context"
	"fmt"
	"iter"
	"strconv"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
	"github.com/redis/rueidis"
)

// Lane is a capped stream that announces events (a commit's LSN, a new
// version) to followers that block on it instead of polling.
type Lane struct {
	// Key is the lane's Redis key.
	Key string
	// Cap is the approximate length the lane is trimmed to on each publish
	// (XADD … MAXLEN ~ Cap); 0 means Options.LaneCap.
	Cap int64
}

// QueueLane returns lane l of queue q: emq:{q}:lane:l.
func QueueLane(q names.Queue, l string) (Lane, error) {
	if err := checkQueue(q); err != nil {
		return Lane{}, err
	}
	if err := names.Check(names.KindLane, l); err != nil {
		return Lane{}, err
	}
	return Lane{Key: LaneKey(q.String(), l)}, nil
}

// VolumeLane returns the LSN lane of volume v: emq:{vol.v}:lane:lsn.
func VolumeLane(v names.Volume) (Lane, error) {
	if v.IsZero() {
		return Lane{}, fmt.Errorf("no volume given: %w", names.ErrInvalid)
	}
	return Lane{Key: LaneKey("vol."+v.String(), "lsn")}, nil
}

// LaneEntry is one entry of a lane. Lane ids are the server's (XADD *).
type LaneEntry struct {
	ID     brand.ID // XID as a branded id
	XID    string   // the entry's Redis id
	Fields []Field  // its fields, without the leading prev link
}

// GapError is yielded by Follow when entries the follower had not read yet
// were trimmed by the lane's cap (or deleted). The follower goes on with
// the oldest entry kept; whoever relies on every entry must resynchronise
// from the source of truth. It wraps ErrLaneGap.
type GapError struct {
	Lane string // the lane's key
	// After is the last id the follower had read; Prev the id of the entry
	// before the one it reads next. Entries in (After, Prev] are gone.
	After, Prev string
}

func (e *GapError) Error() string {
	return fmt.Sprintf("lane %s: entries after %s up to %s were trimmed before they were read: %v",
		e.Lane, e.After, e.Prev, ErrLaneGap)
}

func (e *GapError) Unwrap() error { return ErrLaneGap }

func (c *Client) laneCap(l Lane) int64 {
	if l.Cap > 0 {
		return l.Cap
	}
	return c.opts.LaneCap
}

// laneLink is the name of the field each published entry starts with: the
// id of the lane's entry before it.
const laneLink = "prev"

// Publish appends an entry to the lane (XADD … MAXLEN ~ cap *) and returns
// its id. The entry's first field is "prev", the id of the entry before it,
// which is how followers detect gaps; fields may not use that name.
func (c *Client) Publish(ctx context.Context, l Lane, fields ...Field) (brand.ID, error) {
	if err := c.opts.Limits.Check(fields); err != nil {
		return 0, fmt.Errorf("publish on lane %s: %w", l.Key, err)
	}
	args := make([]string, 0, 1+2*len(fields))
	args = append(args, strconv.FormatInt(c.laneCap(l), 10))
	for _, f := range fields {
		if f.Name == laneLink {
			return 0, fmt.Errorf("publish on lane %s: %w", l.Key, &RecordError{Field: f.Name, Err: ErrReservedField})
		}
		args = append(args, f.Name, f.Value)
	}
	xid, err := c.lua.publish.Exec(ctx, c.rdb, []string{l.Key}, args).ToString()
	if err != nil {
		return 0, fmt.Errorf("publish on lane %s: %w", l.Key, err)
	}
	return brandedFloor(xid)
}

// LaneTop returns the id of the lane's newest entry ever (its last
// generated id), 0 for a lane never published on.
func (c *Client) LaneTop(ctx context.Context, l Lane) (brand.ID, error) {
	in, err := c.info(ctx, l.Key)
	return in.Top, err
}

// Subscribe follows the lane from its current top: only entries published
// from now on.
func (c *Client) Subscribe(ctx context.Context, l Lane) iter.Seq2[LaneEntry, error] {
	return func(yield func(LaneEntry, error) bool) {
		in, err := c.info(ctx, l.Key)
		if err != nil {
			yield(LaneEntry{}, err)
			return
		}
		c.follow(ctx, l, in.TopXID, yield)
	}
}

// Follow yields the lane's entries after the id after (0: from the oldest
// kept entry) and then waits for new ones with XREAD BLOCK: an idle
// follower costs one blocked connection and no polling. A follower that was
// away catches up from after; if the cap trimmed entries it had not read,
// it gets a *GapError (wrapping ErrLaneGap) and then goes on with the
// oldest kept entry. An entry whose id has no branded id yields an
// *EntryError. The iteration ends when ctx does (yielding ctx's error) or
// when the loop stops.
func (c *Client) Follow(ctx context.Context, l Lane, after brand.ID) iter.Seq2[LaneEntry, error] {
	return func(yield func(LaneEntry, error) bool) {
		cursor := ""
		if after != 0 {
			cursor = after.RedisID()
		}
		c.follow(ctx, l, cursor, yield)
	}
}

func (c *Client) follow(ctx context.Context, l Lane, cursor string, yield func(LaneEntry, error) bool) {
	page := c.opts.PageSize
	// Catch up with XRANGE pages, then block with XREAD for what comes.
	catchingUp := true
	for {
		if err := ctx.Err(); err != nil {
			yield(LaneEntry{}, err)
			return
		}
		var entries []rawEntry
		var err error
		if catchingUp {
			entries, err = c.laneRange(ctx, l.Key, cursor, page)
			catchingUp = len(entries) == page
		} else {
			entries, err = c.laneWait(ctx, l.Key, cursor, page)
		}
		if err != nil {
			yield(LaneEntry{}, err)
			return
		}
		for _, e := range entries {
			kv := e.kv
			if len(kv) >= 2 && kv[0] == laneLink {
				if cursor != "" && cmpXID(kv[1], cursor) > 0 {
					if !yield(LaneEntry{}, &GapError{Lane: l.Key, After: cursor, Prev: kv[1]}) {
						return
					}
				}
				kv = kv[2:]
			}
			cursor = e.xid
			rec, err := decodeEntry(l.Key, e.xid, kv)
			var id brand.ID
			if err == nil {
				if id, err = brand.FromXID(rec.ID); err != nil {
					err = &EntryError{Key: l.Key, XID: e.xid, Err: err}
				}
			}
			if !yield(LaneEntry{ID: id, XID: e.xid, Fields: rec.Fields}, err) {
				return
			}
		}
	}
}

// laneRange reads up to count entries after cursor ("" from the start).
func (c *Client) laneRange(ctx context.Context, key, cursor string, count int) ([]rawEntry, error) {
	start := "-"
	if cursor != "" {
		start = "(" + cursor
	}
	msgs, err := c.rdb.Do(ctx, c.rdb.B().Xrange().Key(key).Start(start).End("+").Count(int64(count)).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("read lane %s: %w", key, err)
	}
	return rawEntries(msgs)
}

// laneWait blocks until the lane has entries above cursor and returns up to
// count of them, or nothing when Options.LaneBlock passes (the caller
// loops), or ctx's error.
func (c *Client) laneWait(ctx context.Context, key, cursor string, count int) ([]rawEntry, error) {
	if cursor == "" {
		cursor = "0-0"
	}
	cmd := c.rdb.B().Xread().Count(int64(count)).Block(c.opts.LaneBlock.Milliseconds()).Streams().Key(key).Id(cursor).Build()
	res := c.rdb.Do(ctx, cmd)
	if err := res.Error(); err != nil {
		if rueidis.IsRedisNil(err) {
			return nil, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("wait on lane %s: %w", key, err)
	}
	// RESP3 replies {key: entries}; RESP2 [[key, entries]].
	var msgs []rueidis.RedisMessage
	if m, err := res.AsMap(); err == nil {
		v := m[key]
		msgs, err = v.ToArray()
		if err != nil {
			return nil, fmt.Errorf("wait on lane %s: %w", key, err)
		}
	} else {
		arr, err := res.ToArray()
		if err != nil || len(arr) != 1 {
			return nil, fmt.Errorf("wait on lane %s: unexpected reply (%v)", key, err)
		}
		pair, err := arr[0].ToArray()
		if err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("wait on lane %s: unexpected reply (%v)", key, err)
		}
		if msgs, err = pair[1].ToArray(); err != nil {
			return nil, fmt.Errorf("wait on lane %s: %w", key, err)
		}
	}
	return rawEntries(msgs)
}
