package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// DeleteResult says what Delete removed.
type DeleteResult struct {
	// Volume is the archive volume's name (archive.Q.S); VolumeDropped is
	// false when the data dir had no such volume.
	Volume        string
	VolumeDropped bool
	// LiveEntries is the number of entries the live stream held.
	LiveEntries int64
	// RemoteDeleted is true when the store had a remote attached and the
	// volume's objects in it were deleted (RemoteObjects of them); false
	// means no remote was attached and a remote log, if any, is kept.
	RemoteDeleted bool
	RemoteObjects int
	// Token is the lease token the delete ran under.
	Token int64
}

// Delete deletes the archived stream s of queue q and its history in this
// data dir: the local archive volume (graft.Store.DropVolume), then its log
// in the remote attached to the store, if any (DeleteRemoteLog), then, in one
// script fenced by the stream's lease, the live stream, its seam cache, its
// membership of the archived set and the lease (the lease's token counter
// is kept, so tokens keep increasing). It takes the lease first, waiting
// like a cycle (ErrLeaseHeld beyond LeaseWait), so no cycle runs beside it.
//
// The volume goes first: if the Redis step then fails, the seam cache is
// left without a volume and reads refuse it (ErrNoVolume) rather than serve
// the live tail alone; run Delete again. A drop that graft refuses (open
// snapshots, a pending push) leaves everything in place. Without a remote
// attached the remote log is kept (a later cycle with that remote refuses to
// start a new volume over it: ErrRemoteLogExists); other nodes' local
// copies are not deleted.
//
// A local volume that belongs to another stream (MetaOwner; names with '.'
// share volume names), or with a remote attached and no owned local copy
// the remote log's, is refused with an *OwnerError before anything is
// deleted.
func (a *Archiver) Delete(ctx context.Context, ref names.StreamRef) (res DeleteResult, err error) {
	vname := ref.Volume().String()
	res.Volume = vname
	if err := a.checkLocalOwner(ctx, ref); err != nil {
		return res, err
	}
	live := a.opts.Live
	// A key that holds another type than a stream is refused before
	// anything is taken or dropped (mq.ErrWrongType).
	if _, err := live.Info(ctx, ref); err != nil {
		return res, fmt.Errorf("archive delete %s: %w; nothing was deleted", ref, err)
	}
	token, err := a.acquire(ctx, ref)
	if err != nil {
		return res, err
	}
	res.Token = token
	deleted := false
	defer func() {
		if deleted {
			return // the delete removed the lease
		}
		if _, rerr := releaseLease(context.WithoutCancel(ctx), live, ref, token); rerr != nil {
			a.log.Warn("archive lease not released; it expires by itself", ref.LogAttr(), "err", rerr)
		}
	}()
	// Again under the lease: a cycle of the other stream may have folded
	// first in between. A data dir without an owned copy asks the remote
	// log, which this delete would otherwise remove.
	if err := a.checkLocalOwner(ctx, ref); err != nil {
		return res, err
	}
	if rs := a.opts.Store.Remote(); rs != nil {
		if err := a.checkRemoteOwner(ctx, rs, ref); err != nil {
			return res, err
		}
	}
	switch err := a.opts.Store.DropVolume(ctx, ref.Volume()); {
	case err == nil:
		res.VolumeDropped = true
	case !errors.Is(err, graft.ErrVolumeNotFound):
		return res, fmt.Errorf("archive delete %s: %w; nothing was deleted", ref, err)
	}
	if rs := a.opts.Store.Remote(); rs != nil {
		n, err := DeleteRemoteLog(ctx, rs, vname)
		res.RemoteObjects = n
		if err != nil {
			return res, fmt.Errorf("archive delete %s: the local volume is gone, the remote log only in part: %w; run the delete again", ref, err)
		}
		res.RemoteDeleted = true
	}
	if a.afterDrop != nil {
		a.afterDrop(token)
	}
	// Renew before the delete: the drop may have taken a while.
	if _, err := takeLease(ctx, live, ref, token, a.opts.LeaseTTL); err != nil {
		return res, fmt.Errorf("archive delete %s: %w", ref, err)
	}
	n, err := deleteLiveStream(ctx, live, ref, token)
	if err != nil {
		return res, fmt.Errorf("archive delete %s: %w", ref, err)
	}
	deleted = true
	res.LiveEntries = n
	a.log.Info("archived stream deleted", ref.LogAttr(), "volume", vname,
		"volume_dropped", res.VolumeDropped, "remote_objects", res.RemoteObjects, "remote_deleted", res.RemoteDeleted, "live_entries", n)
	return res, nil
}

// checkRemoteOwner refuses, with an *OwnerError, a delete of want when
// the store holds no copy of its archive volume (want.Volume()) that
// records an owner and the remote log of that volume records another
// owner.
func (a *Archiver) checkRemoteOwner(ctx context.Context, rs remote.Store, want names.StreamRef) error {
	vname := want.Volume().String()
	if vol, err := a.opts.Store.Volume(ctx, want.Volume()); err == nil {
		if _, ok, err := VolumeOwner(ctx, vol); err != nil || ok {
			return err // an owner here was checked by checkLocalOwner
		}
	} else if !errors.Is(err, graft.ErrVolumeNotFound) {
		return fmt.Errorf("archive %s: %w", want, err)
	}
	o, ok, err := remoteOwner(ctx, rs, want.Volume())
	if err != nil {
		return fmt.Errorf("archive delete %s: %w; nothing was deleted", want, err)
	}
	if ok && o != want {
		return newOwnerError(want, vname, o)
	}
	return nil
}
