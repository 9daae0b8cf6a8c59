package echostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/time/rate"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Sentinel errors of Node.Replay. Both are refusals before anything is
// written (ErrReplayConflict also stops a replay whose target another
// writer changed while it ran: what was copied before stays, and a new run
// refuses again until the target is set right).
var (
	// ErrReplayTarget: the target key cannot take a replay: it is the
	// source stream itself, an archived stream, a key holding another type
	// than a stream, or a key in echostore's own namespace (emq:) without
	// ReplayOptions.Force.
	ErrReplayTarget = errors.New("echostore: the replay target cannot take the replay")
	// ErrReplayConflict: the target stream holds entries in the range
	// that did not come from this replay: its last id is at or above the
	// first id to copy, and its entry at that id (or its newest entry in
	// the range) is missing or differs from the source's record.
	ErrReplayConflict = errors.New("echostore: the replay target holds other entries in the range")
)

// DefaultReplayRate is the rate of a replay that gives none, in records per
// second (api.DefaultReplayRate).
const DefaultReplayRate = api.DefaultReplayRate

// MaxReplayBatch bounds the records one write of a replay sends (one Redis
// script call); a batch also stops at replayBatchBytes of names and values.
const MaxReplayBatch = 500

// replayBatchBytes bounds the names and values of one batch (a record
// larger than this goes alone).
const replayBatchBytes = 1 << 20

// ReplayNamespace is the key prefix of echostore's own Redis keys, which a
// replay refuses as its target unless forced.
const ReplayNamespace = "emq:"

// ReplayLimiter is api.ReplayLimiter: what paces a replay (WaitN);
// *rate.Limiter (golang.org/x/time/rate) is one.
type ReplayLimiter = api.ReplayLimiter

// ReplayOptions is api.ReplayOptions: the range, target and pace of a
// replay (Node.Replay).
type ReplayOptions = api.ReplayOptions

// ReplayProgress is api.ReplayProgress: where a running replay is.
type ReplayProgress = api.ReplayProgress

// ReplayResult is api.ReplayResult: the answer of a replay.
type ReplayResult = api.ReplayResult

// replayID renders the id of a record as the Redis id it gets in the
// target: the one place a replay turns a record id into text.
func replayID(id xid.ID) string { return id.String() }

// Replay copies the records of the stream ref with ids in [opts.From,
// opts.To] (the merge-read: archive and live tail) into the Redis stream
// opts.Into under their original ids (XADD Into <id> …), so that a
// consumer group created on Into (XGROUP CREATE Into g 0) processes that
// history with plain XREADGROUP. It writes in batches of one Redis script
// each (atomic: a batch lands whole or not at all), at most opts.Rate
// records per second.
//
// A replay is resumable and idempotent: it goes on after the target's last
// id, so running it again after an interruption copies what is missing,
// with no gap and no duplicate, and running it again after it finished
// copies nothing. Before it writes anything it refuses, wrapping
// ErrReplayTarget, a target that is the source itself, an archived stream,
// a key of another type or (without opts.Force) a key in echostore's
// namespace; and, wrapping ErrReplayConflict, a target whose last id is at
// or above the first id to copy when its entry at that id, or its newest
// entry in the range, is not the source's record. On an error after some
// records were copied the result says how many.
func (n *Node) Replay(ctx context.Context, ref names.StreamRef, opts ReplayOptions) (ReplayResult, error) {
	out := ReplayResult{Into: opts.Into}
	p, err := n.planReplay(ctx, ref, opts)
	if err != nil || p.done {
		out.Done = err == nil
		out.ResumedAfter = p.resumedAfter
		return out, err
	}
	out.ResumedAfter = p.resumedAfter
	live := n.mq
	lim := opts.Limiter
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(p.rate), p.batch)
	}
	var (
		batch  []Record
		nbytes int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := lim.WaitN(ctx, len(batch)); err != nil {
			return fmt.Errorf("replay %s into %s: %w", ref, opts.Into, err)
		}
		copied, err := replayWrite(ctx, live, opts.Into, batch)
		if err != nil {
			return fmt.Errorf("replay %s into %s: %w", ref, opts.Into, err)
		}
		out.Copied += copied
		last := replayID(batch[len(batch)-1].ID)
		out.Last = &last
		batch, nbytes = batch[:0], 0
		if opts.Progress != nil {
			opts.Progress(ReplayProgress{Copied: out.Copied, Last: last})
		}
		return nil
	}
	limited := false
	for rec, err := range n.Read(ctx, ref, ReadOptions{From: p.start, To: p.to}) {
		if err != nil {
			return out, replayStopped(ref, opts.Into, out, fmt.Errorf("read the source: %w", err))
		}
		if opts.Limit > 0 && out.Copied+int64(len(batch)) >= int64(opts.Limit) {
			limited = true
			break
		}
		size := recordBytes(rec.Fields)
		if len(batch) > 0 && (len(batch) >= p.batch || nbytes+size > replayBatchBytes) {
			if err := flush(); err != nil {
				return out, replayStopped(ref, opts.Into, out, err)
			}
		}
		batch = append(batch, rec)
		nbytes += size
	}
	if err := flush(); err != nil {
		return out, replayStopped(ref, opts.Into, out, err)
	}
	out.Done = !limited
	return out, nil
}

