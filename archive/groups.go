package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Stalled consumer groups. A cycle's trim never passes an entry a consumer
// group has pending or not yet delivered (cappedtrim, mq/scripts.go), so a
// group that stops reading stops the bounding of the stream. Before each
// trim the cycle asks Redis which groups hold the trim back below the cut
// it asks for (the window's cut, or W's successor when the fold is behind
// it), and how far: the records each holds beyond the cut, and the age of
// the oldest. A group past the stream's GroupLimits is stalled: the cycle
// reports it (CycleResult.Stalled), logs a warning when it becomes stalled,
// records the verdict in the stream's seam cache (field "stalled", read by
// StalledGroups: `archive status`), and, under StalledArchive, trims past
// its entries anyway, never past W's successor: they are archived, and a
// merge-read serves them.

// GroupLimits bound what a consumer group may hold back (mq.GroupLimits):
// Window.Groups.
type GroupLimits = mq.GroupLimits

// StalledPolicy is what a cycle does about a stalled group
// (mq.StalledPolicy).
type StalledPolicy = mq.StalledPolicy

// The stalled-group policies.
const (
	// StalledHold keeps the trim capped (the default): the stream
	// over-retains and the alarm stays up until the group reads on.
	StalledHold = mq.StalledHold
	// StalledArchive trims past a stalled group's entries, up to W's
	// successor: the archive serves them.
	StalledArchive = mq.StalledArchive
)

// ParseStalledPolicy parses "hold" or "archive" (mq.ParseStalledPolicy).
func ParseStalledPolicy(s string) (StalledPolicy, error) { return mq.ParseStalledPolicy(s) }

// Reasons a group is stalled (StalledGroup.Reason).
const (
	ReasonMaxLive = "max_live" // it holds more than MaxLive records beyond the cut
	ReasonMaxHold = "max_hold" // the oldest entry it holds is older than MaxHold
	// ReasonPassed: a trim passed the group (StalledArchive) and it still
	// holds ids below the stream's first entry: its consumers have not
	// acknowledged or claimed the trimmed ids and read on.
	ReasonPassed = "passed"
)

// heldCountCap is the fewest held records a cycle counts for a group
// before it stops (it counts to MaxLive + 1 when that is more): the count
// is then "at least" (HeldMore).
const heldCountCap = 10000

// heldPage is the most entries one count script reads.
const heldPage = 1000

// StalledGroup is api.StalledGroup: one consumer group that holds back a
// stream's trim past its limits, as a cycle found it.
type StalledGroup = api.StalledGroup

// scriptGroupsHolding lists the consumer groups whose oldest pending or
// first undelivered entry is below a cut.
//
//	KEYS[1]  the stream
//	ARGV[1]  the cut (the minimum id the cycle asks to trim to)
//
// Replies a flat array, six strings per group that holds the trim below
// the cut: name, pending count, last-delivered-id, lag ("" when nil), the
// lowest id it holds, and "1" if that id is below the stream's first entry
// (entries it holds were trimmed: a trim passed it, or the application
// trimmed), else "0".
var scriptGroupsHolding = mq.NewScript(`
local key = KEYS[1]
local out = {}
if redis.call('EXISTS', key) == 0 then return out end
local head = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)
for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
  local name = field(g, 'name')
  local last = field(g, 'last-delivered-id')
  local lag = field(g, 'lag')
  if lag then lag = tostring(lag) else lag = '' end
  local hold = nextid(last)
  local pend = redis.call('XPENDING', key, name)
  if pend[1] > 0 and cmpid(pend[2], hold) < 0 then hold = pend[2] end
  if cmpid(hold, ARGV[1]) < 0 then
    local below = '0'
    if #head == 1 and cmpid(hold, head[1][1]) < 0 then below = '1' end
    for _, v in ipairs({name, tostring(pend[1]), last, lag, hold, below}) do out[#out + 1] = v end
  end
end
return out
`)

// scriptCountBelow counts the entries of a range, one page.
//
//	KEYS[1]  the stream
//	ARGV[1]  the start (an id, inclusive, or "(id", exclusive)
//	ARGV[2]  the end, exclusive
//	ARGV[3]  the most entries to count
//
// Replies {count, first id, last id} ("" ids when none).
var scriptCountBelow = mq.NewScript(`
local got = redis.call('XRANGE', KEYS[1], ARGV[1], '(' .. ARGV[2], 'COUNT', ARGV[3])
if #got == 0 then return {'0', '', ''} end
return {tostring(#got), got[1][1], got[#got][1]}
`)

// stalledField is the seam cache's field that holds the last cycle's
// verdict on stalled groups (JSON, stalledRecord).
const stalledField = "stalled"

