package archive

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Detection of an application's own trimming. An archived stream is
// trimmed by the archive only up to its watermark W (what it folded); an
// application that trims it itself (XADD … MAXLEN, XTRIM, XDEL) may remove
// entries above W, which were then never folded: history lost. Two signs
// show it, both read from Redis:
//
//   - XDEL: XINFO STREAM's max-deleted-entry-id is above W (Redis moves it
//     on XDEL, not on trims).
//   - A trim: every cycle records in the seam cache (field live-first) the
//     oldest live entry above W it left behind; at the next cycle's start,
//     while W is still below that entry, the stream's first entry is above
//     it (or the stream is gone): someone removed it, and the archive never
//     does above W.
//
// A detection is logged (a warning), returned in CycleResult.AppTrimmed
// and kept in the seam cache (fields lost-kind and lost-from) so that
// archive status reports it (AppTrimStatus) until the stream is deleted.
// Nothing can bring the lost entries back; the report says from which id
// on entries may be missing.

// Seam cache fields of the detection (besides w, xid and lsn).
const (
	seamLiveFirst = "live-first" // the oldest live entry above W after the last cycle (Redis id)
	seamLostKind  = "lost-kind"  // "xdel" or "trim": how entries above W were removed
	seamLostFrom  = "lost-from"  // the lowest id known removed without a fold (Redis id)
)

// AppTrim is api.AppTrim: entries of an archived stream removed by
// someone else before they were folded.
type AppTrim = api.AppTrim

// xidOf parses a Redis stream id "ms-seq".
func xidOf(s string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

// xidAbove reports whether Redis id a is above Redis id b; false if either
// does not parse.
func xidAbove(a, b string) bool {
	am, as, ok1 := xidOf(a)
	bm, bs, ok2 := xidOf(b)
	return ok1 && ok2 && (am > bm || am == bm && as > bs)
}

// detectAppTrim looks for entries above W (st) removed without a fold, in
// info (XINFO STREAM now) and the seam cache fields m, records a detection
// in the seam cache, and returns it.
func (a *Archiver) detectAppTrim(ctx context.Context, ref names.StreamRef, st State, info mq.StreamInfo, m map[string]string) AppTrim {
	t := appTrimOf(st, info, m)
	if !t.Detected() {
		return t
	}
	a.log.Warn("archive: entries above the watermark were removed by another client (MAXLEN, XTRIM or XDEL) before they were folded; they are not in the archive",
		"stream", ref.String(), "kind", t.Kind, "from", t.From, "w", st.W.String())
	if err := a.opts.Live.Run(ctx, scriptSeamFields, []string{SeamKey(ref)},
		[]string{seamLostKind, t.Kind, seamLostFrom, t.From}).Err(); err != nil {
		a.log.Warn("archive: could not record the removal in the seam cache", "stream", ref.String(), "err", err)
	}
	return t
}

// appTrimOf is the detection rule on what Redis says now.
func appTrimOf(st State, info mq.StreamInfo, m map[string]string) AppTrim {
	if st.Empty() {
		return AppTrim{}
	}
	w := st.W.String()
	if xidAbove(info.MaxDeleted, w) {
		return AppTrim{Kind: "xdel", From: info.MaxDeleted}
	}
	if lf := m[seamLiveFirst]; xidAbove(lf, w) && (!info.Exists || info.Length == 0 || xidAbove(info.FirstXID, lf)) {
		return AppTrim{Kind: "trim", From: lf}
	}
	return AppTrim{}
}

// observeLiveFirst records, after a cycle, the oldest live entry above W
// (the stream's first entry, when it is above W), for the next cycle's
// detection; with none above W (a group holds older entries, or the stream
// is empty) the field is cleared. A failure is logged: detection is a
// report, not a guard.
func (a *Archiver) observeLiveFirst(ctx context.Context, ref names.StreamRef, st State) {
	if st.Empty() {
		return
	}
	info, err := a.opts.Live.Info(ctx, ref)
	if err != nil {
		a.log.Warn("archive: could not observe the live stream after the cycle", "stream", ref.String(), "err", err)
		return
	}
	first := ""
	if info.Length > 0 && xidAbove(info.FirstXID, st.W.String()) {
		first = info.FirstXID
	}
	if err := a.opts.Live.Run(ctx, scriptSeamFields, []string{SeamKey(ref)}, []string{seamLiveFirst, first}).Err(); err != nil {
		a.log.Warn("archive: could not observe the live stream after the cycle", "stream", ref.String(), "err", err)
	}
}

// scriptSeamFields sets fields of an existing seam cache (one with a w):
// ARGV is field, value, field, value, …; an empty value deletes the field.
// A missing cache is left missing (a cache without w is not a seam).
var scriptSeamFields = mq.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'w') == 0 then return 0 end
for i = 1, #ARGV, 2 do
  if ARGV[i+1] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1]) end
end
return 1
`)

// AppTrimStatus reports removals by another client of ref's entries above
// W, the archive's state st: one a cycle recorded in the seam cache, or
// one visible now (max-deleted-entry-id above W; the entry the last cycle
// left first gone). It reads Redis only.
func AppTrimStatus(ctx context.Context, live Live, ref names.StreamRef, st State) (AppTrim, error) {
	if err := checkRef(ref); err != nil {
		return AppTrim{}, err
	}
	m, err := live.HGetAll(ctx, SeamKey(ref))
	if err != nil {
		return AppTrim{}, fmt.Errorf("read seam cache of %s: %w", where(ref), err)
	}
	if k := m[seamLostKind]; k != "" {
		return AppTrim{Kind: k, From: m[seamLostFrom]}, nil
	}
	info, err := live.Info(ctx, ref)
	if err != nil {
		return AppTrim{}, err
	}
	return appTrimOf(st, info, m), nil
}
