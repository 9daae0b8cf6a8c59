package graft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// Volume is a named, sparse array of pages with a gap-free log of commits.
// It is safe for concurrent use; get it from Store.Volume or
// Store.CreateVolume.
type Volume struct {
	s    *Store
	vol  names.Volume // the volume's checked name
	name string       // vol.String(), for messages and keys
	id   uint64
	key  []byte // the volume record's key

	// state is the volume record as of the newest commit, replaced (never
	// mutated) by writers holding commitMu; readers load it without locks.
	state atomic.Pointer[volumeRecord]

	// commitMu serialises the writers of the volume record: commits, the
	// final step of GC and SetKeepFrom. A commit holds it across its
	// batch's fsync (a second commit on the same volume could only conflict:
	// it cannot begin at an LSN that is not yet published). Commits to other
	// volumes do not wait for it and share the fsync.
	commitMu sync.Mutex

	gcMu sync.Mutex // one GC at a time; held by page faults while they cache

	// faultMu serialises page faults (and a restart or reset, which drop
	// what a fault would cache), so a frame is fetched once. Lock order:
	// faultMu, gcMu, commitMu, pinMu.
	faultMu sync.Mutex

	pushMu sync.Mutex // one push, pull or reset at a time
	// noPending is true once the volume is known to have no pending remote
	// commit, so that Pending reads nothing in the steady state.
	noPending atomic.Bool

	// verified is the remote handle the volume's sync point was checked
	// against (checkRemote), so that a steady-state push or pull costs no
	// request for it.
	verified atomic.Pointer[remoteHandle]

	logMu  sync.Mutex // guards rlog, rlogOf
	rlog   *remote.Log
	rlogOf *remoteHandle

	dropped atomic.Bool // set by Store.DropVolume (drop.go)

	pinMu sync.Mutex
	pins  map[uint64]int // LSN → open snapshots pinning it
	floor uint64         // lowest readable LSN (≥ the persisted horizon)
}

func newVolume(s *Store, vol names.Volume, key []byte, rec volumeRecord) *Volume {
	v := &Volume{s: s, vol: vol, name: vol.String(), id: rec.ID, key: key, pins: make(map[uint64]int), floor: rec.Horizon}
	v.state.Store(&rec)
	return v
}

// Info is api.GraftInfo: a volume's name, LSNs (local, remote, sync
// point), pages and bytes, GC horizon, KeepFrom and creation time. JSON
// field names are those of `echostore volume info`.
type Info = api.GraftInfo

func (r volumeRecord) info(name names.Volume) Info {
	return Info{
		Volume: name, LocalLSN: r.Head, RemoteLSN: r.RemoteLSN, SyncLSN: r.SyncLocal, Pages: r.Pages, Bytes: r.Bytes,
		Horizon: r.Horizon, KeepFrom: r.KeepFrom, Created: time.Unix(0, r.Created),
	}
}

// Name returns the volume's name.
func (v *Volume) Name() names.Volume { return v.vol }

// Head returns the newest committed LSN (0 before the first commit).
func (v *Volume) Head() uint64 { return v.state.Load().Head }

// Info returns the volume's head, page count and byte total, all as of the
// same LSN. It reads no disk.
func (v *Volume) Info() Info { return v.state.Load().info(v.vol) }

// Begin starts a transaction based on the current head. It does no I/O.
func (v *Volume) Begin() *Txn {
	return newTxn(v, v.state.Load().Head)
}

// Snapshot returns a snapshot at the current head. The snapshot pins its
// LSN against GC until Close.
func (v *Volume) Snapshot(ctx context.Context) (*Snapshot, error) {
	for {
		head := v.state.Load().Head
		s, err := v.SnapshotAt(ctx, head)
		if errors.Is(err, ErrSnapshotGone) { // GC passed this head meanwhile
			continue
		}
		return s, err
	}
}

// SnapshotAt returns a snapshot at lsn, which must lie between the volume's
// GC horizon and its head: below it the error wraps ErrSnapshotGone, above
// it ErrFutureLSN. The snapshot pins lsn against GC until Close.
func (v *Volume) SnapshotAt(ctx context.Context, lsn uint64) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("graft: snapshot of volume %q: %w", v.name, err)
	}
	if err := v.pin(lsn); err != nil {
		return nil, err
	}
	return &Snapshot{v: v, lsn: lsn}, nil
}