// scriptStalledRecord writes the verdict of a cycle into the seam cache
// and replies {the one before it} ("" if none).
//
//	KEYS[1]  the seam cache (SeamKey)
//	ARGV[1]  the verdict (JSON), or "" to clear it
var scriptStalledRecord = mq.NewScript(`
local old = redis.call('HGET', KEYS[1], 'stalled') or ''
if ARGV[1] == '' then
  if old ~= '' then redis.call('HDEL', KEYS[1], 'stalled') end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'stalled', ARGV[1])
end
return {old}
`)

// stalledRecord is the verdict kept in the seam cache.
type stalledRecord struct {
	At     int64          `json:"at"` // Unix milliseconds of the cycle
	Groups []StalledGroup `json:"groups"`
}

// ErrBadStalled: the seam cache's verdict on stalled groups does not
// decode.
var ErrBadStalled = errors.New("malformed stalled-groups verdict in the seam cache")

// parseStalled decodes a verdict of the seam cache ("" is none).
func parseStalled(s string) (time.Time, []StalledGroup, error) {
	if s == "" {
		return time.Time{}, nil, nil
	}
	var r stalledRecord
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return time.Time{}, nil, fmt.Errorf("%w: %w", ErrBadStalled, err)
	}
	for i, g := range r.Groups {
		if g.Group == "" || g.Held < 0 || g.Pending < 0 || g.AgeSeconds < 0 {
			return time.Time{}, nil, fmt.Errorf("%w: group %d", ErrBadStalled, i)
		}
		r.Groups[i].Age = time.Duration(g.AgeSeconds * float64(time.Second))
	}
	return time.UnixMilli(r.At).UTC(), r.Groups, nil
}

// StalledGroups returns the stalled consumer groups of stream ref as its
// last cycle found them, and when that cycle ran: none once a cycle found
// none (or before any cycle trimmed).
func StalledGroups(ctx context.Context, live Live, ref names.StreamRef) (time.Time, []StalledGroup, error) {
	if err := checkRef(ref); err != nil {
		return time.Time{}, nil, err
	}
	m, err := live.HGetAll(ctx, SeamKey(ref))
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("stalled groups of %s: %w", where(ref), err)
	}
	at, groups, err := parseStalled(m[stalledField])
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("stalled groups of %s: %w", where(ref), err)
	}
	return at, groups, nil
}

// stalledGroups returns the consumer groups of stream ref that hold the
// trim to cut (a Redis id) back past w.Groups' limits, at now. A group a
// trim passed before (the last verdict says Passed) stays stalled, with
// ReasonPassed, while it still holds an id below the stream's first entry:
// until its consumers acknowledge or claim the trimmed ids and read on.
func stalledGroups(ctx context.Context, live Live, ref names.StreamRef, w Window, cut string, now time.Time) ([]StalledGroup, error) {
	key := mq.StreamKey(ref)
	flat, err := live.Run(ctx, scriptGroupsHolding, []string{key}, []string{cut}).Strings()
	if err != nil {
		return nil, fmt.Errorf("consumer groups of %s: %w", where(ref), err)
	}
	if len(flat)%6 != 0 {
		return nil, fmt.Errorf("consumer groups of %s: unexpected reply %q", where(ref), flat)
	}
	if len(flat) == 0 {
		return nil, nil
	}
	passed := map[string]bool{}
	if _, prev, err := StalledGroups(ctx, live, ref); err == nil {
		for _, g := range prev {
			passed[g.Group] = g.Passed
		}
	}
	maxLive, maxHold := w.Groups.Limits(w)
	limit := max(maxLive+1, heldCountCap)
	var out []StalledGroup
	for i := 0; i < len(flat); i += 6 {
		g := StalledGroup{Group: flat[i], LastDelivered: flat[i+2], Hold: flat[i+4]}
		below := flat[i+5] == "1"
		if g.Pending, err = strconv.ParseInt(flat[i+1], 10, 64); err != nil {
			return nil, fmt.Errorf("consumer group %q of %s: pending %q: %w", g.Group, where(ref), flat[i+1], err)
		}
		if flat[i+3] != "" {
			lag, err := strconv.ParseInt(flat[i+3], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("consumer group %q of %s: lag %q: %w", g.Group, where(ref), flat[i+3], err)
			}
			g.Lag = &lag
		}
		if g.Held, g.Oldest, err = countHeld(ctx, live, key, g.Hold, cut, limit); err != nil {
			return nil, fmt.Errorf("consumer group %q of %s: %w", g.Group, where(ref), err)
		}
		sticky := below && passed[g.Group]
		if g.Held == 0 && !sticky {
			continue // it holds no live entry back
		}
		if g.Held >= limit {
			g.Held, g.HeldMore = limit, true
		}
		// The oldest entry it holds: the first live one, or, when entries
		// it holds were trimmed, the one at its hold.
		oldest := g.Oldest
		if below || oldest == "" {
			oldest = g.Hold
		}
		if ms, ok := idMillis(oldest); ok {
			g.Age = max(now.Sub(time.UnixMilli(ms)), 0)
		}
		g.AgeSeconds = g.Age.Seconds()
		var why []string
		if maxLive > 0 && g.Held > maxLive {
			why = append(why, ReasonMaxLive)
		}
		if maxHold > 0 && g.Age > maxHold {
			why = append(why, ReasonMaxHold)
		}
		if len(why) == 0 && sticky {
			why = append(why, ReasonPassed)
		}
		if len(why) == 0 {
			continue
		}
		g.Reason = strings.Join(why, ",")
		out = append(out, g)
	}
	return out, nil
}

