package echostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// DefaultGCGrace is the grace of the background remote GC when
// Config.GCEvery enables it and Config.GCGrace is zero.
const DefaultGCGrace = time.Hour

// The background remote GC (Config.GCEvery). Every GCEvery, for each volume
// of the data dir that has a remote log and whose remote moved since the
// last pass (or whose collection was held back by the grace and is now
// due), it checks the remote's identity as a push does (a data dir pointed
// at another remote writes and deletes nothing there), then
//
//  1. appends a checkpoint built from the log (remote.Log.WriteCheckpoint)
//     when the log has commits above its newest checkpoint and that
//     checkpoint is at least GCEvery old, so that the horizon keeps up with
//     the head: a checkpoint references only live pages (none below the
//     archive floor), so the segments of rewritten and dropped pages
//     become unreferenced from it on;
//  2. runs remote GC with TrimLog, Grace = MinAge = GCGrace: the horizon is
//     the newest checkpoint at least GCGrace old; segments no commit from
//     the horizon on references and older than GCGrace are deleted, the
//     commits below the horizon become tombstones, older markers go.
//
// The rule for readers: a follower or lazy reader faults no page on a
// deleted object for GCGrace after its last pull. (A state pulled at time
// t is at or above every checkpoint written before t, and only a
// checkpoint written after t can become a horizon that passes it, GCGrace
// after it was written.) A reader idle for longer pulls again, which
// restarts it from the newest checkpoint when the log below it was trimmed.
// A volume whose remote did not move and has nothing due makes no request.

// GCKinds names the kinds of remote object GC removes, in GCTotals order:
// segments deleted, commit objects replaced by tombstones, checkpoint
// markers deleted.
var GCKinds = [gcKinds]string{"segment", "commit", "marker"}

// GCTotals is what the node's remote GC (background passes and Node.RemoteGC)
// removed since Open: objects and bytes per kind (GCKinds order), the
// passes run and the volumes whose pass failed.
type GCTotals struct {
	Objects [gcKinds]int64
	Bytes   [gcKinds]int64
	Passes  int64
	Errors  int64
}

// GCPassResult is the answer of one remote GC pass over the node's
// volumes: each volume's GC result and checkpoint, and the volumes left
// alone (quiet, or failed: the error is logged and counted, and the volume
// is tried again on the next pass).
type GCPassResult struct {
	Volumes     []GCResult `json:"volumes"`
	Checkpoints int        `json:"checkpoints"`
	Skipped     int        `json:"skipped"`
	Failed      int        `json:"failed"`
}

// newGCLoop returns the loop of cfg (cfg.GCEvery zero: no background pass;
// Node.RemoteGC still runs one). A negative GCEvery or GCGrace is
// ErrConfig.
func newGCLoop(cfg Config) (*gcLoop, error) {
	if cfg.GCEvery < 0 || cfg.GCGrace < 0 {
		return nil, fmt.Errorf("%w: gc_every %v, gc_grace %v: want positive durations", ErrConfig, cfg.GCEvery, cfg.GCGrace)
	}
	grace := cfg.GCGrace
	if grace == 0 {
		grace = DefaultGCGrace
	}
	return &gcLoop{every: cfg.GCEvery, grace: grace, vols: map[names.Volume]gcVolume{}}, nil
}

// startGC starts the background loop when the config enables it.
func (n *Node) startGC() {
	g := n.gc
	if g == nil || g.every <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop, g.done = cancel, make(chan struct{})
	go func() {
		defer close(g.done)
		every(ctx, g.every, func() {
			if _, err := n.RemoteGC(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("remote gc pass failed", "err", err)
			}
		})
	}()
}

// stopGC stops the background loop and waits for its pass to end.
func (n *Node) stopGC() {
	if g := n.gc; g != nil && g.stop != nil {
		g.stop()
		<-g.done
	}
}

// GCTotals returns what the node's remote GC removed since Open.
func (n *Node) GCTotals() GCTotals {
	var t GCTotals
	if g := n.gc; g != nil {
		for k := range gcKinds {
			t.Objects[k], t.Bytes[k] = g.objects[k].Load(), g.bytes[k].Load()
		}
		t.Passes, t.Errors = g.passes.Load(), g.errs.Load()
	}
	return t
}

