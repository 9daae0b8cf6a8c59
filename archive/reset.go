package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// WhatDiscarded names the records DiscardCounter counts, for
// graft.DiscardError.
const WhatDiscarded = "archived records no longer in the live stream"

// DiscardCounter returns the graft.DiscardCounter of an archive volume
// (archive.Q.S): it counts the archived records that the unpushed commits
// hold and that the live stream no longer has — those whose id is below
// the stream's first entry (a trim removes every entry below its MINID, so
// an archived record at or above the first entry is still live). They
// exist nowhere else: a reset that drops those commits loses them.
//
// The records counted are the pages the unpushed commits folded (offsets
// from archive.seq at the sync point to archive.seq at the head) that are
// still retained at the head (a record retention dropped there is dropped
// either way), found by one bisection. The stream is the volume's owner
// (MetaOwner). With live nil (Redis unreachable), with a volume that
// records no owner, or with an empty or missing stream, every such record
// counts: none can be shown to be live.
func DiscardCounter(live Live) graft.DiscardCounter { return discardCounter(live, xid.ID{}, false) }

// coveredCounter is DiscardCounter for a copy whose remote holds every
// record up to covered (a seam cache that names a landed push, under
// TrimAfterRemote): the unpushed records at or below it exist there too,
// and only those above it and below the live stream's first entry count.
func coveredCounter(live Live, covered xid.ID) graft.DiscardCounter {
	return discardCounter(live, covered, true)
}

func discardCounter(live Live, covered xid.ID, hasCovered bool) graft.DiscardCounter {
	return func(ctx context.Context, u *graft.Unpushed) (uint64, string, error) {
		if u.Head == u.SyncLSN {
			return 0, WhatDiscarded, nil
		}
		vol := u.Volume
		snap, err := vol.SnapshotAt(ctx, u.Head)
		if err != nil {
			return 0, "", fmt.Errorf("archive %s: %w", vol.Name(), err)
		}
		defer snap.Close()
		head, err := stateAt(ctx, snap)
		if err != nil || head.Empty() {
			return 0, WhatDiscarded, err
		}
		base := uint64(0) // archive.seq at the sync point
		if !u.Wiped && u.SyncLSN > 0 {
			bs, err := vol.SnapshotAt(ctx, u.SyncLSN)
			if err != nil {
				return 0, "", fmt.Errorf("archive %s: %w", vol.Name(), err)
			}
			st, err := stateAt(ctx, bs)
			bs.Close()
			if err != nil {
				return 0, "", err
			}
			base = st.Pages
		}
		lo := max(base, head.Low)
		if hasCovered && lo < head.Pages {
			above, ok := covered.Next()
			if !ok {
				return 0, WhatDiscarded, nil
			}
			at, err := lowerBound(ctx, snap, State{Pages: head.Pages, Low: lo, W: head.W, LSN: head.LSN}, above)
			if err != nil {
				return 0, "", err
			}
			lo = at
		}
		if lo >= head.Pages {
			return 0, WhatDiscarded, nil
		}
		what := WhatDiscarded
		first, known, err := liveFirst(ctx, live, snap)
		if err != nil {
			return 0, "", err
		}
		if !known {
			what += " (the live stream could not be read: every one counts)"
			return head.Pages - lo, what, nil
		}
		if first.IsZero() { // an empty or missing stream
			return head.Pages - lo, what, nil
		}
		end, err := lowerBound(ctx, snap, State{Pages: head.Pages, Low: lo, W: head.W, LSN: head.LSN}, first)
		if err != nil {
			return 0, "", err
		}
		return end - lo, what, nil
	}
}

// liveFirst returns the id of the first entry of the live stream that owns
// the archive volume at snap (0-0 when the stream is empty or missing: Redis
// stores no entry at 0-0);
// known is false when that cannot be told (no Redis, no owner recorded).
func liveFirst(ctx context.Context, live Live, snap *graft.Snapshot) (first xid.ID, known bool, err error) {
	if !present(live) {
		return xid.ID{}, false, nil
	}
	o, ok, err := ownerAt(ctx, snap)
	if err != nil || !ok {
		return xid.ID{}, false, err
	}
	in, err := live.Info(ctx, o)
	if err != nil {
		if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
			return xid.ID{}, false, err
		}
		return xid.ID{}, false, nil // Redis unreachable: nothing can be shown live
	}
	if !in.Exists || in.Length == 0 {
		return xid.ID{}, true, nil
	}
	first, err = xid.Parse(in.FirstXID)
	if err != nil {
		return xid.ID{}, false, nil // not an entry id: nothing can be shown live
	}
	return first, true, nil
}

