package graft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The archive floor: dropping archive pages in order (docs/GRAFT.md, "Page
// drop"). A volume's archive floor is the metadata key MetaArchiveLow, set
// only by Txn.DropArchiveBelow. At an LSN whose floor is n, the archive
// pages at ArchiveBase+0 … ArchiveBase+n-1 are dropped: reads at that LSN
// find nothing there, reads at older LSNs still see them, and GC deletes
// their versions once its horizon passes the commit that dropped them. A
// drop is an ordinary metadata commit, so it replicates in the existing
// remote format: a follower applying it hides the same pages and reclaims
// them with its own GC.

// MetaArchiveLow is the metadata key of the archive floor: 8 bytes,
// big-endian, the offset n of the first archive page not dropped. No
// version means 0 (nothing dropped). Txn.SetMeta refuses the key; only
// Txn.DropArchiveBelow sets it.
const MetaArchiveLow = "archive.low"

var (
	// ErrPageDropped: a commit would write an archive page below the
	// volume's archive floor, or lower the floor; nothing was written.
	ErrPageDropped = errors.New("graft: archive page below the drop floor")
	// ErrReservedMeta: SetMeta of a key only the engine sets
	// (MetaArchiveLow; use DropArchiveBelow).
	ErrReservedMeta = errors.New("graft: reserved metadata key")
)

// DropArchiveBelow stages raising the volume's archive floor to n: the
// archive pages at offsets below n are dropped as of this commit (see
// MetaArchiveLow). It sets MetaArchiveLow in the commit; pages are not
// rewritten, so a drop costs one metadata version however many pages it
// drops. Commit fails with ErrPageDropped if n is below the floor at the
// base, or if the transaction also writes an archive page below the new
// floor. n may be at most MaxArchiveOffset+1 (else *PageRangeError).
func (t *Txn) DropArchiveBelow(n uint64) error {
	if n > MaxArchiveOffset+1 {
		return &PageRangeError{Archive: true, Index: n}
	}
	if err := t.setMeta(MetaArchiveLow, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return err
	}
	t.dropLow, t.dropping = n, true
	return nil
}

// checkArchiveFloor enforces the floor at the transaction's base: no archive
// page staged below it (or below a floor this commit raises), no lowering.
func (t *Txn) checkArchiveFloor(ctx context.Context) error {
	if !t.dropping && !t.archive {
		return nil
	}
	low, err := t.v.archiveLowAt(ctx, t.base)
	if err != nil {
		return err
	}
	if t.dropping {
		if t.dropLow < low {
			return fmt.Errorf("graft: volume %q: drop below archive offset %d, the floor is already %d: %w",
				t.v.name, t.dropLow, low, ErrPageDropped)
		}
		low = t.dropLow
	}
	if t.archive && t.minArchive-ArchiveBase < low {
		return fmt.Errorf("graft: volume %q: archive page %d is below the drop floor %d: %w",
			t.v.name, t.minArchive-ArchiveBase, low, ErrPageDropped)
	}
	return nil
}

// archiveLowAt reads the archive floor at lsn (0 if never set). lsn must be
// readable: at or above the horizon, or the horizon GC is working at.
func (v *Volume) archiveLowAt(ctx context.Context, lsn uint64) (uint64, error) {
	lo, hi := metaBounds(v.id, MetaArchiveLow, lsn)
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, fmt.Errorf("graft: volume %q: archive floor: %w", v.name, err)
	}
	var low uint64
	if it.SeekGE(lo) {
		val, err := it.ValueAndErr()
		if err == nil {
			low, err = decodeArchiveLow(val)
		}
		if err != nil {
			_ = it.Close()
			return 0, fmt.Errorf("graft: volume %q: archive floor at LSN %d: %w", v.name, lsn, err)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, fmt.Errorf("graft: volume %q: archive floor: %w", v.name, err)
	}
	return low, nil
}

// decodeArchiveLow decodes a stored metadata version of MetaArchiveLow.
func decodeArchiveLow(val []byte) (uint64, error) {
	p, err := versionedPayload("metadata version", val)
	if err != nil {
		return 0, err
	}
	if len(p) != 8 {
		return 0, corrupt("archive floor", "%d bytes, want 8", len(p))
	}
	return binary.BigEndian.Uint64(p), nil
}

// archiveLow returns the archive floor at the snapshot's LSN, read once and
// cached (a snapshot never changes).
func (s *Snapshot) archiveLow(ctx context.Context) (uint64, error) {
	if c := s.low.Load(); c != 0 {
		return c - 1, nil
	}
	low, err := s.v.archiveLowAt(ctx, s.lsn)
	if err != nil {
		return 0, err
	}
	if low <= MaxArchiveOffset { // low+1 fits; a full drop is not cached
		s.low.Store(low + 1)
	}
	return low, nil
}

// hidden returns the index range [lo, hi) of the archive pages dropped at
// the snapshot (empty when nothing was dropped).
func (s *Snapshot) hidden(ctx context.Context) (lo, hi uint64, err error) {
	low, err := s.archiveLow(ctx)
	if err != nil || low == 0 {
		return 0, 0, err
	}
	if low > MaxArchiveOffset {
		return ArchiveBase, 0, nil // everything from ArchiveBase up: hi wraps to 0 = 2^64
	}
	return ArchiveBase, ArchiveBase + low, nil
}

// isHidden reports whether page q lies in the hidden range [lo, hi), where
// hi = 0 stands for 2^64.
func isHidden(q, lo, hi uint64) bool {
	return q >= lo && lo != hi && (hi == 0 || q < hi)
}

// reclaimDropped stages, for a GC moving its horizon from prev to h, the
// deletion of every version of the archive pages dropped by the commits in
// (prev, h]: one range deletion from the floor at prev to the floor at h.
// It returns the pages and bytes that leave the volume's totals and counts
// the deleted versions. No commit after h can write there (the floor only
// rises), so every version of those pages is at or below h.
func (v *Volume) reclaimDropped(ctx context.Context, b *pebble.Batch, prev, h uint64, stats *GCStats) (pages, nbytes uint64, err error) {
	lowPrev, err := v.archiveLowAt(ctx, prev)
	if err != nil {
		return 0, 0, err
	}
	lowH, err := v.archiveLowAt(ctx, h)
	if err != nil {
		return 0, 0, err
	}
	if lowH <= lowPrev {
		return 0, 0, nil
	}
	lower := appendPageKey(nil, v.id, ArchiveBase+lowPrev, lsnMax)
	var upper []byte
	if lowH > MaxArchiveOffset {
		upper = binary.BigEndian.AppendUint64([]byte{kindPage}, v.id+1)
	} else {
		upper = appendPageKey(nil, v.id, ArchiveBase+lowH, lsnMax)
	}
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, 0, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	first, last := true, uint64(0)
	for ok := it.First(); ok; ok = it.Next() {
		q, _, ok := decodePageKey(it.Key(), v.id)
		if !ok {
			_ = it.Close()
			return 0, 0, fmt.Errorf("graft: GC of volume %q: %w", v.name, corrupt("page key", "%x", it.Key()))
		}
		stats.PageVersions++
		if !first && q == last {
			continue // an older version: the newest one was counted
		}
		first, last = false, q
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return 0, 0, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
		}
		_, n, _, _, err := pageValue(val)
		if err != nil {
			_ = it.Close()
			return 0, 0, fmt.Errorf("graft: GC of volume %q page %d: %w", v.name, q, err)
		}
		pages++
		nbytes += n
		stats.DroppedPages++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, 0, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	if err := b.DeleteRange(lower, upper, nil); err != nil {
		return 0, 0, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	return pages, nbytes, nil
}