// RemoteGC runs one pass of the background remote GC now (see the rule
// above DefaultGCGrace's loop: checkpoint, then GC with the grace) over
// every volume of the data dir with a remote log. A node opened without
// GCEvery checkpoints whenever the log moved. A
// volume's failure is logged and counted and the pass goes on; the error
// is only for a pass that could not list the volumes or was cancelled.
func (n *Node) RemoteGC(ctx context.Context) (GCPassResult, error) {
	if err := n.needData("remote gc"); err != nil {
		return GCPassResult{}, err
	}
	g := n.gc
	g.mu.Lock()
	defer g.mu.Unlock()
	infos, err := n.store.Volumes(ctx)
	if err != nil {
		return GCPassResult{}, fmt.Errorf("remote gc: %w", err)
	}
	res := GCPassResult{Volumes: []GCResult{}}
	now := time.Now()
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		st := g.vols[info.Volume]
		if info.RemoteLSN == 0 || (info.RemoteLSN == st.seen && (st.due.IsZero() || now.Before(st.due))) {
			res.Skipped++
			continue
		}
		r, wrote, due, err := n.gcVolume(ctx, g, info.Volume, now)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			g.errs.Add(1)
			res.Failed++
			n.log.Warn("remote gc of a volume failed; tried again on the next pass", "volume", info.Volume.String(), "err", err)
			continue
		}
		g.vols[info.Volume] = gcVolume{seen: info.RemoteLSN, due: due}
		if wrote {
			res.Checkpoints++
		}
		res.Volumes = append(res.Volumes, r)
		for k, o := range [gcKinds][2]int64{
			{int64(r.SegmentsDeleted), r.SegmentBytes}, {int64(r.LogTrimmed), r.LogBytes}, {int64(r.MarkersDeleted), r.MarkerBytes}} {
			g.objects[k].Add(o[0])
			g.bytes[k].Add(o[1])
		}
		if r.ObjectsRemoved > 0 {
			n.log.Info("remote gc", "volume", r.Volume, "horizon", r.Horizon,
				"objects_removed", r.ObjectsRemoved, "bytes_removed", r.BytesRemoved)
		}
	}
	g.passes.Add(1)
	return res, nil
}

// gcVolume checkpoints and collects one volume's remote log. It returns the
// GC's result, whether it wrote a checkpoint, and when the volume is due
// again although its remote does not move (zero: not before it moves).
func (n *Node) gcVolume(ctx context.Context, g *gcLoop, v names.Volume, now time.Time) (GCResult, bool, time.Time, error) {
	// Never write to, nor delete from, a remote the volume was not synced
	// with (a data dir pointed at another bucket): the identity check of a
	// push, once per volume and remote.
	vol, err := n.store.Volume(ctx, v)
	if err != nil {
		return GCResult{}, false, time.Time{}, err
	}
	if err := vol.CheckRemote(ctx); err != nil {
		return GCResult{}, false, time.Time{}, err
	}
	l, err := remote.NewLog(n.rs, v)
	if err != nil {
		return GCResult{}, false, time.Time{}, err
	}
	head, err := l.Head(ctx)
	if err != nil || head == 0 {
		return GCResult{Volume: v.String()}, false, time.Time{}, err
	}
	markers, err := n.rs.List(ctx, remote.CheckpointPrefix(v.String()), 1)
	if err != nil {
		return GCResult{}, false, time.Time{}, fmt.Errorf("volume %s: list checkpoints: %w", v, err)
	}
	var cpLSN uint64
	var cpTime time.Time
	if len(markers) > 0 {
		if cpLSN, _, err = remote.ParseCheckpointKey(v.String(), markers[0].Key); err != nil {
			return GCResult{}, false, time.Time{}, fmt.Errorf("volume %s: %w", v, err)
		}
		cpTime = markers[0].ModTime
	}
	wrote := false
	if head > cpLSN && (cpLSN == 0 || now.Sub(cpTime) >= g.every) {
		switch _, err := l.WriteCheckpoint(ctx); {
		case err == nil:
			wrote, cpTime = true, now
		case errors.Is(err, remote.ErrDiverged):
			// The writer pushed meanwhile: checkpoint on the next pass.
		default:
			return GCResult{}, false, time.Time{}, fmt.Errorf("volume %s: checkpoint: %w", v, err)
		}
	}
	r, err := l.GC(ctx, remote.GCOptions{KeepCheckpoints: 1, MinAge: g.grace, Grace: g.grace, TrimLog: true,
		Now: func() time.Time { return now }})
	if err != nil {
		return GCResult{}, wrote, time.Time{}, fmt.Errorf("volume %s: %w", v, err)
	}
	newest := cpLSN
	if wrote {
		newest = head + 1
	}
	var due time.Time
	if newest > 0 && r.Horizon < newest {
		// The newest checkpoint becomes the horizon once it is as old as
		// the grace: come back then.
		due = cpTime.Add(g.grace)
	}
	return gcResult(v.String(), r), wrote, due, nil
}
