package graft

import (
	"context"
	"fmt"
	"time"
)

// LSNAt returns the newest LSN of the volume committed at or before t, by
// the commit records' times (the wall clock of the node that made each
// commit), or 0 when t is before the first commit. It bisects the commit
// records the volume keeps, reading O(log n) of them, and so assumes the
// commit times ascend with the LSNs. A t before the oldest commit the
// volume still keeps (its GC horizon is above 1) fails with a
// *SnapshotGoneError: which state the volume held then is not known.
func (v *Volume) LSNAt(ctx context.Context, t time.Time) (uint64, error) {
	in := v.Info()
	lo, hi := max(in.Horizon, 1), in.LocalLSN
	if hi == 0 {
		return 0, nil
	}
	first, err := v.commitTime(ctx, lo)
	if err != nil {
		return 0, err
	}
	if t.Before(first) {
		if lo > 1 {
			return 0, &SnapshotGoneError{Volume: v.name, LSN: lo - 1, Horizon: lo}
		}
		return 0, nil
	}
	return v.lastAtOrBefore(ctx, lo, hi, t)
}

// lastAtOrBefore returns the last LSN in [lo, hi] committed at or before
// t, given that lo was.
func (v *Volume) lastAtOrBefore(ctx context.Context, lo, hi uint64, t time.Time) (uint64, error) {
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		at, err := v.commitTime(ctx, mid)
		if err != nil {
			return 0, err
		}
		if at.After(t) {
			hi = mid - 1
		} else {
			lo = mid
		}
	}
	return lo, nil
}

// commitTime returns when the commit of lsn was made.
func (v *Volume) commitTime(ctx context.Context, lsn uint64) (time.Time, error) {
	cs, err := v.Commits(ctx, lsn, lsn)
	if err != nil {
		return time.Time{}, err
	}
	if len(cs) != 1 {
		return time.Time{}, fmt.Errorf("graft: volume %q: %w", v.name, corrupt("commit log", "no commit record of LSN %d", lsn))
	}
	return cs[0].Time, nil
}

// historyBound returns the highest horizon the volume's history allows
// (Options.History): the newest LSN above from committed at or before
// now − History, or from when there is none; no bound (the head) without
// a history.
func (v *Volume) historyBound(ctx context.Context, from, head uint64, now time.Time) (uint64, error) {
	if v.s.opts.History == nil || head <= from {
		return head, nil
	}
	d := v.s.opts.History(v.vol)
	if d <= 0 {
		return head, nil
	}
	cut := now.Add(-d)
	lo := max(from, 1)
	at, err := v.commitTime(ctx, lo)
	if err != nil {
		return 0, err
	}
	if at.After(cut) {
		return from, nil // every state since the horizon is younger than d
	}
	return v.lastAtOrBefore(ctx, lo, head, cut)
}

// floorNow returns the lowest LSN a snapshot may still open.
func (v *Volume) floorNow() uint64 {
	v.pinMu.Lock()
	defer v.pinMu.Unlock()
	return v.floor
}

// now reads the store's clock (Options.Now).
func (s *Store) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}
