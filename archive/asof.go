package archive

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// ErrAsOfGone: an as-of read asked for an LSN (or a time) older than the
// oldest state the volume still keeps: its GC horizon passed it, and what
// the archive held then is no longer readable (graft.ErrSnapshotGone).
var ErrAsOfGone = errors.New("archive: the archive's state at that point is no longer kept")

// ErrAsOfFuture: an as-of read asked for an LSN above the volume's head.
var ErrAsOfFuture = errors.New("archive: the archive has no commit at that LSN yet")

// AsOfError says which state an as-of read asked for and what the volume
// keeps: its LSNs from Horizon to Head.
type AsOfError struct {
	Volume  string
	LSN     uint64    // the LSN asked for (0 with a time)
	Time    time.Time // the time asked for (zero with an LSN)
	Horizon uint64    // the oldest LSN still readable
	Head    uint64    // the newest commit
	Err     error     // ErrAsOfGone or ErrAsOfFuture
}

// Error describes the state asked for and the states kept.
func (e *AsOfError) Error() string {
	at := e.at()
	if errors.Is(e.Err, ErrAsOfFuture) {
		return fmt.Sprintf("archive %s as of %s: its newest commit is LSN %d", e.Volume, at, e.Head)
	}
	return fmt.Sprintf("archive %s as of %s: no longer kept; the volume keeps LSNs %d to %d (a node's history setting keeps its past states longer)",
		e.Volume, at, e.Horizon, e.Head)
}

// at names the state asked for: its LSN or its time.
func (e *AsOfError) at() string {
	if !e.Time.IsZero() {
		return e.Time.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("LSN %d", e.LSN)
}

// Unwrap returns ErrAsOfGone or ErrAsOfFuture.
func (e *AsOfError) Unwrap() error { return e.Err }

// ReadAsOf is Read as of the volume's commit lsn rather than its head: the
// records the archive held then with ids in [from, to], those retention
// has dropped since included, as long as the volume still keeps that
// state (lsn at or above its GC horizon; below it the error wraps
// ErrAsOfGone, above its head ErrAsOfFuture). LSN 0 is the empty volume
// before its first commit. The state is pinned against GC while the
// iteration runs.
func ReadAsOf(ctx context.Context, vol *graft.Volume, lsn uint64, from, to xid.ID, reverse bool) iter.Seq2[mq.Record, error] {
	return func(yield func(mq.Record, error) bool) {
		snap, err := vol.SnapshotAt(ctx, lsn)
		if err != nil {
			yield(mq.Record{}, asOfError(vol, lsn, time.Time{}, err))
			return
		}
		readSnapshot(ctx, snap, from, to, reverse, yield)
	}
}

// asOfError types err, a failed snapshot or commit read at lsn (or t), as
// an AsOfError when the state is gone or in the future.
func asOfError(vol *graft.Volume, lsn uint64, t time.Time, err error) error {
	in := vol.Info()
	e := &AsOfError{Volume: vol.Name().String(), LSN: lsn, Time: t, Horizon: in.Horizon, Head: in.LocalLSN}
	switch {
	case errors.Is(err, graft.ErrSnapshotGone):
		e.Err = ErrAsOfGone
	case errors.Is(err, graft.ErrFutureLSN):
		e.Err = ErrAsOfFuture
	default:
		return fmt.Errorf("read archive %s as of %s: %w", vol.Name(), e.at(), err)
	}
	return e
}

// LSNAt returns the newest LSN of vol committed at or before t
// (graft.Volume.LSNAt), 0 when t is before the first commit; a t older
// than the oldest commit the volume keeps fails wrapping ErrAsOfGone.
func LSNAt(ctx context.Context, vol *graft.Volume, t time.Time) (uint64, error) {
	lsn, err := vol.LSNAt(ctx, t)
	if err != nil {
		return 0, asOfError(vol, 0, t, err)
	}
	return lsn, nil
}
