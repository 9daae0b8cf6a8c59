package echostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// Volumes lists the volumes of the data dir, by name.
func (n *Node) Volumes(ctx context.Context) (VolumeList, error) {
	if err := n.needData("volumes"); err != nil {
		return VolumeList{}, err
	}
	infos, err := n.store.Volumes(ctx)
	if err != nil {
		return VolumeList{}, err
	}
	out := VolumeList{Volumes: make([]VolumeStatus, 0, len(infos))}
	now := time.Now()
	for _, in := range infos {
		st := VolumeStatus{GraftInfo: in}
		if vol, err := n.store.Volume(ctx, in.Volume); err == nil {
			st.GraftInfo = vol.Info() // the lag's own reading
			if st.Lag, err = lagOf(ctx, vol, st.GraftInfo, now); err != nil {
				return VolumeList{}, err
			}
		} else if !errors.Is(err, graft.ErrVolumeNotFound) {
			return VolumeList{}, err
		} else {
			continue // dropped since the listing
		}
		out.Volumes = append(out.Volumes, st)
	}
	return out, nil
}

// VolumeStatus returns volume v of the data dir as Volumes lists it: its
// graft.Info and replication lag, read from the data dir alone and
// without the count of frames not yet fetched that VolumeInfo reads, so
// cheap enough for every commit. A volume the data dir lacks fails
// wrapping graft.ErrVolumeNotFound.
func (n *Node) VolumeStatus(ctx context.Context, v names.Volume) (VolumeStatus, error) {
	if err := n.needData("volume status"); err != nil {
		return VolumeStatus{}, err
	}
	vol, err := n.volume(ctx, v, false)
	if err != nil {
		return VolumeStatus{}, err
	}
	in := vol.Info()
	lag, err := lagOf(ctx, vol, in, time.Now())
	if err != nil {
		return VolumeStatus{}, err
	}
	return VolumeStatus{GraftInfo: in, Lag: lag}, nil
}

// VolumeInfo returns the state of volume v of the data dir; a volume the
// data dir lacks fails wrapping graft.ErrVolumeNotFound.
func (n *Node) VolumeInfo(ctx context.Context, v names.Volume) (VolumeInfo, error) {
	if err := n.needData("volume info"); err != nil {
		return VolumeInfo{}, err
	}
	vol, err := n.volume(ctx, v, false)
	if err != nil {
		return VolumeInfo{}, err
	}
	return infoOf(ctx, vol)
}

// infoOf returns vol's VolumeInfo.
func infoOf(ctx context.Context, vol *graft.Volume) (VolumeInfo, error) {
	u, err := vol.Unfetched(ctx)
	if err != nil {
		return VolumeInfo{}, err
	}
	in := vol.Info()
	lag, err := lagOf(ctx, vol, in, time.Now())
	if err != nil {
		return VolumeInfo{}, err
	}
	return VolumeInfo{GraftInfo: in, UnfetchedFrames: u, Lag: lag}, nil
}

// volume returns volume v of the data dir. create makes a volume the data
// dir lacks if the remote has commits of it (a pull), refusing a name the
// remote does not know (one LIST).
func (n *Node) volume(ctx context.Context, v names.Volume, create bool) (*graft.Volume, error) {
	if v.IsZero() {
		return nil, fmt.Errorf("no volume: %w", names.ErrInvalid)
	}
	vol, err := n.store.Volume(ctx, v)
	if !create || !errors.Is(err, graft.ErrVolumeNotFound) {
		if errors.Is(err, graft.ErrVolumeNotFound) {
			return nil, fmt.Errorf("volume %q is not in this data dir (Volumes lists them; Pull fetches it from the remote): %w", v, err)
		}
		return vol, err
	}
	head, err := n.remoteHead(ctx, v)
	if err != nil {
		return nil, err
	}
	if head == 0 {
		return nil, fmt.Errorf("volume %q has no commits on the remote: check the name: %w", v, graft.ErrVolumeNotFound)
	}
	return n.store.CreateVolume(ctx, v)
}