// replayStopped says how far a replay got before err, and that running it
// again goes on from there. With nothing confirmed copied the first batch
// may still have landed (its write was in flight): a run again resumes
// after the target's last id, so it is just as safe.
func replayStopped(ref names.StreamRef, into string, res ReplayResult, err error) error {
	if res.Copied == 0 {
		return fmt.Errorf("replay of %s into %s stopped before any batch was confirmed (run it again to go on): %w",
			ref, into, err)
	}
	return fmt.Errorf("replay of %s into %s stopped after %d records (the last %s; run it again to go on): %w",
		ref, into, res.Copied, *res.Last, err)
}

// replayPlan is what a replay does, decided before it writes anything.
type replayPlan struct {
	start, to    xid.ID // the source range still to copy
	rate         float64
	batch        int
	resumedAfter *string // the target's last id, if it holds part of the range
	done         bool    // nothing to copy
}

// planReplay checks the request and the target, then finds where the copy
// starts. It writes nothing.
func (n *Node) planReplay(ctx context.Context, ref names.StreamRef, opts ReplayOptions) (replayPlan, error) {
	var p replayPlan
	if ref.IsZero() {
		return p, fmt.Errorf("replay: no stream: %w", names.ErrInvalid)
	}
	p.to = opts.To
	if p.to.IsZero() {
		p.to = xid.Max
	}
	switch {
	case opts.Into == "":
		return p, fmt.Errorf("replay %s: no target key: give the Redis key of the stream to copy into: %w", ref, ErrInvalid)
	case p.to.Less(opts.From):
		return p, fmt.Errorf("replay %s: from %s is above to %s: %w", ref, replayID(opts.From), replayID(p.to), ErrInvalid)
	case opts.Rate < 0 || opts.Rate != opts.Rate:
		return p, fmt.Errorf("replay %s: rate %v: want a positive number of records per second (0: %d): %w", ref, opts.Rate, DefaultReplayRate, ErrInvalid)
	case opts.Limit < 0:
		return p, fmt.Errorf("replay %s: limit %d: want 0 (all) or more: %w", ref, opts.Limit, ErrInvalid)
	}
	p.rate = opts.Rate
	if p.rate == 0 {
		p.rate = DefaultReplayRate
	}
	p.batch = MaxReplayBatch
	if p.rate/10 < MaxReplayBatch {
		p.batch = max(int(p.rate/10), 1)
	}
	live, err := n.live()
	if err != nil {
		return p, err
	}
	if err := checkReplayTarget(ctx, live, ref, opts.Into, opts.Force); err != nil {
		return p, err
	}
	// The first record to copy, and the target's state against it.
	first, ok, err := n.readOne(ctx, ref, opts.From, p.to)
	if err != nil {
		return p, fmt.Errorf("replay %s: read the source: %w", ref, err)
	}
	args := []string{"", replayID(p.to), "0"}
	if ok {
		args = append([]string{replayID(first.ID), replayID(p.to)}, flatFields(first.Fields)...)
	}
	st, err := live.Run(ctx, scriptReplayCheck, []string{opts.Into}, args).Strings()
	if err != nil {
		return p, fmt.Errorf("replay %s: inspect %s: %w", ref, opts.Into, err)
	}
	if len(st) < 2 {
		return p, fmt.Errorf("replay %s: inspect %s: unexpected reply %q", ref, opts.Into, st)
	}
	switch st[0] {
	case "WRONGTYPE":
		return p, fmt.Errorf("replay %s: %s holds a %s, not a stream: %w", ref, opts.Into, st[1], ErrReplayTarget)
	case "CONFLICT":
		return p, fmt.Errorf("replay %s: %s's last id %s is at or above the first id to copy, %s, and its entry there is not the source's record (another producer's entries, or a replay of another stream); nothing was copied: %w",
			ref, opts.Into, st[1], replayID(first.ID), ErrReplayConflict)
	case "FRESH":
		if !ok {
			p.done = true
			return p, nil
		}
		p.start = first.ID
		return p, nil
	case "RESUME":
	default:
		return p, fmt.Errorf("replay %s: inspect %s: unexpected reply %q", ref, opts.Into, st)
	}
	last := st[1]
	p.resumedAfter = &last
	if len(st) > 2 && st[2] != replayID(first.ID) {
		// The target's newest entry in the range must be the source's
		// record of that id.
		if err := n.checkReplayed(ctx, ref, opts.Into, st[2], st[3:]); err != nil {
			return p, err
		}
	}
	start, more := replayAfter(last)
	if !more || p.to.Less(start) {
		p.done = true
		return p, nil
	}
	p.start = xid.MaxOf(start, first.ID)
	return p, nil
}

