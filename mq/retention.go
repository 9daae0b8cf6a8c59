package mq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Window is api.Window: how much of a stream retention keeps (the newest
// Keep, younger than MaxAge) and what its consumer groups may hold back.
type Window = api.Window

// StalledPolicy is api.StalledPolicy: what an archive cycle does about a
// stalled consumer group.
type StalledPolicy = api.StalledPolicy

// The stalled-group policies (api's).
const (
	// StalledHold (the default) keeps the trim capped at the group's
	// oldest pending or undelivered entry.
	StalledHold = api.StalledHold
	// StalledArchive trims past the stalled group's entries anyway, up to
	// the archive's watermark.
	StalledArchive = api.StalledArchive
)

// ErrStalledPolicy is wrapped by ParseStalledPolicy's error
// (api.ErrStalledPolicy).
var ErrStalledPolicy = api.ErrStalledPolicy

// ParseStalledPolicy parses "hold" or "archive" ("" is hold).
func ParseStalledPolicy(s string) (StalledPolicy, error) {
	switch s {
	case "", "hold":
		return StalledHold, nil
	case "archive":
		return StalledArchive, nil
	}
	return 0, fmt.Errorf("stalled_groups %q: %w", s, ErrStalledPolicy)
}

// Defaults of GroupLimits (api's).
const (
	// DefaultMaxLiveFactor: MaxLive 0 means DefaultMaxLiveFactor × Keep.
	DefaultMaxLiveFactor = api.DefaultMaxLiveFactor
	// DefaultMaxHoldMargin: MaxHold 0 means MaxAge + DefaultMaxHoldMargin.
	DefaultMaxHoldMargin = api.DefaultMaxHoldMargin
)

// GroupLimits is api.GroupLimits: what one consumer group may hold back
// beyond a stream's window before it counts as stalled.
type GroupLimits = api.GroupLimits

// TrimReport says what one Cycle did to one stream.
type TrimReport struct {
	Ref    names.StreamRef // the stream
	Window Window          // its declared window
	// Result is zero when the window asked for no trim (or Err is set).
	Result TrimResult
	// Err is why the stream was not trimmed; ErrArchived for an archived one.
	Err error
}

// Retention is the trim-only driver: it trims streams to their declared
// windows, by XTRIM MINID (never MAXLEN, so entries appended during a cycle
// are never trimmed), never past an entry a consumer group has pending or
// undelivered, and never an archived stream (ErrArchived: those are the
// archive driver's, which folds before it trims). Call Cycle on a beat, or
// Run to have it beat.
type Retention struct {
	c       *Client
	clock   func() time.Time
	windows Windows
}

// NewRetention returns a driver on c with no streams declared. clock gives
// the time MaxAge counts from (nil: time.Now).
func (c *Client) NewRetention(clock func() time.Time) *Retention {
	if clock == nil {
		clock = time.Now
	}
	return &Retention{c: c, clock: clock}
}

// Declare sets the window of stream s of queue q (replacing any before).
func (r *Retention) Declare(ref names.StreamRef, w Window) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("retention window of %s (keep %d, max age %v): %w", where(ref), w.Keep, w.MaxAge, err)
	}
	r.windows.Set(ref, w)
	return nil
}

// Forget removes the window of stream s of queue q.
func (r *Retention) Forget(ref names.StreamRef) { r.windows.Delete(ref) }

