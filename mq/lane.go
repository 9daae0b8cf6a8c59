package mq

import (
	"context"
	"errors"
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
func QueueLane(q, l string) (Lane, error) {
	if err := checkQ(q); err != nil {
		return Lane{}, err
	}
	if err := names.Check(names.Lane, l); err != nil {
		return Lane{}, err
	}
	return Lane{Key: LaneKey(q, l)}, nil
}

// VolumeLane returns the LSN lane of volume v: emq:{vol.v}:lane:lsn.
func VolumeLane(v string) (Lane, error) {
	if err := names.Check(names.Volume, v); err != nil {
		return Lane{}, err
	}
	return Lane{Key: LaneKey("vol."+v, "lsn")}, nil
}

// LaneEntry is one entry of a lane. Lane ids are the server's (XADD *).
type LaneEntry struct {
	ID     brand.ID
	XID    string
	Fields []Field
}

// GapError is yielded by Follow when entries the follower had not read yet
// were trimmed by the lane's cap. The follower resumes with the oldest kept
// entry; whoever relies on every entry must resynchronise from the source
// of truth. It wraps ErrLaneGap.
type GapError struct {
	Lane string
	// After is the last id the follower had seen; MaxDeleted the highest
	// id trimmed since (entries in (After, MaxDeleted] were lost to it).
	After, MaxDeleted string
}

func (e *GapError) Error() string {
	return fmt.Sprintf("lane %s: entries after %s up to %s were trimmed before they were read: %v",
		e.Lane, e.After, e.MaxDeleted, ErrLaneGap)
}

func (e *GapError) Unwrap() error { return ErrLaneGap }

func (c *Client) laneCap(l Lane) int64 {
	if l.Cap > 0 {
		return l.Cap
	}
	return c.opts.LaneCap
}

// Publish appends an entry to the lane and trims it to about its cap.
func (c *Client) Publish(ctx context.Context, l Lane, fields ...Field) (brand.ID, error) {
	if err := c.opts.Limits.Check(fields); err != nil {
		return 0, fmt.Errorf("publish on lane %s: %w", l.Key, err)
	}
	args := make([]string, 0, 4+2*len(fields))
	args = append(args, "MAXLEN", "~", strconv.FormatInt(c.laneCap(l), 10), "*")
	for _, f := range fields {
		args = append(args, f.Name, f.Value)
	}
	xid, err := c.rdb.Do(ctx, c.rdb.B().Arbitrary("XADD").Keys(l.Key).Args(args...).Build()).ToString()
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
		top, err := c.LaneTop(ctx, l)
		if err != nil {
			yield(LaneEntry{}, err)
			return
		}
		c.follow(ctx, l, top.RedisID(), yield)
	}
}

// Follow yields the lane's entries after the id after (0: from the oldest
// kept entry) and then waits for new ones with XREAD BLOCK: an idle
// follower costs one blocked connection and no polling. A follower that was
// away catches up from after; if the cap trimmed entries it had not read,
// it gets a *GapError (wrapping ErrLaneGap) and then continues with the
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
	for {
		if err := ctx.Err(); err != nil {
			yield(LaneEntry{}, err)
			return
		}
		start := "-"
		if cursor != "" {
			start = "(" + cursor
		}
		md, entries, err := c.laneRead(ctx, l.Key, start, page)
		if err != nil {
			yield(LaneEntry{}, err)
			return
		}
		if cursor != "" && cmpXID(md, cursor) > 0 {
			if !yield(LaneEntry{}, &GapError{Lane: l.Key, After: cursor, MaxDeleted: md}) {
				return
			}
			cursor = md
		}
		for _, e := range entries {
			cursor = e.xid
			rec, err := decodeEntry(l.Key, e.xid, e.kv)
			if !yield(LaneEntry{ID: rec.ID, XID: e.xid, Fields: rec.Fields}, err) {
				return
			}
		}
		if len(entries) == page {
			continue
		}
		// Caught up: block until an entry above the cursor exists. The
		// entries are read again by laneRead, with the gap check.
		if err := c.waitLane(ctx, l.Key, cursor); err != nil {
			yield(LaneEntry{}, err)
			return
		}
	}
}

// laneRead runs scriptLaneRead.
func (c *Client) laneRead(ctx context.Context, key, start string, count int) (string, []rawEntry, error) {
	reply, err := c.lua.laneRead.Exec(ctx, c.rdb, []string{key}, []string{start, strconv.Itoa(count)}).ToArray()
	if err != nil || len(reply) != 2 {
		return "", nil, fmt.Errorf("read lane %s: %w", key, errors.Join(err, errShape(len(reply), 2)))
	}
	md, err := reply[0].ToString()
	if err != nil {
		return "", nil, fmt.Errorf("read lane %s: %w", key, err)
	}
	msgs, err := reply[1].ToArray()
	if err != nil {
		return "", nil, fmt.Errorf("read lane %s: %w", key, err)
	}
	entries, err := rawEntries(msgs)
	if err != nil {
		return "", nil, fmt.Errorf("read lane %s: %w", key, err)
	}
	return md, entries, nil
}

// waitLane blocks until the lane has an entry above cursor, the block time
// ends (the caller loops), or ctx ends.
func (c *Client) waitLane(ctx context.Context, key, cursor string) error {
	if cursor == "" {
		cursor = "0-0"
	}
	cmd := c.rdb.B().Xread().Count(1).Block(c.opts.LaneBlock.Milliseconds()).Streams().Key(key).Id(cursor).Build()
	err := c.rdb.Do(ctx, cmd).Error()
	if err == nil || rueidis.IsRedisNil(err) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("wait on lane %s: %w", key, err)
}

// errShape reports a reply of the wrong length, or nil.
func errShape(got, want int) error {
	if got == want {
		return nil
	}
	return fmt.Errorf("reply has %d elements, want %d", got, want)
}