// checkReplayed checks that the target's entry id (fields flat) is the
// source's record of that id.
func (n *Node) checkReplayed(ctx context.Context, ref names.StreamRef, into, id string, flat []string) error {
	conflict := fmt.Errorf("replay %s: %s's newest entry in the range, %s, is not the source's record of that id (another producer's entries, or a replay of another stream); nothing was copied: %w",
		ref, into, id, ErrReplayConflict)
	bid, err := xid.Parse(id)
	if err != nil {
		return conflict // no record of the source has that id
	}
	rec, ok, err := n.readOne(ctx, ref, bid, bid)
	if err != nil {
		return fmt.Errorf("replay %s: read the source: %w", ref, err)
	}
	if !ok || !sameFlat(rec.Fields, flat) {
		return conflict
	}
	return nil
}

// readOne returns the source's first record in [from, to] (merged), and
// whether there is one.
func (n *Node) readOne(ctx context.Context, ref names.StreamRef, from, to xid.ID) (Record, bool, error) {
	for rec, err := range n.Read(ctx, ref, ReadOptions{From: from, To: to, Limit: 1}) {
		if err != nil {
			return Record{}, false, err
		}
		return rec, true, nil
	}
	return Record{}, false, nil
}

// checkReplayTarget refuses, before anything is read or written, a target
// that is the source itself, an archived stream, or (without force) a key
// in echostore's namespace.
func checkReplayTarget(ctx context.Context, live *mq.Client, ref names.StreamRef, into string, force bool) error {
	if into == mq.StreamKey(ref) {
		return fmt.Errorf("replay %s: %s is the source stream itself: %w", ref, into, ErrReplayTarget)
	}
	archived, err := archivedKey(ctx, live, into)
	if err != nil {
		return fmt.Errorf("replay %s: %w", ref, err)
	}
	if archived {
		return fmt.Errorf("replay %s: %s is an archived stream (its history is echostore's to keep): %w", ref, into, ErrReplayTarget)
	}
	if strings.HasPrefix(into, ReplayNamespace) {
		if !force {
			return fmt.Errorf("replay %s: %s is in echostore's own namespace (%s…); give another key, or force it (--force; force=true over HTTP): %w", ref, into, ReplayNamespace, ErrReplayTarget)
		}
		// Forced, the target may be a stream of a queue (emq:{Q}:stream:S)
		// and nothing else there: a seam cache, a lease, a counter, a job
		// stream or a lane written as a stream would break what reads it.
		if cand, ok := archivedCandidate(into); !ok || cand.IsKey() || into != mq.StreamKey(cand) {
			return fmt.Errorf("replay %s: %s is one of echostore's own keys, not the stream of a queue (emq:{Q}:stream:S); even forced, a replay writes only such a stream: %w", ref, into, ErrReplayTarget)
		}
	}
	return nil
}