// Push publishes the volume's local commits not yet pushed as one remote
// commit.
func (n *Node) Push(ctx context.Context, v names.Volume) (PushResult, error) {
	if err := n.needData("push"); err != nil {
		return PushResult{}, err
	}
	vol, err := n.volume(ctx, v, false)
	if err != nil {
		return PushResult{}, err
	}
	sp, err := vol.Push(ctx)
	if err != nil {
		return PushResult{}, fmt.Errorf("volume %s: %w", v, err)
	}
	info, err := infoOf(ctx, vol)
	return PushResult{VolumeInfo: info, Hash: sp.Hash.String()}, err
}

// Pull follows the remote: it applies the remote's new commits to the
// volume, creating it in the data dir if the remote has commits of it
// (pages are fetched on first read). progress, if not nil, is called with
// the commits done and the total.
func (n *Node) Pull(ctx context.Context, v names.Volume, progress func(done, total int)) (PullResult, error) {
	if err := n.needData("pull"); err != nil {
		return PullResult{}, err
	}
	vol, err := n.volume(ctx, v, true)
	if err != nil {
		return PullResult{}, err
	}
	sp, err := vol.Pull(ctx, progress)
	if err != nil {
		return PullResult{}, fmt.Errorf("volume %s: %w", v, err)
	}
	info, err := infoOf(ctx, vol)
	return PullResult{VolumeInfo: info, Hash: sp.Hash.String()}, err
}

// Hydrate fetches every page of the volume that is not local yet.
// progress, if not nil, is called after each frame with the frames done
// and the total.
func (n *Node) Hydrate(ctx context.Context, v names.Volume, progress func(done, total int)) (HydrateResult, error) {
	if err := n.needData("hydrate"); err != nil {
		return HydrateResult{}, err
	}
	vol, err := n.volume(ctx, v, false)
	if err != nil {
		return HydrateResult{}, err
	}
	todo, err := vol.Unfetched(ctx)
	if err != nil {
		return HydrateResult{}, fmt.Errorf("volume %s: %w", v, err)
	}
	if err := vol.Hydrate(ctx, progress); err != nil {
		return HydrateResult{}, fmt.Errorf("volume %s: %w", v, err)
	}
	info, err := infoOf(ctx, vol)
	return HydrateResult{VolumeInfo: info, FramesFetched: todo}, err
}

// Reset drops the volume's local commits that were never pushed and
// follows the remote (the way out of a diverged volume), guarded: when
// those commits hold acknowledged records that exist nowhere else (for an
// archive volume archive.Q.S the archived records no longer in the live
// stream, every one of them without Redis; for an accept volume
// accept.Q.N the jobs on its unpushed pages) it refuses with a
// *graft.DiscardError (graft.ErrWouldDiscard) that says how many, dropping
// nothing, unless discard repeats that count. After the reset of an
// archive volume a seam cache that named the dropped folds is lowered to
// the volume, so the stream stays readable and cycles go on.
func (n *Node) Reset(ctx context.Context, v names.Volume, discard uint64) (ResetResult, error) {
	if err := n.needData("reset"); err != nil {
		return ResetResult{}, err
	}
	vol, err := n.volume(ctx, v, false)
	if err != nil {
		return ResetResult{}, err
	}
	var out ResetResult
	if names.IsArchiveVolume(v) {
		res, err := archive.ResetVolume(ctx, vol, n.mq, discard)
		if err != nil {
			return ResetResult{}, fmt.Errorf("volume %s: %w", v, err)
		}
		out.Dropped, out.Discarded, out.SeamLowered = res.Dropped, res.Discarded, res.SeamLowered
	} else {
		opts := graft.ResetOptions{Discard: discard}
		var counted uint64
		if strings.HasPrefix(v.String(), "accept.") {
			opts.Count = func(ctx context.Context, u *graft.Unpushed) (uint64, string, error) {
				k, what, err := n.acceptDiscards(ctx, u)
				counted = k
				return k, what, err
			}
		}
		dropped, err := vol.ResetWith(ctx, opts)
		if err != nil {
			return ResetResult{}, fmt.Errorf("volume %s: %w", v, err)
		}
		out.Dropped, out.Discarded = dropped, counted
	}
	info, err := infoOf(ctx, vol)
	out.VolumeInfo = info
	return out, err
}

// WhatJobs names the records an accept volume's reset guard counts.
const WhatJobs = "acknowledged jobs not in the remote"