// RepairSeam lowers the seam cache of the stream owning the archive volume
// vol to the volume's state after a reset to the remote dropped folds the
// cache named, so that the stream stays readable and cycles go on instead
// of failing with ErrVolumeBehind ("pull the volume first") while the pull
// has nothing to bring. It does so only when the cache is ahead of the
// volume and was written from this copy's dropped folds (its W at most
// before's, the state before the reset), not by another node that pushed
// further (then a pull is the way). It returns whether it rewrote the
// cache.
//
// A reset that emptied the volume (nothing of it was ever pushed) removes
// the cache instead (a seam cache drop): the stream then reads its
// live tail, and its next cycle folds from there, as a stream never folded.
func RepairSeam(ctx context.Context, live Live, vol *graft.Volume, before State) (bool, error) {
	o, ok, err := VolumeOwner(ctx, vol)
	if err != nil || !ok {
		return false, err
	}
	return repairSeam(ctx, live, vol, o, before)
}

// repairSeam is RepairSeam for the stream o, the volume's owner before the
// reset.
func repairSeam(ctx context.Context, live Live, vol *graft.Volume, o names.StreamRef, before State) (bool, error) {
	if !present(live) {
		return false, nil
	}
	seam, ok, err := GetArchived(ctx, live, o)
	if err != nil || !ok {
		return false, err
	}
	st, err := Frontier(ctx, vol)
	if err != nil {
		return false, err
	}
	if st.Covers(seam.W) || !before.Covers(seam.W) {
		return false, nil
	}
	if st.Empty() {
		return dropArchived(ctx, live, o, seam.W)
	}
	return true, PutArchived(ctx, live, o, Seam{W: st.W, LSN: st.LSN})
}

// ResetResult says what ResetVolume did.
type ResetResult struct {
	Dropped     uint64 // local commits dropped
	Discarded   uint64 // archived records discarded (confirmed by the caller)
	SeamLowered bool   // the seam cache was lowered to the volume (RepairSeam)
}

// ResetVolume resets the archive volume vol to the remote
// (graft.Volume.ResetWith) guarded by DiscardCounter(live): it refuses with
// a *graft.DiscardError (graft.ErrWouldDiscard), dropping nothing, unless
// discard repeats the count of archived records no longer in the live
// stream that the unpushed commits hold. After the reset it lowers a seam
// cache that named the dropped folds (RepairSeam), so that the stream
// stays readable and trimmable.
func ResetVolume(ctx context.Context, vol *graft.Volume, live Live, discard uint64) (ResetResult, error) {
	var res ResetResult
	before, err := Frontier(ctx, vol)
	if err != nil {
		return res, err
	}
	// The owner before the reset: a reset that empties the volume drops
	// the commit that recorded it.
	owner, owned, err := VolumeOwner(ctx, vol)
	if err != nil {
		return res, err
	}
	count := DiscardCounter(live)
	res.Dropped, err = vol.ResetWith(ctx, graft.ResetOptions{Discard: discard,
		Count: func(ctx context.Context, u *graft.Unpushed) (uint64, string, error) {
			n, what, err := count(ctx, u)
			res.Discarded = n
			return n, what, err
		}})
	if err != nil {
		var de *graft.DiscardError
		if errors.As(err, &de) {
			res.Discarded = 0
		}
		return res, err
	}
	if !owned {
		return res, nil
	}
	if res.SeamLowered, err = repairSeam(ctx, live, vol, owner, before); err != nil {
		return res, fmt.Errorf("archive: volume %s reset, but its seam cache could not be lowered to it (reads answer 409 until it is; run the reset again): %w", vol.Name(), err)
	}
	return res, nil
}