func (v *Volume) pin(lsn uint64) error {
	if err := v.s.checkOpen(); err != nil {
		return err
	}
	v.pinMu.Lock()
	defer v.pinMu.Unlock()
	if err := v.checkDropped("snapshot of"); err != nil {
		return err
	}
	if head := v.state.Load().Head; lsn > head {
		return fmt.Errorf("graft: volume %q: LSN %d, head is %d: %w", v.name, lsn, head, ErrFutureLSN)
	}
	if lsn < v.floor {
		return &SnapshotGoneError{Volume: v.name, LSN: lsn, Horizon: v.floor}
	}
	v.pins[lsn]++
	return nil
}

func (v *Volume) unpin(lsn uint64) {
	v.pinMu.Lock()
	defer v.pinMu.Unlock()
	if v.pins[lsn]--; v.pins[lsn] <= 0 {
		delete(v.pins, lsn)
	}
}

// SetKeepFrom sets the LSN that GC must keep readable (the replication
// layer's sync point); Unpinned removes the constraint. It fails with
// ErrSnapshotGone if lsn is already below the GC horizon. The change is
// synced before SetKeepFrom returns.
func (v *Volume) SetKeepFrom(ctx context.Context, lsn uint64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("graft: volume %q: keep-from: %w", v.name, err)
	}
	if err := v.s.checkWritable(); err != nil {
		return fmt.Errorf("graft: volume %q: keep-from: %w", v.name, err)
	}
	v.commitMu.Lock()
	defer v.commitMu.Unlock()
	// pinMu is held across the write so that a GC cannot compute its horizon
	// from the old keep-from after the check below.
	v.pinMu.Lock()
	defer v.pinMu.Unlock()
	if err := v.checkDropped("keep-from of"); err != nil {
		return err
	}
	if lsn < v.floor {
		return &SnapshotGoneError{Volume: v.name, LSN: lsn, Horizon: v.floor}
	}
	rec := *v.state.Load()
	rec.KeepFrom = lsn
	if err := v.s.set(v.key, encodeVolumeRecord(rec), pebble.Sync); err != nil {
		return fmt.Errorf("graft: volume %q: keep-from: %w", v.name, err)
	}
	v.state.Store(&rec)
	return nil
}

// Commits returns the commit records of LSNs from..to (inclusive), clamped
// to the head. Records below the GC horizon are gone: from below it fails
// with ErrSnapshotGone.
func (v *Volume) Commits(ctx context.Context, from, to uint64) ([]Commit, error) {
	if from == 0 {
		from = 1
	}
	if head := v.Head(); to > head {
		to = head
	}
	if from > to {
		return nil, nil
	}
	if err := v.pin(from); err != nil {
		return nil, err
	}
	defer v.unpin(from)
	lower := appendCommitKey(nil, v.id, from)
	upper := appendCommitKey(nil, v.id, to)
	upper = append(upper, 0) // inclusive of to
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("graft: volume %q: commits: %w", v.name, err)
	}
	out := make([]Commit, 0, min(to-from+1, 1024))
	want := from
	for ok := it.First(); ok; ok = it.Next() {
		lsn, ok := decodeCommitKey(it.Key(), v.id)
		if !ok || lsn != want {
			_ = it.Close()
			return nil, fmt.Errorf("graft: volume %q: %w", v.name,
				corrupt("commit log", "found key %x where LSN %d belongs", it.Key(), want))
		}
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("graft: volume %q: commits: %w", v.name, err)
		}
		c, err := decodeCommitRecord(lsn, val)
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("graft: volume %q: %w", v.name, err)
		}
		out = append(out, c)
		want++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("graft: volume %q: commits: %w", v.name, err)
	}
	if want != to+1 {
		return nil, fmt.Errorf("graft: volume %q: %w", v.name,
			corrupt("commit log", "commit record of LSN %d missing (head %d)", want, to))
	}
	return out, nil
}
