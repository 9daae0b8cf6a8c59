package graft

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/graft/remote"
)

// DivergedError reports a volume whose local log and remote log went
// separate ways: it has local commits above its sync point that were never
// pushed, and the remote log has moved past the sync point (another writer
// won those remote LSNs). The only way out is to drop the unpushed commits
// and follow the remote: Volume.Reset, `echostore volume reset V
// --to-remote`. It wraps remote.ErrDiverged (and the remote's own
// *remote.DivergedError when there is one).
type DivergedError struct {
	Volume     string
	Head       uint64 // the local head
	SyncLocal  uint64 // the local LSN the last push or pull covered
	SyncRemote uint64 // the remote LSN of the sync point
	RemoteLSN  uint64 // the remote LSN found beyond it (0 if unknown)
	Err        error  // the remote's error, if any
}

// Error says what happened and what to do.
func (e *DivergedError) Error() string {
	msg := fmt.Sprintf("graft: volume %q has diverged from its remote: local commits %d..%d were never pushed, and the remote log moved past remote LSN %d",
		e.Volume, e.SyncLocal+1, e.Head, e.SyncRemote)
	if e.Head == e.SyncLocal {
		msg = fmt.Sprintf("graft: volume %q has diverged from its remote: a pending push lost remote LSN %d to another writer", e.Volume, e.SyncRemote+1)
	}
	if e.RemoteLSN > 0 {
		msg += fmt.Sprintf(" (to LSN %d)", e.RemoteLSN)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + fmt.Sprintf("; run `echostore volume reset %s --to-remote` to drop the unpushed commits and follow the remote", e.Volume)
}

// Unwrap returns the remote's error, or remote.ErrDiverged.
func (e *DivergedError) Unwrap() error {
	if e.Err != nil && errors.Is(e.Err, remote.ErrDiverged) {
		return e.Err
	}
	return remote.ErrDiverged
}

func (v *Volume) needLog(op string) (*remote.Log, error) {
	l := v.remoteLog()
	if l == nil {
		return nil, fmt.Errorf("graft: %s volume %q: %w (open the store with Options.Remote or call Store.AttachRemote)", op, v.name, ErrNoRemote)
	}
	if err := v.s.checkWritable(); err != nil {
		return nil, fmt.Errorf("graft: %s volume %q: %w", op, v.name, err)
	}
	return l, nil
}

// Push publishes the local commits above the sync point as one remote
// commit (remote.Push over the volume as its Source) and returns the new
// sync point. A crash at any point is recovered by the next Push: a
// recorded pending commit is published again (idempotent if it landed).
// If another writer won the next remote LSN the error is a *DivergedError.
func (v *Volume) Push(ctx context.Context) (remote.SyncPoint, error) {
	l, err := v.needLog("push")
	if err != nil {
		return remote.SyncPoint{}, err
	}
	v.pushMu.Lock()
	defer v.pushMu.Unlock()
	if err := v.checkRemote(ctx, l, "push", true); err != nil {
		return remote.SyncPoint{}, err
	}
	sp, err := remote.Push(ctx, l, v)
	if errors.Is(err, remote.ErrDiverged) {
		// A checkpoint written from the log beside this writer holds the
		// next remote LSN: adopt it and push on top of it.
		if n, aerr := v.adoptCheckpoints(ctx, l); aerr == nil && n > 0 {
			sp, err = remote.Push(ctx, l, v)
		}
	}
	if errors.Is(err, remote.ErrDiverged) {
		st := v.state.Load()
		return sp, &DivergedError{Volume: v.name, Head: st.Head, SyncLocal: st.SyncLocal, SyncRemote: st.RemoteLSN, Err: err}
	}
	if err != nil {
		return sp, fmt.Errorf("graft: push volume %q: %w", v.name, err)
	}
	v.notify(ctx, EventPush, sp.Remote)
	return sp, nil
}

// Pull brings the volume up to the remote head (remote.Pull over the
// volume as its Sink) and returns its sync point. Pages arrive as remote
// references and are fetched on first read (or by Hydrate). A fresh volume
// starts from the newest checkpoint. progress, if not nil, is called after
// each applied commit with the commits done and the total.
//
// A pending push is settled first when the remote moved (settlePending):
// if the remote holds exactly its bytes at its LSN, it is this volume's
// own push whose sync point a crash lost (between the PUT and
// SetSyncPoint, or after a lazy SetSyncPoint), so Pull records that sync
// point and goes on. Pull never publishes: a
// pending commit that has not landed stays recorded for the next Push.
// A volume with unpushed local commits, or with a pending push that did
// not land (another commit holds its LSN, or the remote cannot tell), cannot
// pull once the remote moved: *DivergedError.
func (v *Volume) Pull(ctx context.Context, progress func(done, total int)) (remote.SyncPoint, error) {
	l, err := v.needLog("pull")
	if err != nil {
		return remote.SyncPoint{}, err
	}
	v.pushMu.Lock()
	defer v.pushMu.Unlock()
	st := v.state.Load()
	sp := remote.SyncPoint{Remote: st.RemoteLSN, Hash: st.RemoteHash, Local: st.SyncLocal}
	if err := v.checkRemote(ctx, l, "pull", false); err != nil {
		return sp, err
	}
	head, err := l.Head(ctx)
	if err != nil {
		return sp, fmt.Errorf("graft: pull volume %q: %w", v.name, err)
	}
	if head < st.RemoteLSN {
		return sp, &RemoteMismatchError{Volume: v.name, Op: "pull", Want: st.RemoteID, RemoteLSN: st.RemoteLSN,
			Reason: fmt.Sprintf("this remote's log of the volume ends at remote LSN %d: it lacks the volume's pushed commits", head)}
	}
	if head == st.RemoteLSN {
		return sp, nil // quiet: one LIST
	}
	// Checkpoints written from the log on top of the sync point change
	// nothing. A volume with nothing unpushed applies them as it pulls
	// (Apply records them as its sync point); one with unpushed commits or
	// a pending push adopts them first (before settling the pending push:
	// one that holds no LSN of its own lost it to such a checkpoint, and is
	// dropped, its local commits still to push), then settles, then adopts
	// those above.
	if cur, err := v.Pending(ctx); err != nil {
		return sp, fmt.Errorf("graft: pull volume %q: %w", v.name, err)
	} else if cur != nil || st.Head != st.SyncLocal {
		if _, err := v.adoptCheckpoints(ctx, l); err != nil {
			return sp, fmt.Errorf("graft: pull volume %q: %w", v.name, err)
		}
	}
	pend, lost, err := v.settlePending(ctx, l)
	if err != nil {
		return sp, fmt.Errorf("graft: pull volume %q: %w", v.name, err)
	}
	if cur := v.state.Load(); pend == nil && cur.Head != cur.SyncLocal {
		if _, err := v.adoptCheckpoints(ctx, l); err != nil {
			return sp, fmt.Errorf("graft: pull volume %q: %w", v.name, err)
		}
	}
	st = v.state.Load()
	sp = remote.SyncPoint{Remote: st.RemoteLSN, Hash: st.RemoteHash, Local: st.SyncLocal}
	if head == st.RemoteLSN {
		return sp, nil // the pending push was the remote head
	}
	if st.Head != st.SyncLocal || pend != nil {
		return sp, &DivergedError{Volume: v.name, Head: st.Head, SyncLocal: st.SyncLocal, SyncRemote: st.RemoteLSN, RemoteLSN: head, Err: lost}
	}
	var sink remote.Sink = v
	if progress != nil {
		sink = &progressSink{v: v, head: head, total: int(head - min(head, st.RemoteLSN)), progress: progress}
	}
	sp, err = remote.Pull(ctx, l, sink)
	if err != nil {
		var de *DivergedError
		if errors.As(err, &de) {
			return sp, err
		}
		return sp, fmt.Errorf("graft: pull volume %q: %w", v.name, err)
	}
	// remote.Pull's Local is the pushing writer's local LSN; this volume's
	// own sync point covers its own head.
	return v.SyncPoint(ctx)
}

// settlePending resolves a pending remote commit against the remote log,
// for a caller that holds pushMu (Pull, Reset). A pending record outlives
// its push when a crash strikes between the PUT and SetSyncPoint, or loses
// a lazy SetSyncPoint (Store.lazySyncPoint); it says nothing of whether
// the PUT landed. One GET of the pending commit's LSN decides:
//
//   - the same bytes: the push landed. Its sync point is recorded as
//     SetSyncPoint would (pend is nil on return), and the remote commits
//     above it are ordinary ones to pull.
//   - another commit: another writer won the LSN; pend stays and lost is
//     the remote's *remote.DivergedError (Pull fails with *DivergedError,
//     Reset drops the pending commit).
//   - no commit (never landed), or a trimmed one (remote GC replaced it by a
//     tombstone, so the bytes cannot be compared): pend stays, as before.
//     Only Push may publish it; a free LSN below a remote head that moved
//     past it is no log the pending commit can join.
//
// A pending commit that does not follow the recorded sync point is left
// alone (nothing writes one; Push reports what is wrong with it).
func (v *Volume) settlePending(ctx context.Context, l *remote.Log) (pend []byte, lost, err error) {
	if pend, err = v.Pending(ctx); err != nil || pend == nil {
		return pend, nil, err
	}
	c, err := remote.DecodeCommit(pend)
	if err != nil {
		return pend, nil, fmt.Errorf("pending remote commit: %w", err)
	}
	st := v.state.Load()
	if c.LSN != st.RemoteLSN+1 || c.Prev != st.RemoteHash || c.LocalFrom != st.SyncLocal || c.LocalTo > st.Head {
		return pend, nil, nil
	}
	want := remote.HashOf(pend)
	e, err := l.Read(ctx, c.LSN)
	switch {
	case errors.Is(err, remote.ErrNotFound), errors.Is(err, remote.ErrTrimmed):
		return pend, nil, nil
	case err != nil:
		return pend, nil, fmt.Errorf("settle the pending remote commit: %w", err)
	case e.Hash != want:
		return pend, &remote.DivergedError{Volume: v.name, LSN: c.LSN, Want: want, Got: e.Hash,
			Reason: "another commit holds the lsn of the pending push"}, nil
	}
	sp := remote.SyncPoint{Remote: c.LSN, Hash: want, Local: c.LocalTo}
	if err := v.SetSyncPoint(ctx, sp); err != nil {
		return pend, nil, err
	}
	v.s.log.Info("graft: pending push found landed; sync point recorded", "volume", v.name,
		"remote_lsn", sp.Remote, "sync_lsn", sp.Local)
	return nil, nil, nil
}

// progressSink counts the commits a pull applies.
type progressSink struct {
	v        *Volume
	head     uint64
	done     int
	total    int
	progress func(done, total int)
}

// SyncPoint implements remote.Sink.
func (p *progressSink) SyncPoint(ctx context.Context) (remote.SyncPoint, error) {
	return p.v.SyncPoint(ctx)
}

// Apply implements remote.Sink and reports progress.
func (p *progressSink) Apply(ctx context.Context, e remote.Entry) error {
	if err := p.v.Apply(ctx, e); err != nil {
		return err
	}
	p.done++
	p.progress(min(p.done, p.total), max(p.total, p.done))
	return nil
}

// Restart implements remote.Sink; the commits left are those above the
// checkpoint.
func (p *progressSink) Restart(ctx context.Context, cp remote.Entry) error {
	if err := p.v.Restart(ctx, cp); err != nil {
		return err
	}
	// A restart jumps to the checkpoint: only the commits above it remain.
	p.done, p.total = 0, int(p.head-min(p.head, cp.LSN()))
	p.progress(0, p.total)
	return nil
}

// Reset drops the local commits above the sync point that were never
// pushed (and a pending push that did not land: a landed one is settled
// first, see settlePending), so the volume is again at the state of its
// last push or pull, and then, with toRemote, pulls from the remote. It is
// the way out of a *DivergedError. Like GC it removes readable LSNs
// explicitly: reads above the sync point after a reset return the remote's
// pages. It fails while snapshots above the sync point are open. It returns
// how many local commits it dropped.
func (v *Volume) Reset(ctx context.Context, toRemote bool) (dropped uint64, err error) {
	if err := v.s.checkWritable(); err != nil {
		return 0, fmt.Errorf("graft: reset volume %q: %w", v.name, err)
	}
	if !toRemote {
		return 0, fmt.Errorf("graft: reset volume %q: only a reset to the remote is supported (--to-remote): %w", v.name, remote.ErrInvalid)
	}
	return v.ResetWith(ctx, ResetOptions{})
}

// resetLocked is the part of ResetWith under pushMu: settle a pending
// push, count what would be lost, drop the unpushed commits.
func (v *Volume) resetLocked(ctx context.Context, l *remote.Log, opts ResetOptions) (uint64, error) {
	// The remote must be the volume's: a reset against another (or an
	// empty) remote would drop the unpushed commits and follow nothing.
	if err := v.checkRemote(ctx, l, "reset", false); err != nil {
		return 0, err
	}
	if st := v.state.Load(); st.RemoteLSN > 0 {
		head, err := l.Head(ctx)
		if err != nil {
			return 0, fmt.Errorf("graft: reset volume %q: %w", v.name, err)
		}
		if head < st.RemoteLSN {
			return 0, &RemoteMismatchError{Volume: v.name, Op: "reset", Want: st.RemoteID, RemoteLSN: st.RemoteLSN,
				Reason: fmt.Sprintf("this remote's log of the volume ends at remote LSN %d: it lacks the volume's pushed commits", head)}
		}
	}
	// A pending push that landed is not unpushed: settle it first, so that
	// the commits it covers are kept (only another writer's commit at its
	// LSN, or a remote that cannot tell, makes it one to drop).
	if _, _, err := v.settlePending(ctx, l); err != nil {
		return 0, fmt.Errorf("graft: reset volume %q: %w", v.name, err)
	}
	st := v.state.Load()
	if opts.Count != nil {
		u, err := v.unpushed(ctx, st)
		if err != nil {
			return 0, fmt.Errorf("graft: reset volume %q: unpushed commits: %w", v.name, err)
		}
		n, what, err := opts.Count(ctx, u)
		if err != nil {
			return 0, fmt.Errorf("graft: reset volume %q: count what it would discard: %w", v.name, err)
		}
		if n != opts.Discard {
			return 0, &DiscardError{Volume: v.name, Count: n, What: what, Given: opts.Discard, SyncLSN: st.SyncLocal, Head: st.Head}
		}
		if n > 0 {
			v.s.log.Warn("graft: reset discards acknowledged records, as confirmed", "volume", v.name, "discarded", n, "what", what)
		}
	}
	return v.dropUnpushed(ctx, st)
}

// dropUnpushed removes local commits above the sync point, in one batch.
// It fails with ErrConflict if the volume's state is no longer st.
func (v *Volume) dropUnpushed(ctx context.Context, st *volumeRecord) (uint64, error) {
	keep := st.SyncLocal
	commits, err := v.Commits(ctx, keep+1, st.Head)
	wipe := errors.Is(err, ErrSnapshotGone) || st.Horizon > keep
	if err != nil && !wipe {
		return 0, fmt.Errorf("graft: reset volume %q: %w", v.name, err)
	}
	defer v.lockAll()()
	if err := v.checkDropped("reset"); err != nil {
		return 0, err
	}
	if cur := v.state.Load(); cur != st {
		return 0, fmt.Errorf("graft: reset volume %q: a commit landed meanwhile; try again: %w", v.name, ErrConflict)
	}
	for l := range v.pins {
		if l > keep || wipe {
			return 0, fmt.Errorf("graft: reset volume %q: a snapshot at LSN %d is open; close it first: %w", v.name, l, ErrConflict)
		}
	}
	rec := *st
	b := v.s.db.NewBatch()
	defer b.Close()
	if wipe { // never pushed and GC passed LSN 0: start empty
		if err := deleteVolumeData(b, v.id); err != nil {
			return 0, err
		}
		rec = volumeRecord{ID: st.ID, KeepFrom: Unpinned, Created: st.Created}
	} else {
		pages := map[uint64]bool{}
		metas := map[string]bool{}
		for _, c := range commits {
			for _, p := range c.Pages {
				pages[p] = true
			}
			for _, m := range c.Meta {
				metas[m.Key] = true
			}
		}
		for p := range pages {
			oldLen, oldOK, err := v.pageLenAt(ctx, p, keep)
			if err != nil {
				return 0, err
			}
			newLen, newOK, err := v.pageLenAt(ctx, p, st.Head)
			if err != nil {
				return 0, err
			}
			if newOK && !oldOK {
				rec.Pages--
			}
			rec.Bytes = rec.Bytes - newLen + oldLen
			if err := b.DeleteRange(appendPageKey(nil, v.id, p, st.Head), appendPageKey(nil, v.id, p, keep), nil); err != nil {
				return 0, err
			}
		}
		for k := range metas {
			if err := b.DeleteRange(appendMetaKey(nil, v.id, k, st.Head), appendMetaKey(nil, v.id, k, keep), nil); err != nil {
				return 0, err
			}
		}
		if err := errors.Join(
			b.DeleteRange(appendCommitKey(nil, v.id, keep+1), appendCommitKey(nil, v.id, st.Head+1), nil),
			b.DeleteRange(appendFrameKey(nil, v.id, keep+1, 0), appendFrameKey(nil, v.id, st.Head+1, 0), nil),
		); err != nil {
			return 0, err
		}
		rec.Head = keep
	}
	// Synced: once the reset returns, the dropped commits and the pending
	// record stay gone (a lazy sync point before it becomes durable too).
	if err := errors.Join(
		b.Delete(pendingKey(v.id), nil),
		b.Set(v.key, encodeVolumeRecord(rec), nil),
		v.s.commit(b, pebble.Sync),
	); err != nil {
		return 0, fmt.Errorf("graft: reset volume %q: %w", v.name, err)
	}
	if wipe {
		v.floor = 0
	}
	v.noPending.Store(true)
	v.state.Store(&rec)
	v.s.log.Info("graft: volume reset to its sync point", "volume", v.name, "dropped", st.Head-rec.Head, "sync_lsn", rec.Head)
	return st.Head - rec.Head, nil
}

// pageLenAt returns the length of page p at lsn and whether it exists.
func (v *Volume) pageLenAt(ctx context.Context, p, lsn uint64) (uint64, bool, error) {
	var lo, hi [pageKeyLen]byte
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: putPageKey(&lo, v.id, p, lsn), UpperBound: putPageKey(&hi, v.id, p, lsnNone)})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	if !it.First() {
		return 0, false, it.Error()
	}
	val, err := it.ValueAndErr()
	if err != nil {
		return 0, false, err
	}
	_, n, _, _, err := pageValue(val)
	return n, err == nil, err
}
