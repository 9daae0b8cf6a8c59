package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// ErrRemoteLogExists: a cycle was about to start a new archive volume while
// the remote already holds a log of that name, and the stream has no seam
// cache that would make the log its own: the history of a deleted stream
// (or of a Redis that lost the seam). Nothing was folded or trimmed.
var ErrRemoteLogExists = errors.New("archive: the remote holds a log of this volume from another history")

// RemoteLogError reports a leftover remote log that a new archive volume
// would collide with.
type RemoteLogError struct {
	Queue, Stream string
	Volume        string
	Head          uint64 // the remote log's head LSN
}

// Error describes the collision and the two ways out.
func (e *RemoteLogError) Error() string {
	return fmt.Sprintf("archive %s/%s: the remote holds a log of %s (head LSN %d) but the stream has no seam cache, "+
		"so that log is not this stream's history (it was deleted, or Redis lost the seam cache); nothing was folded: "+
		"delete the old log with `echostore archive delete %s %s --yes-delete-history` and the same --remote, "+
		"or restore the seam cache if that history is this stream's",
		e.Queue, e.Stream, e.Volume, e.Head, e.Queue, e.Stream)
}

// Unwrap returns ErrRemoteLogExists.
func (e *RemoteLogError) Unwrap() error { return ErrRemoteLogExists }

// DeleteRemoteLog deletes every object of volume in rs: the commit objects
// newest first (so that what is left at any moment is a shorter log, never
// one with holes), the checkpoint markers and anything else under
// volumes/<volume>/, then the segments under segments/<volume>/. It returns
// how many objects it deleted. Deleting a volume with no objects is not an
// error. Other volumes' objects are not touched (every prefix ends in '/').
func DeleteRemoteLog(ctx context.Context, rs remote.Store, volume string) (int, error) {
	n := 0
	for _, prefix := range []string{
		remote.LogPrefix(volume), // ascending keys: inverted LSNs, newest first
		remote.CheckpointPrefix(volume),
		"volumes/" + volume + "/",
		remote.SegmentPrefix(volume),
	} {
		objs, err := rs.List(ctx, prefix, 0)
		if err != nil {
			return n, fmt.Errorf("delete remote log of %s: list %s: %w", volume, prefix, err)
		}
		for _, o := range objs {
			if err := rs.Delete(ctx, o.Key); err != nil {
				return n, fmt.Errorf("delete remote log of %s: %s: %w", volume, o.Key, err)
			}
			n++
		}
	}
	return n, nil
}

// openVolume returns the archive volume vname of q/s for a cycle that holds
// the stream's lease, created if missing. With a remote attached to the
// store it first reads the remote head (one LIST): when the remote is ahead
// of the local copy (another process folded and pushed, and this one takes
// over its lease) it pulls, so that the fold's base is the remote's
// history; when the local copy is missing or empty and the remote has a log
// but the stream has no seam cache (hasSeam), it refuses with a
// *RemoteLogError. A local copy with unpushed commits and a remote that
// moved on fails the pull with graft's *DivergedError. A copy whose last
// push left a pending remote commit (a crash lost the sync point that
// follows the PUT) is pulled too: the pull settles it first (the remote
// holding the same bytes at that LSN means it landed).
//
// Under TrimAfterRemote such a copy is one whose folds lost the race (the
// process died, or lost its lease, between its folds and its push, and
// another took the stream over): dropStaleFolds drops them and pulls when
// nothing they hold would be lost.
//
// The LIST is skipped when token, the cycle's lease, is the one right
// after the lease of this archiver's last cycle of the stream, which read
// the remote head or skipped it so, and no cycle of the stream failed
// since (a failed push may have met another process's late one): fencing tokens grow by one per lease taken, so no other
// process cycled (folded, pushed) the stream in between, and the remote
// head is still at most the volume's remote LSN (only this process's own
// pushes moved it since). A quiet stream cycled on every beat therefore
// costs the remote no request.
func (a *Archiver) openVolume(ctx context.Context, ref names.StreamRef, seam Seam, hasSeam bool, token int64) (*graft.Volume, error) {
	store := a.opts.Store
	vname := ref.Volume().String()
	vol, err := store.Volume(ctx, ref.Volume())
	if errors.Is(err, graft.ErrVolumeNotFound) {
		vol, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("archive cycle %s: %w", ref, err)
	}
	if rs := store.Remote(); rs != nil && !a.headKnown(ref, vol, token) {
		l, err := remote.NewLog(rs, ref.Volume())
		if err != nil {
			return nil, fmt.Errorf("archive cycle %s: %w", ref, err)
		}
		head, err := l.Head(ctx)
		if err != nil {
			return nil, fmt.Errorf("archive cycle %s: remote head of %s: %w", ref, vname, err)
		}
		if head > 0 && (vol == nil || vol.Head() == 0) && !hasSeam {
			return nil, &RemoteLogError{Queue: ref.Queue().String(), Stream: ref.Stream().String(), Volume: vname, Head: head}
		}
		if head > 0 && (vol == nil || vol.Info().RemoteLSN < head) {
			if vol == nil {
				if vol, err = store.CreateVolume(ctx, ref.Volume()); err != nil {
					return nil, fmt.Errorf("archive cycle %s: %w", ref, err)
				}
			}
			from := vol.Info().RemoteLSN
			_, err := vol.Pull(ctx, nil)
			var de *graft.DivergedError
			if errors.As(err, &de) && a.opts.TrimAfter == TrimAfterRemote && hasSeam {
				err = a.dropStaleFolds(ctx, ref, vol, seam, err)
			}
			if err != nil {
				return nil, fmt.Errorf("archive cycle %s: pull %s from the remote (head %d) before folding: %w",
					ref, vname, head, err)
			}
			a.log.Info("archive volume pulled before the cycle", ref.LogAttr(), "volume", vname,
				"remote_from", from, "remote_head", head)
		}
		a.headChecked(ref, token)
	}
	if vol == nil {
		if vol, err = store.CreateVolume(ctx, ref.Volume()); err != nil {
			return nil, fmt.Errorf("archive cycle %s: %w", ref, err)
		}
	}
	return vol, nil
}

