package graft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// GCStats reports what one GC did.
type GCStats struct {
	Horizon      uint64 // the volume's horizon after GC: the lowest readable LSN
	PageVersions int    // page versions deleted
	MetaVersions int    // metadata versions deleted
	Commits      int    // commit records deleted
	DroppedPages int    // archive pages dropped below the floor whose versions were deleted
}

// GC drops what no reader can see any more. Its horizon is
//
//	H = min(head, keep-from, LSN of every open snapshot)
//
// For each page and metadata key, GC keeps the newest version at or below H
// and every version above H, and deletes the rest; it deletes the commit
// records below H; it records H as the volume's horizon, so that a read at an
// LSN below H fails with ErrSnapshotGone instead of returning other bytes.
// Reads at H or above return exactly what they returned before.
//
// Archive pages dropped by a commit at or below H (Txn.DropArchiveBelow)
// lose every version, by one range deletion, and leave the volume's page
// and byte totals.
//
// GC only looks at what changed since the previous horizon (the commit
// records in between), so its cost follows the commits it collects, not the
// volume's size. It runs beside commits and reads; its deletions and the new
// horizon land in one batch. The freed space returns to the filesystem as
// Pebble compacts (Store.Compact forces it).
func (v *Volume) GC(ctx context.Context) (GCStats, error) {
	if err := v.s.checkWritable(); err != nil {
		return GCStats{}, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	v.gcMu.Lock()
	defer v.gcMu.Unlock()
	if err := v.checkDropped("GC of"); err != nil {
		return GCStats{}, err
	}

	// The history (Options.History) holds H at the newest commit older
	// than it; commits only add LSNs above, so the bound read before the
	// pins are counted still holds.
	st0 := v.state.Load()
	keep, err := v.historyBound(ctx, max(st0.Horizon, v.floorNow()), st0.Head, v.s.now())
	if err != nil {
		return GCStats{}, fmt.Errorf("graft: GC of volume %q: history: %w", v.name, err)
	}

	// Choose H and publish it as the floor: from here on no snapshot below it
	// can be opened, and the pins that hold it back are all counted.
	v.pinMu.Lock()
	st := v.state.Load()
	h := min(st.Head, st.KeepFrom, keep)
	for l := range v.pins {
		h = min(h, l)
	}
	prev := st.Horizon
	if h <= prev {
		floor := v.floor
		v.pinMu.Unlock()
		return GCStats{Horizon: floor}, nil
	}
	v.floor = max(v.floor, h)
	v.pinMu.Unlock()

	stats := GCStats{Horizon: h}
	b := v.s.db.NewBatch()
	defer b.Close()
	lastPage, lastMeta, err := v.changedSince(ctx, prev, h, b, &stats)
	if err != nil {
		return GCStats{}, err
	}
	var dropPages, dropBytes uint64
	if _, ok := lastMeta[MetaArchiveLow]; ok {
		if dropPages, dropBytes, err = v.reclaimDropped(ctx, b, prev, h, &stats); err != nil {
			return GCStats{}, err
		}
		if dropPages > 0 { // their older versions go with the range
			low, err := v.archiveLowAt(ctx, h)
			if err != nil {
				return GCStats{}, err
			}
			for p := range lastPage {
				if p >= ArchiveBase && p-ArchiveBase < low {
					delete(lastPage, p)
				}
			}
		}
	}
	if err := v.deleteOlder(ctx, b, lastPage, lastMeta, &stats); err != nil {
		return GCStats{}, err
	}

	v.commitMu.Lock()
	defer v.commitMu.Unlock()
	rec := *v.state.Load()
	rec.Horizon = h
	rec.Pages -= dropPages
	rec.Bytes -= dropBytes
	// NoSync: a GC lost to a crash leaves garbage and the old horizon, both
	// harmless; the next Synced commit makes it durable anyway.
	if err := errors.Join(b.Set(v.key, encodeVolumeRecord(rec), nil), v.s.commit(b, pebble.NoSync)); err != nil {
		return GCStats{}, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	v.state.Store(&rec)
	return stats, nil
}

// changedSince reads the commit records of LSNs prev+1..h and returns, for
// every page and metadata key they wrote, the newest LSN that wrote it. It
// stages the deletion of the commit records prev..h-1.
func (v *Volume) changedSince(ctx context.Context, prev, h uint64, b *pebble.Batch, stats *GCStats) (map[uint64]uint64, map[string]uint64, error) {
	lower := appendCommitKey(nil, v.id, prev)
	upper := appendCommitKey(nil, v.id, h+1)
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, nil, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	lastPage := make(map[uint64]uint64)
	lastMeta := make(map[string]uint64)
	fail := func(err error) (map[uint64]uint64, map[string]uint64, error) {
		_ = it.Close()
		return nil, nil, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		lsn, ok := decodeCommitKey(it.Key(), v.id)
		if !ok {
			return fail(corrupt("commit key", "%x", it.Key()))
		}
		if lsn < h {
			if err := b.Delete(it.Key(), nil); err != nil {
				return fail(err)
			}
			stats.Commits++
		}
		if lsn == prev {
			continue // its pages were settled by the previous GC
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return fail(err)
		}
		c, err := decodeCommitRecord(lsn, val)
		if err != nil {
			return fail(err)
		}
		for _, p := range c.Pages {
			lastPage[p] = lsn
		}
		for _, m := range c.Meta {
			lastMeta[m.Key] = lsn
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, nil, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	return lastPage, lastMeta, nil
}

// deleteOlder stages the deletion of every version older than the newest one
// at or below the horizon, for the pages and metadata keys given (with the
// LSN of that newest version). Other pages have at most one version at or
// below the previous horizon, which stays the newest.
func (v *Volume) deleteOlder(ctx context.Context, b *pebble.Batch, lastPage map[uint64]uint64, lastMeta map[string]uint64, stats *GCStats) error {
	if len(lastPage) > 0 {
		pages := slices.Sorted(maps.Keys(lastPage))
		lower, upper := pageBounds(v.id, pages[0], pages[len(pages)-1])
		n, err := v.deleteVersions(ctx, b, lower, upper, len(pages), func(k int, key []byte) []byte {
			p := pages[k]
			return appendPageKey(key, v.id, p, lastPage[p]-1) // first key after version lastPage[p]
		})
		stats.PageVersions += n
		if err != nil {
			return err
		}
	}
	if len(lastMeta) > 0 {
		keys := slices.Sorted(maps.Keys(lastMeta))
		lower := binary.BigEndian.AppendUint64([]byte{kindMeta}, v.id)
		upper := binary.BigEndian.AppendUint64([]byte{kindMeta}, v.id+1)
		n, err := v.deleteVersions(ctx, b, lower, upper, len(keys), func(k int, key []byte) []byte {
			return appendMetaKey(key, v.id, keys[k], lastMeta[keys[k]]-1)
		})
		stats.MetaVersions += n
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteVersions, for each of n items, seeks to seekKey(k) (a versioned key)
// and deletes the keys from there on that differ from it only in the
// trailing inverted LSN: the older versions of the same page or key.
func (v *Volume) deleteVersions(ctx context.Context, b *pebble.Batch, lower, upper []byte, n int,
	seekKey func(k int, key []byte) []byte) (int, error) {
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	deleted := 0
	var kb []byte
	for k := 0; k < n; k++ {
		if k&1023 == 0 {
			if err := ctx.Err(); err != nil {
				_ = it.Close()
				return deleted, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
			}
		}
		kb = seekKey(k, kb[:0])
		for ok := it.SeekGE(kb); ok && sameVersioned(kb, it.Key()); ok = it.Next() {
			if err := b.Delete(it.Key(), nil); err != nil {
				_ = it.Close()
				return deleted, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
			}
			deleted++
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return deleted, fmt.Errorf("graft: GC of volume %q: %w", v.name, err)
	}
	return deleted, nil
}

// sameVersioned reports whether versioned keys a and b differ at most in
// their trailing 8-byte inverted LSN.
func sameVersioned(a, b []byte) bool {
	return len(a) == len(b) && len(a) >= 8 && bytes.Equal(a[:len(a)-8], b[:len(b)-8])
}
