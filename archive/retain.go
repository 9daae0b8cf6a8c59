package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Retention is api.Retention: the archive's retention horizon (the newest
// Count archived records, minted within MaxAge).
type Retention = api.Retention

// Retain applies retention r to the archive in vol as of now: it computes
// the first page to keep (the count limit from the page count, the age
// limit by bisection for the first record minted at or after now − MaxAge)
// and, if that is above the current first retained page, drops the pages
// below it in one synced commit (graft's Txn.DropArchiveBelow, which sets
// archive.low; the same commit sets MetaDropped to the id of the newest
// record dropped, which forward merge-reads compare with their cursor). It
// returns the new state and the number of records dropped.
// Snapshots taken before the commit still read the dropped pages; their
// space is reclaimed by the volume's GC once no snapshot and no unpushed
// LSN needs them. The caller is the volume's one writer (it holds the
// stream's lease); a concurrent commit fails the drop with graft's
// ErrConflict.
func Retain(ctx context.Context, vol *graft.Volume, r Retention, now time.Time) (State, uint64, error) {
	return retainAs(ctx, vol, r, now, nil)
}

// retainAs is Retain on behalf of owner (nil: anyone): at the commit's base
// it refuses a volume that records another owner (*OwnerError, nothing
// dropped).
func retainAs(ctx context.Context, vol *graft.Volume, r Retention, now time.Time, owner *names.StreamRef) (State, uint64, error) {
	if err := r.Validate(); err != nil {
		return State{}, 0, err
	}
	txn := vol.Begin()
	defer txn.Discard()
	snap, err := vol.SnapshotAt(ctx, txn.Base())
	if err != nil {
		return State{}, 0, fmt.Errorf("archive retention of %s: %w", vol.Name(), err)
	}
	defer snap.Close()
	if owner != nil {
		if err := checkOwnerAt(ctx, snap, *owner); err != nil {
			return State{}, 0, err
		}
	}
	st, err := stateAt(ctx, snap)
	if err != nil || st.Empty() || r.IsZero() {
		return st, 0, err
	}
	low := st.Low
	if r.Count > 0 && st.Retained() > r.Count {
		low = st.Pages - r.Count
	}
	if r.MaxAge > 0 {
		cut, err := lowerBound(ctx, snap, st, xid.FirstAt(now.Add(-r.MaxAge)))
		if err != nil {
			return State{}, 0, fmt.Errorf("archive retention of %s: %w", vol.Name(), err)
		}
		low = max(low, cut)
	}
	if low <= st.Low {
		return st, 0, nil
	}
	// The newest record dropped, read while it is still retained: a forward
	// merge-read whose cursor is at or below it has lost records to this
	// drop and says so (DroppedError).
	through, err := pageID(ctx, snap, low-1)
	if err != nil {
		return State{}, 0, fmt.Errorf("archive retention of %s: %w", vol.Name(), err)
	}
	if err := txn.SetMeta(MetaDropped, encodeID(through)); err != nil {
		return State{}, 0, fmt.Errorf("archive retention of %s: %w", vol.Name(), err)
	}
	if err := txn.DropArchiveBelow(low); err != nil {
		return State{}, 0, fmt.Errorf("archive retention of %s: %w", vol.Name(), err)
	}
	lsn, err := txn.Commit(ctx, graft.Synced)
	if err != nil {
		return State{}, 0, fmt.Errorf("archive retention of %s: drop pages [%d, %d): %w", vol.Name(), st.Low, low, err)
	}
	dropped := low - st.Low
	st.Low, st.LSN = low, lsn
	return st, dropped, nil
}

// droppedThrough returns the id of the newest record retention dropped as
// of snap (MetaDropped), and false when no drop recorded it (nothing was
// dropped, or only by a version that did not record it).
func droppedThrough(ctx context.Context, snap *graft.Snapshot) (xid.ID, bool, error) {
	b, err := snap.Meta(ctx, MetaDropped)
	switch {
	case errors.Is(err, graft.ErrNotFound):
		return xid.ID{}, false, nil
	case err != nil:
		return xid.ID{}, false, fmt.Errorf("archive %s at LSN %d: %w", snap.Volume().Name(), snap.LSN(), err)
	}
	id, ok := decodeID(b)
	if !ok {
		return xid.ID{}, false, fmt.Errorf("archive %s at LSN %d: %s is %d bytes, want 8 or 16: %w",
			snap.Volume().Name(), snap.LSN(), MetaDropped, len(b), ErrCorrupt)
	}
	return id, true, nil
}
