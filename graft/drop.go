package graft

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/echostore/echostore/names"
)

var (
	// ErrVolumeDropped: the volume was dropped (Store.DropVolume); its
	// *Volume handle serves nothing any more.
	ErrVolumeDropped = errors.New("graft: volume dropped")
	// ErrVolumeInUse: DropVolume found snapshots of the volume open.
	ErrVolumeInUse = errors.New("graft: volume in use")
	// ErrPushPending: DropVolume found a pending remote commit, a push that
	// may or may not have landed in the remote log; push (or reset) first.
	ErrPushPending = errors.New("graft: remote commit pending")
)

// DropRefusedError reports why DropVolume left a volume in place.
type DropRefusedError struct {
	Volume    string
	Snapshots int  // open snapshots (ErrVolumeInUse) if > 0
	Pending   bool // a pending remote commit (ErrPushPending)
}

// Error describes the refusal and what to do about it.
func (e *DropRefusedError) Error() string {
	if e.Snapshots > 0 {
		return fmt.Sprintf("graft: drop volume %q: %d snapshot(s) open; close them first", e.Volume, e.Snapshots)
	}
	return fmt.Sprintf("graft: drop volume %q: a remote commit is pending (a push that may have landed); push or reset the volume first", e.Volume)
}

// Unwrap returns ErrVolumeInUse or ErrPushPending.
func (e *DropRefusedError) Unwrap() error {
	if e.Snapshots > 0 {
		return ErrVolumeInUse
	}
	return ErrPushPending
}

// checkDropped fails with ErrVolumeDropped once DropVolume removed v. The
// writers call it under commitMu and pin under pinMu, which DropVolume
// holds while it deletes, so nothing reaches the store after a drop.
func (v *Volume) checkDropped(op string) error {
	if v.dropped.Load() {
		return fmt.Errorf("graft: %s volume %q: %w", op, v.name, ErrVolumeDropped)
	}
	return nil
}

// DropVolume deletes the named volume from the store: every page and
// metadata version, commit record, frame record, the pending remote commit
// (key ranges 0x02..0x06 of its id) and the volume record, in one synced
// batch. It refuses (a *DropRefusedError) while snapshots of the volume are
// open or a remote commit is pending; unpushed local commits are dropped
// with the rest. The volume's remote log, if any, is not touched. After the
// drop, every use of the volume's *Volume handle fails with
// ErrVolumeDropped, and Store.Volume of the name with ErrVolumeNotFound. A
// name that does not exist fails with ErrVolumeNotFound.
func (s *Store) DropVolume(ctx context.Context, vol names.Volume) error {
	v, err := s.Volume(ctx, vol)
	if err != nil {
		return err
	}
	name := vol.String()
	if err := s.checkWritable(); err != nil {
		return fmt.Errorf("graft: drop volume %q: %w", name, err)
	}
	// Every lock of the volume, in the documented order, so no push, pull,
	// fault, GC, commit or snapshot runs beside the drop.
	v.pushMu.Lock()
	defer v.pushMu.Unlock()
	defer v.lockAll()()
	if err := v.checkDropped("drop"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("graft: drop volume %q: %w", name, err)
	}
	open := 0
	for _, n := range v.pins {
		open += n
	}
	if open > 0 {
		return &DropRefusedError{Volume: name, Snapshots: open}
	}
	pending, err := v.Pending(ctx)
	if err != nil {
		return err
	}
	if pending != nil {
		return &DropRefusedError{Volume: name, Pending: true}
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := errors.Join(
		deleteVolumeData(b, v.id),
		b.Delete(v.key, nil),
		s.commit(b, pebble.Sync),
	); err != nil {
		return fmt.Errorf("graft: drop volume %q: %w", name, err)
	}
	v.dropped.Store(true)
	s.mu.Lock()
	if s.vols[name] == v {
		delete(s.vols, name)
	}
	s.mu.Unlock()
	s.log.Debug("graft: volume dropped", "volume", name, "id", v.id)
	return nil
}

// lockAll takes, in the documented order, every lock but pushMu that a
// writer of the volume takes (page faults, GC, commits, snapshot pins), so
// that nothing changes the volume until the returned function releases them.
func (v *Volume) lockAll() (unlock func()) {
	v.faultMu.Lock()
	v.gcMu.Lock()
	v.commitMu.Lock()
	v.pinMu.Lock()
	return func() {
		v.pinMu.Unlock()
		v.commitMu.Unlock()
		v.gcMu.Unlock()
		v.faultMu.Unlock()
	}
}
