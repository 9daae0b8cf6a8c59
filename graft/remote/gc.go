package remote

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/echostore/echostore/api"
)

// GCOptions is api.GCOptions: the checkpoints to keep, the age that
// protects young segments, the grace of the horizon, whether to trim the
// log, and the clock of a remote garbage collection.
type GCOptions = api.GCOptions

// GCResult reports what GC did.
type GCResult struct {
	// Horizon is the LSN of the oldest retained checkpoint (0: no
	// checkpoint, nothing collected).
	Horizon         uint64
	SegmentsKept    int
	SegmentsDeleted int
	LogTrimmed      int
	MarkersDeleted  int
	// SegmentBytes is the size of the segments deleted, LogBytes what the
	// trimmed commits gave back (each commit's size less its tombstone's),
	// MarkerBytes the size of the markers deleted.
	SegmentBytes int64
	LogBytes     int64
	MarkerBytes  int64
}

// Objects returns the number of objects GC deleted or replaced by
// tombstones.
func (r GCResult) Objects() int { return r.SegmentsDeleted + r.LogTrimmed + r.MarkersDeleted }

// Bytes returns the bytes GC gave back to the store.
func (r GCResult) Bytes() int64 { return r.SegmentBytes + r.LogBytes + r.MarkerBytes }

// GC deletes the volume's segments that no commit at or after the horizon
// (the oldest retained checkpoint) references, if older than MinAge, and
// with TrimLog the log entries below the horizon and the markers older
// than it. With Grace, the horizon is a checkpoint at least Grace old. A
// checkpoint references every live page, so every page reachable at any
// LSN from the horizon on stays readable. After TrimLog, a follower whose
// sync point is below the horizon gets ErrTrimmed from Since and must
// start again from a checkpoint; one at or above it carries on. Nothing in
// this package calls GC; serve's background GC (the root package's GC
// loop) and `volume gc` do.
func (l *Log) GC(ctx context.Context, opts GCOptions) (GCResult, error) {
	var res GCResult
	keep := max(opts.KeepCheckpoints, 1)
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	markers, err := l.store.List(ctx, CheckpointPrefix(l.volume), 0)
	if err != nil {
		return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
	}
	if len(markers) == 0 {
		return res, nil
	}
	at := min(keep, len(markers)) - 1
	if opts.Grace > 0 {
		cutoff := now().Add(-opts.Grace)
		aged := slices.IndexFunc(markers, func(m ObjectInfo) bool { return !m.ModTime.After(cutoff) })
		if aged < 0 {
			return res, nil // no checkpoint is old enough to be the horizon yet
		}
		at = max(at, aged)
	}
	hz := markers[at]
	horizon, hash, err := ParseCheckpointKey(l.volume, hz.Key)
	if err != nil {
		return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
	}
	cp, err := l.Read(ctx, horizon)
	if err != nil {
		return res, fmt.Errorf("volume %s: gc: horizon: %w", l.volume, err)
	}
	if cp.Hash != hash || !cp.Commit.Checkpoint {
		return res, fmt.Errorf("volume %s: gc: marker %s does not match its commit: %w", l.volume, hz.Key, ErrCorrupt)
	}
	res.Horizon = horizon
	head, err := l.Head(ctx)
	if err != nil {
		return res, err
	}
	live := map[string]bool{}
	for lsn := horizon; lsn <= head; lsn++ {
		e, err := l.Read(ctx, lsn)
		if err != nil {
			return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
		}
		for _, s := range e.Commit.Segments {
			live[s.Key] = true
		}
	}
	segs, err := l.store.List(ctx, SegmentPrefix(l.volume), 0)
	if err != nil {
		return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
	}
	cutoff := now().Add(-opts.MinAge)
	for _, s := range segs {
		if live[s.Key] || s.ModTime.After(cutoff) {
			res.SegmentsKept++
			continue
		}
		if err := l.store.Delete(ctx, s.Key); err != nil {
			return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
		}
		res.SegmentsDeleted++
		res.SegmentBytes += s.Size
	}
	if !opts.TrimLog {
		return res, nil
	}
	// Oldest first, so that a crash leaves the tombstones a prefix.
	logs, err := l.store.List(ctx, LogPrefix(l.volume), 0)
	if err != nil {
		return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
	}
	tomb := tombstoneSize(l.volume)
	for i := len(logs) - 1; i >= 0; i-- {
		lsn, err := ParseLogKey(l.volume, logs[i].Key)
		if err != nil {
			return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
		}
		if lsn >= horizon {
			break
		}
		if logs[i].Size == tomb {
			continue // trimmed before
		}
		if err := l.store.Put(ctx, logs[i].Key, encodeTombstone(l.volume, lsn)); err != nil {
			return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
		}
		res.LogTrimmed++
		res.LogBytes += max(logs[i].Size-tomb, 0)
	}
	for _, m := range markers[at+1:] {
		if err := l.store.Delete(ctx, m.Key); err != nil {
			return res, fmt.Errorf("volume %s: gc: %w", l.volume, err)
		}
		res.MarkersDeleted++
		res.MarkerBytes += m.Size
	}
	return res, nil
}
