package graft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrWouldDiscard: a reset to the remote would drop local commits that hold
// acknowledged records found nowhere else (not in the remote, and, for an
// archive, no longer in the live stream). A *DiscardError says how many and
// what to do; the reset goes on only when the caller repeats that count
// (ResetOptions.Discard, `echostore volume reset V --to-remote --discard N`).
var ErrWouldDiscard = errors.New("graft: the reset would discard acknowledged records")

// Unpushed describes the local commits a reset to the remote would drop:
// those above the volume's sync point. A DiscardCounter reads it.
type Unpushed struct {
	Volume  *Volume
	SyncLSN uint64 // the local LSN the reset goes back to (the sync point)
	Head    uint64 // the local head: commits (SyncLSN, Head] are dropped
	// Wiped: GC collected the commit records of that range (a volume never
	// pushed whose GC passed LSN 0): the reset empties the volume, and Pages
	// lists every page present at Head.
	Wiped bool
	// Pages are the indexes of the pages those commits wrote that are still
	// present at Head, ascending, each once.
	Pages []uint64
}

// A DiscardCounter counts the acknowledged records among the unpushed
// commits u that exist nowhere else, and says what they are (for the error:
// "archived records no longer in the live stream"). It may open snapshots
// of u.Volume and must close them before it returns.
type DiscardCounter func(ctx context.Context, u *Unpushed) (n uint64, what string, err error)

// ResetOptions guard Volume.ResetWith.
type ResetOptions struct {
	// Count counts what the reset would lose (nil: nothing is counted, as
	// for a volume whose pages are not acknowledged records).
	Count DiscardCounter
	// Discard is the count the caller agrees to lose. The reset goes on only
	// if it equals what Count returns (0 when nothing would be lost);
	// otherwise it fails with a *DiscardError and drops nothing.
	Discard uint64
}

// DiscardError reports a reset refused because it would drop acknowledged
// records that exist nowhere else.
type DiscardError struct {
	Volume  string
	Count   uint64 // the records the reset would discard
	What    string // what they are
	Given   uint64 // the count the caller confirmed (ResetOptions.Discard)
	SyncLSN uint64 // the local LSN the reset would go back to
	Head    uint64 // the local head
}

// Error says how many records, where they are and what to do.
func (e *DiscardError) Error() string {
	if e.Count == 0 {
		return fmt.Sprintf("graft: reset volume %q: --discard %d was given, but the reset would discard no acknowledged record now; run it again without --discard",
			e.Volume, e.Given)
	}
	msg := fmt.Sprintf("graft: reset volume %q refused: it would discard %d %s, held only by local commits %d..%d that were never pushed",
		e.Volume, e.Count, e.What, e.SyncLSN+1, e.Head)
	if e.Given != 0 {
		msg += fmt.Sprintf(" (--discard %d does not match)", e.Given)
	}
	return msg + fmt.Sprintf("; push them first (`echostore volume push %s`), or read them out (if the remote moved on, they exist only here), or, to discard them for good, repeat the count: `echostore volume reset %s --to-remote --discard %d`",
		e.Volume, e.Volume, e.Count)
}

// Unwrap returns ErrWouldDiscard.
func (e *DiscardError) Unwrap() error { return ErrWouldDiscard }

// unpushed describes the commits above the sync point of state st.
func (v *Volume) unpushed(ctx context.Context, st *volumeRecord) (*Unpushed, error) {
	u := &Unpushed{Volume: v, SyncLSN: st.SyncLocal, Head: st.Head}
	if st.Head == st.SyncLocal {
		return u, nil
	}
	commits, err := v.Commits(ctx, st.SyncLocal+1, st.Head)
	u.Wiped = errors.Is(err, ErrSnapshotGone) || st.Horizon > st.SyncLocal
	if err != nil && !u.Wiped {
		return nil, err
	}
	snap, err := v.SnapshotAt(ctx, st.Head)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	if u.Wiped {
		it := snap.Scan(ctx, 0, ^uint64(0))
		for it.Next() {
			u.Pages = append(u.Pages, it.Index())
		}
		return u, it.Close()
	}
	set := map[uint64]bool{}
	for _, c := range commits {
		for _, p := range c.Pages {
			set[p] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(set)) {
		_, err := snap.Get(ctx, p)
		if errors.Is(err, ErrNotFound) {
			continue // dropped below the archive floor by the head
		}
		if err != nil {
			return nil, err
		}
		u.Pages = append(u.Pages, p)
	}
	return u, nil
}

// ResetWith is Reset to the remote, guarded: before it drops anything it
// counts, with opts.Count, the acknowledged records that only the unpushed
// commits hold, and refuses with a *DiscardError (ErrWouldDiscard), dropping
// nothing, unless opts.Discard repeats that count. The count and the drop
// see the same commits: a commit landing in between fails the reset with
// ErrConflict (try again). Like Reset it first checks that the attached
// remote is the volume's (ErrRemoteMismatch) and settles a pending push.
func (v *Volume) ResetWith(ctx context.Context, opts ResetOptions) (dropped uint64, err error) {
	if err := v.s.checkWritable(); err != nil {
		return 0, fmt.Errorf("graft: reset volume %q: %w", v.name, err)
	}
	l, err := v.needLog("reset")
	if err != nil {
		return 0, err
	}
	v.pushMu.Lock()
	dropped, err = v.resetLocked(ctx, l, opts)
	v.pushMu.Unlock()
	if err != nil {
		return 0, err
	}
	if _, err := v.Pull(ctx, nil); err != nil {
		return dropped, err
	}
	return dropped, nil
}
