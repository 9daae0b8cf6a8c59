package archive

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// Read yields the retained archived records of vol (those retention has
// not dropped, see Retain) with ids in [from, to], oldest
// first or, with reverse, newest first, as of the volume's head when the
// iteration starts. It finds where the range starts by bisection over the
// page axis (pages are in id order: no second index) and then scans pages
// lazily, so memory stays constant however long the range. A page that does
// not decode, or breaks the id order, yields an error wrapping ErrCorrupt
// and ends the iteration.
func Read(ctx context.Context, vol *graft.Volume, from, to xid.ID, reverse bool) iter.Seq2[mq.Record, error] {
	return func(yield func(mq.Record, error) bool) {
		snap, err := vol.Snapshot(ctx)
		if err != nil {
			yield(mq.Record{}, fmt.Errorf("read archive %s: %w", vol.Name(), err))
			return
		}
		readSnapshot(ctx, snap, from, to, reverse, yield)
	}
}

// readSnapshot is Read at snap, which it closes.
func readSnapshot(ctx context.Context, snap *graft.Snapshot, from, to xid.ID, reverse bool, yield func(mq.Record, error) bool) {
	defer snap.Close()
	st, err := stateAt(ctx, snap)
	if err != nil {
		yield(mq.Record{}, err)
		return
	}
	readAt(ctx, snap, st, from, to, reverse, yield)
}

// ReadTime is Read over the records whose ids' milliseconds lie in
// [since, until] (both inclusive, to the millisecond).
func ReadTime(ctx context.Context, vol *graft.Volume, since, until time.Time, reverse bool) iter.Seq2[mq.Record, error] {
	return Read(ctx, vol, xid.FirstAt(since), xid.LastAt(until), reverse)
}

// pageID decodes page n of the archive at snap.
func pageID(ctx context.Context, snap *graft.Snapshot, n uint64) (xid.ID, error) {
	b, err := snap.Get(ctx, graft.ArchiveBase+n)
	if err != nil {
		if errors.Is(err, remote.ErrUnavailable) || errors.Is(err, remote.ErrNotFound) || errors.Is(err, graft.ErrNoRemote) {
			// The page is fine; the remote that holds it cannot serve it.
			return xid.ID{}, fmt.Errorf("archive %s: page %d: %w", snap.Volume().Name(), n, err)
		}
		return xid.ID{}, fmt.Errorf("archive %s: page %d: %w (%w)", snap.Volume().Name(), n, ErrCorrupt, err)
	}
	if v := pageVersionOf(b); v == pageVersion3 || v == pageVersion4 {
		p, err := decodeSpanPage(b)
		if err != nil {
			return xid.ID{}, fmt.Errorf("archive %s: page %d: %w", snap.Volume().Name(), n, err)
		}
		return p.id, nil
	}
	r, err := DecodeRecordPage(b)
	if err != nil {
		return xid.ID{}, fmt.Errorf("archive %s: page %d: %w", snap.Volume().Name(), n, err)
	}
	return r.ID, nil
}

// lowerBound returns the first page offset in [st.Low, st.Pages) whose id
// is ≥ id, or st.Pages if there is none: a bisection over the retained
// pages, O(log pages) seeks.
func lowerBound(ctx context.Context, snap *graft.Snapshot, st State, id xid.ID) (uint64, error) {
	lo, hi := st.Low, st.Pages
	for lo < hi {
		mid := lo + (hi-lo)/2
		got, err := pageID(ctx, snap, mid)
		if err != nil {
			return 0, err
		}
		if got.Less(id) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// readAt yields the retained records of [from, to] at snap, whose state is
// st: records on pages below st.Low were dropped by retention. It returns
// false if yield asked to stop.
func readAt(ctx context.Context, snap *graft.Snapshot, st State, from, to xid.ID, reverse bool,
	yield func(mq.Record, error) bool) bool {
	if st.Empty() || to.Less(from) || st.W.Less(from) {
		return true
	}
	to = xid.MinOf(to, st.W)
	lo, err := lowerBound(ctx, snap, st, from)
	if err != nil {
		return yield(mq.Record{}, err)
	}
	end := st.Pages // first page past the range
	if to.Less(st.W) {
		above, _ := to.Next() // to < W
		if end, err = lowerBound(ctx, snap, st, above); err != nil {
			return yield(mq.Record{}, err)
		}
	}
	if lo >= end {
		return true
	}
	var it *graft.PageIter
	next, step := lo, uint64(1)
	if reverse {
		it = snap.ScanReverse(ctx, graft.ArchiveBase+lo, graft.ArchiveBase+end-1)
		next, step = end-1, ^uint64(0) // step -1
	} else {
		it = snap.Scan(ctx, graft.ArchiveBase+lo, graft.ArchiveBase+end-1)
	}
	defer it.Close()
	name := snap.Volume().Name()
	var prev xid.ID
	span := spanAssembler{reverse: reverse}
	var dec pageDecoder
	// Continuations no head precedes: only at the start of the retained
	// pages, where retention dropped their head (span.go).
	orphans := lo == st.Low
	for i := uint64(0); it.Next(); {
		if it.Index() != graft.ArchiveBase+next {
			return yield(mq.Record{}, fmt.Errorf("archive %s: page %d missing (found %d): %w",
				name, next, it.Index()-graft.ArchiveBase, ErrCorrupt))
		}
		var r mq.Record
		var err error
		if v := pageVersionOf(it.Value()); v == pageVersion3 || v == pageVersion4 {
			var p spanPage
			var done bool
			if p, err = decodeSpanPage(it.Value()); err == nil {
				if !reverse && orphans && !span.active && v == pageVersion4 {
					next += step
					continue
				}
				r, done, err = span.add(p)
			}
			if err == nil && !done {
				next += step
				continue
			}
		} else if span.active {
			err = fmt.Errorf("a version-%d page inside the record %s spanning pages: %w", v, formatID(span.id), ErrCorrupt)
		} else {
			r, err = decodeRecordPage(it.Value(), &dec)
		}
		orphans = false
		if err != nil {
			return yield(mq.Record{}, fmt.Errorf("archive %s: page %d: %w", name, next, err))
		}
		if i++; i > 1 && ((!reverse && !prev.Less(r.ID)) || (reverse && !r.ID.Less(prev))) {
			return yield(mq.Record{}, fmt.Errorf("archive %s: page %d: id %s out of order after %s: %w",
				name, next, formatID(r.ID), formatID(prev), ErrCorrupt))
		}
		prev = r.ID
		if !yield(r, nil) {
			return false
		}
		next += step
	}
	if err := it.Close(); err != nil {
		return yield(mq.Record{}, fmt.Errorf("archive %s: scan: %w", name, err))
	}
	if span.active && (!reverse || lo != st.Low) {
		// Reverse, the continuations of a head retention dropped end the
		// scan at the first retained page; anywhere else a record is cut.
		return yield(mq.Record{}, fmt.Errorf("archive %s: the record %s spanning pages is cut at page %d: %w",
			name, formatID(span.id), next, ErrCorrupt))
	}
	if want := end - lo; (reverse && next != lo-1) || (!reverse && next != end) {
		return yield(mq.Record{}, fmt.Errorf("archive %s: %d pages expected in [%d, %d), scan ended at %d: %w",
			name, want, lo, end, next, ErrCorrupt))
	}
	return true
}