// archivedKey reports whether the Redis key is an archived stream: the
// key of a stream S of queue Q (emq:{Q}:stream:S) registered in Q's
// archived set, or a stream key K (names.ParseKey: any key outside emq:)
// registered in its tag's registry of archived keys (emq:{T}:archived-keys).
func archivedKey(ctx context.Context, live *mq.Client, key string) (bool, error) {
	ref, ok := archivedCandidate(key)
	if !ok {
		return false, nil
	}
	ok, err := archive.IsArchived(ctx, live, ref)
	if err != nil {
		return false, err
	}
	return ok, nil
}

// archivedCandidate returns the stream whose key key would be, if it can
// be one: the key of a stream of a queue, or a stream key.
func archivedCandidate(key string) (names.StreamRef, bool) {
	rest, ok := strings.CutPrefix(key, "emq:{")
	if !ok {
		ref, err := names.ParseKeyRef(key)
		return ref, err == nil
	}
	q, s, ok := strings.Cut(rest, "}:stream:")
	if !ok {
		return names.StreamRef{}, false
	}
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		return names.StreamRef{}, false // not a stream key echostore makes (a seam cache, a lease …)
	}
	return ref, true
}

// replayAfter returns the smallest record id above last (a Redis id
// "ms-seq"), and false when none is.
func replayAfter(last string) (xid.ID, bool) {
	id, err := xid.Parse(last)
	if err != nil {
		return xid.ID{}, false
	}
	return id.Next()
}

