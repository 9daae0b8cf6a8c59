package echostore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// The beat's cost is proportional to the archived streams with something
// new, not to all of them (docs/SERVE.md, "The beat"). An archived stream
// is cycled by a beat when it is due:
//
//   - the node has no memo of a successful cycle of it under the current
//     membership (new to the node, its last cycle failed, its key does not
//     exist yet, or the group's live nodes changed since: a takeover
//     cycles every stream of the new share once, idle or not);
//   - its window or its archive retention counts by age (max_age,
//     retain_age): time alone moves its cut, so it is cycled every beat;
//   - its last cycle left consumer groups holding the trim back (capped or
//     stalled): acks move its cut, and the stall alarms count by time, so
//     it is cycled every beat until no group holds it back;
//   - its last cycle left more entries live than its window keeps (a trim
//     that waits for a push with trim_after remote, one held back): it is
//     cycled every beat until the window holds;
//   - the node cycles it without owning it (commits the remote lacks,
//     Node.Cycles);
//   - an append through echostore named it in its slot's change feed
//     (mq.DirtySetKey), which the beat reads once per slot;
//   - or the sweep read its top (XINFO STREAM's length and
//     last-generated-id, many streams of a slot in one script) and found
//     it moved since the memo: entries appended by others (plain XADD, key
//     streams) or removed by others (app trims). The sweep reads every
//     other stream of the share at least once per Config.Sweep, or per
//     one second for each SweepProbes of them if that is longer
//     (BeatOptions.Sweep, sweepEvery).
//
// Any other stream is left alone by the beat: no lease, no seam, no script
// and no XINFO. Its archive, its trim and its metrics are those of its last
// cycle, which nothing since has made stale.

// pickDue is the beat's pick when BeatOptions.Pick is nil: of archived,
// the streams the node Cycles that are due. It returns the pick and the
// top read of each due stream before its cycle.
func (n *Node) pickDue(ctx context.Context, archived []DeclaredStream, opts BeatOptions) (func(names.StreamRef) bool, map[names.StreamRef]top) {
	var cands []candidate
	for _, d := range archived {
		if n.Cycles(ctx, d.Ref) {
			cands = append(cands, candidate{ref: d.Ref, key: mq.StreamKey(d.Ref), feed: mq.DirtyOf(d.Ref),
				aged: d.Policy.Retain.MaxAge > 0 || d.Policy.Window.MaxAge > 0, keep: int64(d.Policy.Window.Keep), owned: n.Owns(d.Ref)})
		}
	}
	due := n.dueStreams(ctx, cands, opts, time.Now())
	return func(ref names.StreamRef) bool { _, ok := due[ref]; return ok }, due
}

// probeChunk bounds the streams whose top one probe script reads.
const probeChunk = 200

// SweepProbes bounds the sweep's reads of idle streams' tops per second
// (each an XINFO STREAM inside a probe script): with more idle archived
// streams in a node's share than Config.Sweep × SweepProbes, the sweep
// takes longer than Config.Sweep, one second per SweepProbes streams
// (10,000 streams: 250 s).
const SweepProbes = 40

// sweepEvery is the time within which the sweep reads the top of each of
// n idle streams: sweep, or longer for more than sweep × SweepProbes.
func sweepEvery(sweep time.Duration, n int) time.Duration {
	return max(sweep, time.Duration(n)*time.Second/SweepProbes, time.Nanosecond)
}

// candidate is a declared archived stream the beat cycles here (cycles),
// with what decides whether it is due.
type candidate struct {
	ref   names.StreamRef
	key   string // mq.StreamKey
	feed  string // mq.DirtyOf: its slot's change feed, and its probe group
	aged  bool   // its window or retention counts by age
	keep  int64  // its window's Keep
	owned bool
}

