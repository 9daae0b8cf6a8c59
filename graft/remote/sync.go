package remote

import (
	"context"
	"errors"
	"fmt"
)

// SyncPoint is where a local volume and its remote log last agreed: remote
// LSN Remote, whose commit has hash Hash, covers the local log up to local
// LSN Local.
type SyncPoint struct {
	Remote uint64
	Hash   Hash
	Local  uint64
}

// Source is what Push needs from the local engine of the volume's writer.
// SetPending must be durable when it returns; SetSyncPoint may be lazy
// (see there).
type Source interface {
	// SyncPoint returns the recorded sync point (zero for a volume never
	// pushed).
	SyncPoint(ctx context.Context) (SyncPoint, error)
	// LocalHead returns the newest local LSN.
	LocalHead(ctx context.Context) (uint64, error)
	// Changes returns the pages changed in the local LSN range (from, to],
	// each at its newest version at or below to, in ascending index, and
	// the metadata keys set in that range at their newest value.
	Changes(ctx context.Context, from, to uint64) ([]Page, map[string][]byte, error)
	// Pending returns the recorded pending remote commit (the bytes of a
	// Prepared), or nil.
	Pending(ctx context.Context) ([]byte, error)
	// SetPending records a pending remote commit before it is published.
	SetPending(ctx context.Context, commit []byte) error
	// SetSyncPoint records a new sync point and clears the pending commit,
	// in one atomic step. It need not be durable when it returns, provided
	// a crash loses it only together with whatever was recorded after it:
	// the pending commit then stays recorded, and the next Push publishes
	// it again (the same bytes at its LSN: it had landed).
	SetSyncPoint(ctx context.Context, sp SyncPoint) error
}

// Push publishes the local commits above the sync point as one remote
// commit and returns the new sync point. A pending commit left by a crash
// is published first, as is (idempotent if it had landed). If another
// writer holds the next remote LSN, the error wraps ErrDiverged and the
// pending commit stays recorded: the engine must pull, or reset to the
// remote, before pushing again.
func Push(ctx context.Context, l *Log, src Source) (SyncPoint, error) {
	pend, err := src.Pending(ctx)
	if err != nil {
		return SyncPoint{}, err
	}
	if pend != nil {
		c, err := DecodeCommit(pend)
		if err != nil {
			return SyncPoint{}, fmt.Errorf("volume %s: pending commit: %w", l.volume, err)
		}
		p := Prepared{Commit: c, Bytes: pend, Hash: HashOf(pend)}
		if p, err = l.reviveSegments(ctx, src, p); err != nil {
			return SyncPoint{}, err
		}
		if _, err := publishAndRecord(ctx, l, src, p); err != nil {
			return SyncPoint{}, err
		}
	}
	sp, err := src.SyncPoint(ctx)
	if err != nil {
		return SyncPoint{}, err
	}
	head, err := src.LocalHead(ctx)
	if err != nil || head <= sp.Local {
		return sp, err
	}
	pages, meta, err := src.Changes(ctx, sp.Local, head)
	if err != nil {
		return SyncPoint{}, err
	}
	p, err := l.Prepare(ctx, Draft{LSN: sp.Remote + 1, Prev: sp.Hash, LocalFrom: sp.Local, LocalTo: head,
		Meta: meta, Pages: pages})
	if err != nil {
		return SyncPoint{}, err
	}
	if err := src.SetPending(ctx, p.Bytes); err != nil {
		return SyncPoint{}, err
	}
	return publishAndRecord(ctx, l, src, p)
}

// reviveSegments checks that the segments of a pending commit are still
// in the store (one 1-byte ranged GET each). If GC removed one (the commit
// waited longer than GCOptions.MinAge), the commit cannot have landed (a
// landed commit's segments are referenced), so it is prepared again from
// the same local range: the same pages give the same segments and bytes.
func (l *Log) reviveSegments(ctx context.Context, src Source, p Prepared) (Prepared, error) {
	missing := false
	for _, s := range p.Commit.Segments {
		b, err := l.store.GetRange(ctx, s.Key, 0, 1)
		if errors.Is(err, ErrNotFound) || (err == nil && len(b) == 0) {
			missing = true
			break
		}
		if err != nil {
			return p, fmt.Errorf("volume %s: pending commit: %w", l.volume, err)
		}
	}
	if !missing {
		return p, nil
	}
	c := p.Commit
	pages, meta, err := src.Changes(ctx, c.LocalFrom, c.LocalTo)
	if err != nil {
		return p, err
	}
	np, err := l.Prepare(ctx, Draft{LSN: c.LSN, Prev: c.Prev, LocalFrom: c.LocalFrom, LocalTo: c.LocalTo,
		Meta: meta, Pages: pages})
	if err != nil {
		return p, err
	}
	if err := src.SetPending(ctx, np.Bytes); err != nil {
		return p, err
	}
	return np, nil
}

func publishAndRecord(ctx context.Context, l *Log, src Source, p Prepared) (SyncPoint, error) {
	call(l.hooks.BetweenUploadAndCommit)
	if err := l.Publish(ctx, p); err != nil {
		return SyncPoint{}, err
	}
	call(l.hooks.AfterCommitBeforeLocalRecord)
	sp := SyncPoint{Remote: p.Commit.LSN, Hash: p.Hash, Local: p.Commit.LocalTo}
	return sp, src.SetSyncPoint(ctx, sp)
}

// Sink is what Pull needs from the local engine of a follower.
type Sink interface {
	// SyncPoint returns the remote LSN and hash the follower has applied
	// (zero for a fresh follower; Local is not used).
	SyncPoint(ctx context.Context) (SyncPoint, error)
	// Apply records one remote commit (its page references, to fetch now
	// or on fault, and its metadata) and its sync point, atomically.
	Apply(ctx context.Context, e Entry) error
	// Restart drops the follower's state and installs a checkpoint commit
	// in its place (with its sync point), atomically.
	Restart(ctx context.Context, cp Entry) error
}

// Pull brings a follower up to the remote head and returns its sync
// point. A fresh follower starts at the newest checkpoint, not at LSN 1;
// one whose sync point GC trimmed away restarts from the newest
// checkpoint. A follower whose sync point is not on the remote log gets an
// error wrapping ErrDiverged.
func Pull(ctx context.Context, l *Log, sink Sink) (SyncPoint, error) {
	sp, err := sink.SyncPoint(ctx)
	if err != nil {
		return SyncPoint{}, err
	}
	restart := func() error {
		cp, err := l.LatestCheckpoint(ctx)
		if errors.Is(err, ErrNoCheckpoint) && sp.Remote == 0 {
			return nil // no checkpoint yet: read from LSN 1
		}
		if err != nil {
			return err
		}
		if err := sink.Restart(ctx, cp); err != nil {
			return err
		}
		sp = SyncPoint{Remote: cp.LSN(), Hash: cp.Hash, Local: cp.Commit.LocalTo}
		return nil
	}
	if sp.Remote == 0 {
		if err := restart(); err != nil {
			return SyncPoint{}, err
		}
	}
	for retried := false; ; retried = true {
		var trimmed bool
		for e, err := range l.Since(ctx, sp.Remote, sp.Hash) {
			if errors.Is(err, ErrTrimmed) && !retried {
				trimmed = true
				break
			}
			if err != nil {
				return sp, err
			}
			if err := sink.Apply(ctx, e); err != nil {
				return sp, err
			}
			sp = SyncPoint{Remote: e.LSN(), Hash: e.Hash, Local: e.Commit.LocalTo}
		}
		if !trimmed {
			return sp, nil
		}
		if err := restart(); err != nil {
			return sp, err
		}
	}
}