// replayWrite writes one batch (ids increasing) into the target with one
// script: entries the target holds already (a replay that ran beside this
// one) are checked and left, the rest appended. It returns the records
// appended.
func replayWrite(ctx context.Context, live *mq.Client, into string, batch []Record) (int64, error) {
	args := make([]string, 0, 1+len(batch)*4)
	args = append(args, strconv.Itoa(len(batch)))
	for _, rec := range batch {
		args = append(args, replayID(rec.ID))
		args = append(args, flatFields(rec.Fields)...)
	}
	st, err := live.Run(ctx, scriptReplayAppend, []string{into}, args).Strings()
	if err != nil {
		return 0, fmt.Errorf("write %d records: %w", len(batch), err)
	}
	switch {
	case len(st) == 2 && st[0] == "OK":
		n, err := strconv.ParseInt(st[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("write: unexpected reply %q", st)
		}
		return n, nil
	case len(st) == 2 && st[0] == "WRONGTYPE":
		return 0, fmt.Errorf("%s holds a %s now, not a stream: %w", into, st[1], ErrReplayTarget)
	case len(st) == 3 && st[0] == "CONFLICT":
		return 0, fmt.Errorf("another writer changed %s while the replay ran: its last id is %s, and its entry %s is not the source's record: %w",
			into, st[2], st[1], ErrReplayConflict)
	}
	return 0, fmt.Errorf("write: unexpected reply %q", st)
}

// flatFields returns the number of fields, then their names and values,
// alternating: a record as the replay scripts take it.
func flatFields(fields []Field) []string {
	out := make([]string, 0, 1+2*len(fields))
	out = append(out, strconv.Itoa(len(fields)))
	for _, f := range fields {
		out = append(out, f.Name, f.Value)
	}
	return out
}

// sameFlat reports whether fields are the alternating names and values
// flat, in order.
func sameFlat(fields []Field, flat []string) bool {
	if len(flat) != 2*len(fields) {
		return false
	}
	for i, f := range fields {
		if flat[2*i] != f.Name || flat[2*i+1] != f.Value {
			return false
		}
	}
	return true
}

// recordBytes returns the bytes of names and values of fields.
func recordBytes(fields []Field) int {
	n := 0
	for _, f := range fields {
		n += len(f.Name) + len(f.Value)
	}
	return n
}

// The scripts of a replay. Each touches one key, the target, passed in
// KEYS[1] (so it runs on the master of the target's slot, whatever its
// name). Ids are Redis ids "ms-seq", compared as decimal strings (cmpid).

// luaSame is same(entry, argv, at, nf): whether the flat fields of a stream
// entry are the nf names and values of ARGV from index at.
const luaSame = `
local function same(flat, at, nf)
  if #flat ~= 2 * nf then return false end
  for j = 1, 2 * nf do
    if flat[j] ~= ARGV[at + j - 1] then return false end
  end
  return true
end
local function targettype(key)
  return redis.call('TYPE', key).ok
end
`

// scriptReplayCheck inspects the target before a replay writes anything.
//
//	KEYS[1]  the target
//	ARGV[1]  the Redis id of the first record to copy ("" if the range is empty)
//	ARGV[2]  the Redis id of the range's end
//	ARGV[3]  the number of fields f of the first record, then its f names and values
//
// Replies {"WRONGTYPE", type} for a key of another type than a stream;
// {"FRESH", last} when the target is missing, or its last-generated-id
// last is below the first id (or the range is empty); {"CONFLICT", last}
// when last is at or above the first id and the target's entry there is
// missing or differs; else {"RESUME", last[, id, names and values]}, with
// the target's newest entry in the range when there is one.
var scriptReplayCheck = mq.NewScript(luaSame + `
local key = KEYS[1]
local t = targettype(key)
if t ~= 'none' and t ~= 'stream' then return {'WRONGTYPE', t} end
local last = lastid(key)
local first = ARGV[1]
if first == '' or cmpid(last, first) < 0 then return {'FRESH', last} end
local got = redis.call('XRANGE', key, first, first)
if #got ~= 1 or not same(got[1][2], 4, tonumber(ARGV[3])) then return {'CONFLICT', last} end
local out = {'RESUME', last}
local top = redis.call('XREVRANGE', key, ARGV[2], first, 'COUNT', 1)
if #top == 1 then
  out[3] = top[1][1]
  for j, v in ipairs(top[1][2]) do out[3 + j] = v end
end
return out
`)

// scriptReplayAppend writes one batch of a replay.
//
//	KEYS[1]  the target
//	ARGV[1]  n, the number of records
//	then per record: its Redis id, its number of fields f, and f names and values
//
// Records at or below the target's last-generated-id must be there
// already, identical (a replay that ran beside this one wrote them): they
// are left. The rest are appended under their ids. Replies {"OK", appended};
// {"CONFLICT", id, last} when a record at or below last is missing or
// differs, and {"WRONGTYPE", type} for a key of another type (nothing
// written in either case). Ids within a batch must increase.
var scriptReplayAppend = mq.NewScript(luaSame + `
local key = KEYS[1]
local t = targettype(key)
if t ~= 'none' and t ~= 'stream' then return {'WRONGTYPE', t} end
local recs, bad = records(1)
if bad == 'malformed' then
  return redis.error_reply('ERR echostore replay: malformed arguments')
elseif bad then
  return redis.error_reply('ERR echostore replay: ids of a batch must increase')
end
local n = #recs
local last = lastid(key)
local from = 1
while from <= n and cmpid(recs[from][1], last) <= 0 do
  local r = recs[from]
  local got = redis.call('XRANGE', key, r[1], r[1])
  if #got ~= 1 or not same(got[1][2], r[2], r[3]) then return {'CONFLICT', r[1], last} end
  from = from + 1
end
for i = from, n do
  local r = recs[i]
  local a = {key, r[1]}
  for j = r[2], r[2] + 2 * r[3] - 1 do a[#a + 1] = ARGV[j] end
  redis.call('XADD', unpack(a))
end
return {'OK', tostring(n - from + 1)}
`)