// Cycle trims every declared stream once, in name order, and reports what
// it did to each. The error joins the streams' errors (errors.Is finds
// ErrArchived among them); one stream's failure does not stop the others.
func (r *Retention) Cycle(ctx context.Context) ([]TrimReport, error) {
	declared := r.windows.Sorted()
	reports := make([]TrimReport, len(declared))
	for i, d := range declared {
		reports[i] = TrimReport{Ref: d.Ref, Window: d.Window}
	}
	var errs []error
	for i := range reports {
		rep := &reports[i]
		rep.Result, rep.Err = r.trimOne(ctx, rep.Ref, rep.Window)
		if rep.Err != nil {
			errs = append(errs, rep.Err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return reports, errors.Join(errs...)
}

// Run calls Cycle every interval until ctx ends, logging what each cycle
// trimmed and refused, and returns ctx's error.
func (r *Retention) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		reports, _ := r.Cycle(ctx)
		for _, rep := range reports {
			switch {
			case errors.Is(rep.Err, ErrArchived):
				r.c.log.Error("retention refused an archived stream; remove its window: the archive driver trims it",
					"queue", rep.Ref.Queue(), "stream", rep.Ref.Stream())
			case rep.Err != nil:
				r.c.log.Warn("retention failed", "queue", rep.Ref.Queue(), "stream", rep.Ref.Stream(), "err", rep.Err)
			case rep.Result.Trimmed > 0 || rep.Result.CappedBy != "":
				r.c.log.Info("retention trimmed", "queue", rep.Ref.Queue(), "stream", rep.Ref.Stream(),
					"trimmed", rep.Result.Trimmed, "minid", rep.Result.MinXID, slog.String("capped_by", rep.Result.CappedBy))
			}
		}
	}
}

// trimOne trims one stream to its window.
func (r *Retention) trimOne(ctx context.Context, ref names.StreamRef, w Window) (TrimResult, error) {
	// A cheap early refusal; the trim script checks again, atomically.
	if archived, err := r.c.isArchived(ctx, ref); err != nil {
		return TrimResult{}, err
	} else if archived {
		return TrimResult{}, fmt.Errorf("retention of %s: %w", where(ref), ErrArchived)
	}
	minXID, err := r.minXID(ctx, StreamKey(ref), w)
	if err != nil || minXID == "" {
		return TrimResult{}, err
	}
	return r.c.trim(ctx, ref, minXID)
}

// isArchived reports whether stream s is registered as archived in queue
// q (a member of ArchivedSetKey(q); package archive registers it).
func (c *Client) isArchived(ctx context.Context, ref names.StreamRef) (bool, error) {
	set, member := ArchivedRegistry(ref)
	ok, err := c.rdb.Do(ctx, c.rdb.B().Sismember().Key(set).Member(member).Build()).AsBool()
	if err != nil {
		return false, fmt.Errorf("is %s archived: %w", where(ref), err)
	}
	return ok, nil
}

// WindowCut returns the lowest id window w keeps live in stream s of queue
// q at time now, computed exactly as the Retention driver computes its trim
// point: entries below the cut are outside the window. ok is false when the
// window keeps every entry. The archive driver folds up to the cut before
// it trims.
func (c *Client) WindowCut(ctx context.Context, ref names.StreamRef, w Window, now time.Time) (cut xid.ID, ok bool, err error) {
	if err := checkRef(ref); err != nil {
		return xid.ID{}, false, err
	}
	if w.Keep < 0 || w.MaxAge < 0 {
		return xid.ID{}, false, fmt.Errorf("window of %s: negative limit (keep %d, max age %v)", where(ref), w.Keep, w.MaxAge)
	}
	r := &Retention{c: c, clock: func() time.Time { return now }}
	text, err := r.minXID(ctx, StreamKey(ref), w)
	if err != nil || text == "" {
		return xid.ID{}, false, err
	}
	id, err := xid.Parse(text)
	if err != nil {
		return xid.ID{}, false, fmt.Errorf("window cut of %s at %s: %w", where(ref), text, err)
	}
	return id, true, nil
}

// minXID computes the id a window trims to ("" for no trim): the larger of
// the age cut and the id of the Keep-th newest entry.
func (r *Retention) minXID(ctx context.Context, key string, w Window) (string, error) {
	var cut string
	if w.MaxAge > 0 {
		cut = xid.FirstAt(r.clock().Add(-w.MaxAge)).String()
	}
	if w.Keep > 0 {
		n, err := r.c.rdb.Do(ctx, r.c.rdb.B().Xlen().Key(key).Build()).AsInt64()
		if err != nil {
			return "", fmt.Errorf("XLEN %s: %w", key, r.c.typeError(ctx, err, key))
		}
		if drop := n - w.Keep; drop > 0 {
			// The oldest entry to keep is the (drop+1)-th oldest, which is
			// the Keep-th newest; walk from the nearer end.
			var keepFrom string
			if drop+1 <= w.Keep {
				keepFrom, err = r.c.nthEntry(ctx, key, drop+1, false)
			} else {
				keepFrom, err = r.c.nthEntry(ctx, key, w.Keep, true)
			}
			if err != nil {
				return "", err
			}
			if cut == "" || cmpXID(keepFrom, cut) > 0 {
				cut = keepFrom
			}
		}
	}
	return cut, nil
}

// nthEntry returns the id of the n-th entry (1-based) from the oldest end,
// or from the newest with reverse, reading in pages; "" if there are fewer.
func (c *Client) nthEntry(ctx context.Context, key string, n int64, reverse bool) (string, error) {
	cur := &Cursor{c: c, key: key, start: "-", end: "+", reverse: reverse}
	const page = 1000
	for n > 0 && !cur.done {
		entries, err := cur.fetch(ctx, int(min(n, page)))
		if err != nil {
			return "", err
		}
		if int64(len(entries)) >= n {
			return entries[n-1].xid, nil
		}
		n -= int64(len(entries))
	}
	return "", nil
}

// cmpXID compares two Redis stream ids.
func cmpXID(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	return cmp.Or(cmpDecimal(am, bm), cmpDecimal(as, bs))
}

func cmpDecimal(a, b string) int {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}