// headKnown reports whether the cycle of lease token may skip reading the
// remote head of ref's volume vol: this archiver read it in the cycle of
// the lease right before token, and vol has commits (openVolume). It
// records token as the new last one either way.
func (a *Archiver) headKnown(ref names.StreamRef, vol *graft.Volume, token int64) bool {
	a.headMu.Lock()
	defer a.headMu.Unlock()
	last, ok := a.checked[ref]
	if !ok || token != last+1 || token <= 0 || vol == nil || vol.Head() == 0 {
		return false
	}
	a.checked[ref] = token
	return true
}

// forgetHead makes the next cycle of ref read the remote head, whatever
// its lease (after a failed cycle, see Cycle).
func (a *Archiver) forgetHead(ref names.StreamRef) {
	a.headMu.Lock()
	defer a.headMu.Unlock()
	delete(a.checked, ref)
}

// headChecked records that the cycle of lease token read the remote head
// of ref's volume and brought the volume up to it.
func (a *Archiver) headChecked(ref names.StreamRef, token int64) {
	a.headMu.Lock()
	defer a.headMu.Unlock()
	if a.checked == nil {
		a.checked = map[names.StreamRef]int64{}
	}
	a.checked[ref] = token
}

// dropStaleFolds is the way out of a pull that failed with diverged (err)
// under TrimAfterRemote: the local copy of ref's volume holds folds that
// were never pushed, and another process took the stream over and pushed
// its own. With TrimAfterRemote a cycle trims only what a push landed, and
// the seam cache names a landed push, so every record those folds hold is
// either at or below the seam cache's W (the remote has it) or still in
// the live stream (the next fold takes it again). It counts what the drop
// would lose (coveredCounter: records above the cache and below the
// stream's first entry, which only another client's trim removes) and
// drops the unpushed commits only when that is none (graft's guarded
// reset, which pulls after the drop). Otherwise it returns err joined with the reset's
// refusal: the copy stays as it was, for an operator's `volume reset`.
func (a *Archiver) dropStaleFolds(ctx context.Context, ref names.StreamRef, vol *graft.Volume, seam Seam, err error) error {
	dropped, rerr := vol.ResetWith(ctx, graft.ResetOptions{Count: coveredCounter(a.opts.Live, seam.W)})
	switch {
	case rerr != nil && dropped == 0:
		return errors.Join(err, fmt.Errorf("the unpushed folds were kept: %w", rerr))
	case rerr != nil:
		return fmt.Errorf("dropped %d unpushed local commits, then: %w", dropped, rerr)
	}
	a.log.Warn("archive volume diverged: dropped local folds that were never pushed (another node took the stream over and pushed); the remote and the live stream hold every record they held",
		ref.LogAttr(), "volume", ref.Volume().String(), "dropped_commits", dropped, "seam", formatID(seam.W))
	return nil
}