// countHeld counts the entries of key in [from, to), up to limit, and
// returns the count and the first one's id.
func countHeld(ctx context.Context, live Live, key, from, to string, limit int64) (int64, string, error) {
	var n int64
	first := ""
	start := from
	for n < limit {
		page := min(limit-n, heldPage)
		r, err := live.Run(ctx, scriptCountBelow, []string{key}, []string{start, to, strconv.FormatInt(page, 10)}).Strings()
		if err != nil {
			return 0, "", fmt.Errorf("count held entries: %w", err)
		}
		if len(r) != 3 {
			return 0, "", fmt.Errorf("count held entries: unexpected reply %q", r)
		}
		got, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil {
			return 0, "", fmt.Errorf("count held entries: count %q: %w", r[0], err)
		}
		if first == "" {
			first = r[1]
		}
		n += got
		if got < page {
			break
		}
		start = "(" + r[2]
	}
	return n, first, nil
}

// idMillis returns the milliseconds part of Redis id id.
func idMillis(id string) (int64, bool) {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(ms, 10, 64)
	return v, err == nil
}

// passing returns the names of the groups a trim passes under policy p.
func passing(p StalledPolicy, groups []StalledGroup) []string {
	if p != StalledArchive {
		return nil
	}
	out := make([]string, len(groups))
	for i := range groups {
		groups[i].Passed = true
		out[i] = groups[i].Group
	}
	return out
}

// keepStalled records a cycle's verdict (recordStalled); a failure is
// logged, not returned: the cycle's fold and trim are done, and the next
// cycle writes the verdict again.
func (a *Archiver) keepStalled(ctx context.Context, ref names.StreamRef, w Window, groups []StalledGroup) {
	if err := a.recordStalled(ctx, ref, w.Groups.Stalled, groups, a.opts.Clock()); err != nil {
		a.log.Warn("archive: stalled-group verdict not recorded", ref.LogAttr(), "err", err)
	}
}

// recordStalled keeps the verdict of a cycle of ref on its stalled groups
// in the seam cache, and logs what changed: a warning for each group that
// became stalled, and when the last one stopped being.
func (a *Archiver) recordStalled(ctx context.Context, ref names.StreamRef, p StalledPolicy, groups []StalledGroup, now time.Time) error {
	val := ""
	if len(groups) > 0 {
		b, err := json.Marshal(stalledRecord{At: now.UnixMilli(), Groups: groups})
		if err != nil {
			return fmt.Errorf("stalled groups of %s: %w", where(ref), err)
		}
		val = string(b)
	}
	old, err := a.opts.Live.Run(ctx, scriptStalledRecord, []string{SeamKey(ref)}, []string{val}).Strings()
	if err != nil {
		return fmt.Errorf("stalled groups of %s: record the verdict: %w", where(ref), err)
	}
	if len(old) != 1 {
		return fmt.Errorf("stalled groups of %s: record the verdict: unexpected reply %q", where(ref), old)
	}
	_, before, perr := parseStalled(old[0])
	was := map[string]bool{}
	for _, g := range before {
		was[g.Group] = true
	}
	for _, g := range groups {
		if was[g.Group] && perr == nil {
			continue
		}
		a.log.Warn("archive: consumer group stalled: it holds back the trim of the stream",
			ref.LogAttr(), "group", g.Group, "reason", g.Reason,
			"held", g.Held, "pending", g.Pending, "oldest", g.Oldest, "age", g.Age.Round(time.Second),
			"stalled_groups", p.String(), "passed", g.Passed)
	}
	if len(groups) == 0 && len(before) > 0 {
		a.log.Info("archive: no consumer group holds back the trim of the stream past its limits any more",
			ref.LogAttr())
	}
	return nil
}