// dueStreams returns the streams of cands that this beat cycles, each with
// the top read before its cycle, having taken them out of the change feeds
// first (so that an append after that names them again). An error of
// Redis makes every candidate due: the beat then cycles them all, as it
// did before it skipped idle streams.
func (n *Node) dueStreams(ctx context.Context, cands []candidate, opts BeatOptions, now time.Time) map[names.StreamRef]top {
	view := n.Group().Key()
	b := &n.idle
	due := make(map[names.StreamRef]bool, len(cands))
	all := func() map[names.StreamRef]top {
		out := make(map[names.StreamRef]top, len(cands))
		for _, c := range cands {
			out[c.ref] = top{}
		}
		return out
	}
	// The change feeds, one read per slot.
	feeds := map[string][]candidate{}
	for _, c := range cands {
		feeds[c.feed] = append(feeds[c.feed], c)
	}
	dirty := map[string]bool{}
	for feed := range feeds {
		keys, err := n.mq.FeedKeys(ctx, feed)
		if err != nil {
			n.log.Warn("echostore: beat: read the change feed; cycling every stream", "feed", feed, "err", err)
			return all()
		}
		for _, k := range keys {
			dirty[k] = true
		}
	}
	// The sweep: the streams probed longest ago, about len × beat/sweep a
	// beat, and every one not probed for a sweep.
	var idle []candidate
	b.mu.Lock()
	// A stream not cycled here this beat (another node's share now) loses
	// its memo: if it comes back, its first beat here cycles it.
	here := make(map[names.StreamRef]bool, len(cands))
	for _, c := range cands {
		here[c.ref] = true
	}
	for ref := range b.memos {
		if !here[ref] {
			delete(b.memos, ref)
		}
	}
	for _, c := range cands {
		m, ok := b.memos[c.ref]
		switch {
		case !ok, m.view != view, m.held, c.aged, !c.owned, dirty[c.key], m.top.length > c.keep:
			due[c.ref] = true
		default:
			idle = append(idle, c)
		}
	}
	slices.SortStableFunc(idle, func(x, y candidate) int { return b.memos[x.ref].probed.Compare(b.memos[y.ref].probed) })
	every := sweepEvery(cmp.Or(opts.Sweep, DefaultSweep), len(idle))
	share := int((int64(len(idle))*int64(cmp.Or(opts.Every, DefaultBeat)) + int64(every) - 1) / int64(every))
	var sweep []candidate
	for i, c := range idle {
		if i < share || now.Sub(b.memos[c.ref].probed) >= every {
			sweep = append(sweep, c)
		}
	}
	b.mu.Unlock()
	// Out of the feeds before the cycles.
	for feed, cs := range feeds {
		var taken []string
		for _, c := range cs {
			if due[c.ref] && dirty[c.key] {
				taken = append(taken, c.key)
			}
		}
		if len(taken) > 0 {
			if err := n.mq.TakeFromFeed(ctx, feed, taken...); err != nil {
				n.log.Warn("echostore: beat: take streams out of the change feed; cycling every stream", "feed", feed, "err", err)
				return all()
			}
		}
	}
	// One probe of the due streams (their top before the cycle) and of the
	// sweep.
	var probe []candidate
	for _, c := range cands {
		if due[c.ref] {
			probe = append(probe, c)
		}
	}
	probe = append(probe, sweep...)
	tops, err := n.probe(ctx, probe)
	if err != nil {
		n.log.Warn("echostore: beat: read the streams' tops; cycling every stream", "err", err)
		return all()
	}
	out := make(map[names.StreamRef]top, len(due))
	b.mu.Lock()
	defer b.mu.Unlock()
	swept := 0
	for _, c := range sweep {
		m := b.memos[c.ref]
		if t := tops[c.ref]; t != m.top {
			due[c.ref] = true
			swept++
			continue
		}
		m.probed = now
		b.rememberLocked(c.ref, m)
	}
	if opts.OnPicked != nil {
		opts.OnPicked(BeatPicked{Due: len(due), Swept: swept, Probed: len(sweep), Idle: len(cands) - len(due)})
	}
	for ref := range due {
		out[ref] = tops[ref]
	}
	return out
}

// probe reads the top of each stream of cands, one script per slot and
// probeChunk streams.
func (n *Node) probe(ctx context.Context, cands []candidate) (map[names.StreamRef]top, error) {
	groups := map[string][]candidate{}
	var order []string
	for _, c := range cands {
		if _, ok := groups[c.feed]; !ok {
			order = append(order, c.feed)
		}
		groups[c.feed] = append(groups[c.feed], c)
	}
	out := make(map[names.StreamRef]top, len(cands))
	for _, feed := range order {
		g := groups[feed]
		for len(g) > 0 {
			k := min(len(g), probeChunk)
			keys := make([]string, k)
			for i, c := range g[:k] {
				keys[i] = c.key
			}
			reply, err := n.mq.Run(ctx, scriptProbe, keys, nil).Strings()
			if err != nil {
				return nil, fmt.Errorf("probe the tops of %d streams: %w", k, err)
			}
			if len(reply) != 2*k {
				return nil, fmt.Errorf("probe the tops of %d streams: %d values in the reply", k, len(reply))
			}
			for i, c := range g[:k] {
				t := top{read: true, last: reply[2*i+1]}
				if l, err := strconv.ParseInt(reply[2*i], 10, 64); err == nil && l >= 0 {
					t.exists, t.length = true, l
				}
				out[c.ref] = t
			}
			g = g[k:]
		}
	}
	return out, nil
}

// scriptProbe replies, for each stream KEYS[i], its length and
// last-generated-id (XINFO STREAM), or "-1" and "" when it does not exist
// (or is not a stream), as a flat list of strings.
var scriptProbe = mq.NewScript(`
local out = {}
for _, k in ipairs(KEYS) do
  local info = redis.pcall('XINFO', 'STREAM', k)
  local len, last = '-1', ''
  if type(info) == 'table' and not info.err then
    for j = 1, #info, 2 do
      if info[j] == 'length' then len = tostring(info[j + 1])
      elseif info[j] == 'last-generated-id' then last = info[j + 1] end
    end
  end
  out[#out + 1] = len
  out[#out + 1] = last
end
return out
`)