// acceptDiscards is the graft.DiscardCounter of an accept volume
// (accept.Q.N): every job page the unpushed commits wrote is a job
// acknowledged to its producer that the remote does not hold. A page that
// does not decode as a job counts too: nothing shows it is held elsewhere.
func (n *Node) acceptDiscards(ctx context.Context, u *graft.Unpushed) (uint64, string, error) {
	if len(u.Pages) == 0 {
		return 0, WhatJobs, nil
	}
	snap, err := u.Volume.SnapshotAt(ctx, u.Head)
	if err != nil {
		return 0, "", err
	}
	defer snap.Close()
	var k uint64
	for _, p := range u.Pages {
		if p >= graft.ArchiveBase {
			continue
		}
		b, err := snap.Get(ctx, p)
		if errors.Is(err, graft.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, "", err
		}
		if _, err := accept.DecodeJob(b); err != nil {
			n.log.Warn("an unpushed page of an accept volume is not a job; counted as one", "volume", u.Volume.Name(), "page", p, "err", err)
		}
		k++
	}
	return k, WhatJobs, nil
}

// remoteLog returns the volume's remote log, refusing a volume the remote
// has no commit of.
func (n *Node) remoteLog(ctx context.Context, v names.Volume) (*remote.Log, error) {
	if v.IsZero() {
		return nil, fmt.Errorf("no volume: %w", names.ErrInvalid)
	}
	l, err := remote.NewLog(n.rs, v)
	if err != nil {
		return nil, err
	}
	head, err := l.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("volume %s: remote: %w", v, err)
	}
	if head == 0 {
		return nil, fmt.Errorf("volume %q has no commits on the remote: check the name: %w", v, graft.ErrVolumeNotFound)
	}
	return l, nil
}

// Checkpoint appends a checkpoint commit to the volume's remote log, so
// that a fresh follower starts there and GC can collect below it. It works
// on the remote log alone: the data dir need not hold the volume.
func (n *Node) Checkpoint(ctx context.Context, v names.Volume) (CheckpointResult, error) {
	if err := n.needData("checkpoint"); err != nil {
		return CheckpointResult{}, err
	}
	l, err := n.remoteLog(ctx, v)
	if err != nil {
		return CheckpointResult{}, err
	}
	e, err := l.WriteCheckpoint(ctx)
	if err != nil {
		return CheckpointResult{}, fmt.Errorf("volume %s: %w", v, err)
	}
	return CheckpointResult{Volume: v.String(), CheckpointLSN: e.LSN()}, nil
}

// GC deletes the remote segments of the volume that no commit at or after
// the oldest retained checkpoint references (and, with opts.TrimLog, the
// log entries below it). It works on the remote log alone.
func (n *Node) GC(ctx context.Context, v names.Volume, opts GCOptions) (GCResult, error) {
	if err := n.needData("gc"); err != nil {
		return GCResult{}, err
	}
	l, err := n.remoteLog(ctx, v)
	if err != nil {
		return GCResult{}, err
	}
	res, err := l.GC(ctx, opts)
	if err != nil {
		return GCResult{}, fmt.Errorf("volume %s: %w", v, err)
	}
	return gcResult(v.String(), res), nil
}

// gcResult is the root package's form of a remote GC's result.
func gcResult(volume string, res remote.GCResult) GCResult {
	return GCResult{Volume: volume, Horizon: res.Horizon, SegmentsKept: res.SegmentsKept, SegmentsDeleted: res.SegmentsDeleted,
		LogTrimmed: res.LogTrimmed, MarkersDeleted: res.MarkersDeleted,
		SegmentBytes: res.SegmentBytes, LogBytes: res.LogBytes, MarkerBytes: res.MarkerBytes,
		ObjectsRemoved: res.Objects(), BytesRemoved: res.Bytes()}
}

// ReplicationStats returns the counts of the background replication (all
// zero when Config.ReplicateEvery is off).
func (n *Node) ReplicationStats() ReplicationStats {
	if n.repl == nil {
		return ReplicationStats{}
	}
	return n.repl.stats()
}

// ReplicationLag returns how far volume v's remote log trails its local
// one. It reads the data dir alone: no remote request.
func (n *Node) ReplicationLag(ctx context.Context, v names.Volume) (ReplicationLag, error) {
	if err := n.needData("replication lag"); err != nil {
		return ReplicationLag{}, err
	}
	vol, err := n.volume(ctx, v, false)
	if err != nil {
		return ReplicationLag{}, err
	}
	return lagOf(ctx, vol, vol.Info(), time.Now())
}
