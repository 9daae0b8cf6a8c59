package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// MetaOwner is the metadata key of the stream an archive volume belongs
// to: the queue name, '/', the stream name (names never hold a '/'). The
// Archiver writes it in the commit of the volume's first fold, or of the
// first fold after an upgrade for a volume that predates the key
// (docs/ARCHIVE.md, "Volume owner"). Absent: the volume has no owner yet.
const MetaOwner = "archive.owner"

// ErrVolumeOwner: the archive volume belongs to another stream. Names may
// hold '.', so "archive.Q.S" is the volume of more than one (queue,
// stream) pair (a.b/c and a/b.c); the first to fold owns it and the others
// are refused before anything is done.
var ErrVolumeOwner = errors.New("archive: the archive volume belongs to another stream")

// keyOwnerPrefix starts the MetaOwner of a key stream: "{key}" then the
// key's bytes. No queue name holds '{', so it never reads as "Q/S".
const keyOwnerPrefix = "{key}"

// encodeOwner returns the value of MetaOwner for the stream o: "Q/S", or
// "{key}K" for the stream at key K.
func encodeOwner(o names.StreamRef) []byte {
	if k, ok := o.Key(); ok {
		return []byte(keyOwnerPrefix + k.String())
	}
	return []byte(o.String())
}

// decodeOwner parses a value of MetaOwner. The names come from the volume,
// so they are checked here.
func decodeOwner(b []byte) (names.StreamRef, error) {
	if k, ok := strings.CutPrefix(string(b), keyOwnerPrefix); ok {
		o, err := names.ParseKeyRef(k)
		if err != nil {
			return names.StreamRef{}, fmt.Errorf("%s %q is not a stream key: %w", MetaOwner, b, ErrCorrupt)
		}
		return o, nil
	}
	q, s, ok := strings.Cut(string(b), "/")
	if !ok {
		return names.StreamRef{}, fmt.Errorf("%s %q is not queue/stream: %w", MetaOwner, b, ErrCorrupt)
	}
	o, err := names.ParseStreamRef(q, s)
	if err != nil {
		return names.StreamRef{}, fmt.Errorf("%s %q is not queue/stream: %w", MetaOwner, b, ErrCorrupt)
	}
	return o, nil
}

// OwnerError is a request of stream Queue/Stream refused because its
// archive volume belongs to Owner. Nothing was done.
type OwnerError struct {
	Queue, Stream string          // the stream the request was for
	Volume        string          // the shared volume name
	Owner         names.StreamRef // the stream the volume belongs to
}

// Error names both streams and the volume.
func (e *OwnerError) Error() string {
	if e.Queue == "" {
		return fmt.Sprintf("archive: %s is the archive volume of %s, not of %s: refused, nothing was done", e.Volume, e.Owner, e.Stream)
	}
	return fmt.Sprintf("archive: %s is the archive volume of %s, not of %s/%s (both names map to it): refused, nothing was done; archive one of the two streams under another name",
		e.Volume, e.Owner, e.Queue, e.Stream)
}

// newOwnerError is the *OwnerError of a request of want refused because
// volume belongs to o. For a key stream Queue is "" and Stream is
// want.String().
func newOwnerError(want names.StreamRef, volume string, o names.StreamRef) *OwnerError {
	if want.IsKey() {
		return &OwnerError{Stream: want.String(), Volume: volume, Owner: o}
	}
	return &OwnerError{Queue: want.Queue().String(), Stream: want.Stream().String(), Volume: volume, Owner: o}
}

// Unwrap returns ErrVolumeOwner.
func (e *OwnerError) Unwrap() error { return ErrVolumeOwner }

// ownerAt reads the owner recorded at snap; ok is false when the volume
// has none (nothing folded yet, or folded before owners were recorded).
func ownerAt(ctx context.Context, snap *graft.Snapshot) (o names.StreamRef, ok bool, err error) {
	b, err := snap.Meta(ctx, MetaOwner)
	if errors.Is(err, graft.ErrNotFound) {
		return names.StreamRef{}, false, nil
	}
	if err != nil {
		return names.StreamRef{}, false, fmt.Errorf("archive owner of %s at LSN %d: %w", snap.Volume().Name(), snap.LSN(), err)
	}
	if o, err = decodeOwner(b); err != nil {
		return names.StreamRef{}, false, fmt.Errorf("archive owner of %s at LSN %d: %w", snap.Volume().Name(), snap.LSN(), err)
	}
	return o, true, nil
}

// checkOwnerAt returns an *OwnerError if snap records an owner other than
// want; nil if it records want or none.
func checkOwnerAt(ctx context.Context, snap *graft.Snapshot, want names.StreamRef) error {
	o, ok, err := ownerAt(ctx, snap)
	if err != nil {
		return err
	}
	if ok && o != want {
		return newOwnerError(want, snap.Volume().Name().String(), o)
	}
	return nil
}

// VolumeOwner returns the stream the archive volume vol belongs to, at its
// head; ok is false when the volume records none.
func VolumeOwner(ctx context.Context, vol *graft.Volume) (o names.StreamRef, ok bool, err error) {
	snap, err := vol.Snapshot(ctx)
	if err != nil {
		return names.StreamRef{}, false, fmt.Errorf("archive owner of %s: %w", vol.Name(), err)
	}
	defer snap.Close()
	return ownerAt(ctx, snap)
}

// CheckOwner returns an *OwnerError (ErrVolumeOwner) when the archive
// volume vol records an owner other than stream s of queue q. A volume
// that records none passes: it was never folded, or was folded before
// owners were recorded, and its next fold by an Archiver records one.
func CheckOwner(ctx context.Context, vol *graft.Volume, ref names.StreamRef) error {
	snap, err := vol.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("archive owner of %s: %w", vol.Name(), err)
	}
	defer snap.Close()
	return checkOwnerAt(ctx, snap, ref)
}

// StreamFrontier is Frontier for stream s of queue q: it reads the state
// and the owner at one snapshot of vol's head and refuses a volume that
// belongs to another stream (*OwnerError).
func StreamFrontier(ctx context.Context, vol *graft.Volume, ref names.StreamRef) (State, error) {
	snap, err := vol.Snapshot(ctx)
	if err != nil {
		return State{}, fmt.Errorf("archive frontier of %s: %w", vol.Name(), err)
	}
	defer snap.Close()
	if err := checkOwnerAt(ctx, snap, ref); err != nil {
		return State{}, err
	}
	return stateAt(ctx, snap)
}

// remoteOwner reads the owner of volume vname from its remote log: the
// newest checkpoint holds every metadata key, and the commits after it
// only those they change, so it reads the checkpoint, then the commits
// after it oldest first until one sets MetaOwner (an owner, once set, is
// never changed). ok is false when the log records none (or is empty, or
// was partly deleted by an earlier delete).
func remoteOwner(ctx context.Context, rs remote.Store, vol names.Volume) (o names.StreamRef, ok bool, err error) {
	l, err := remote.NewLog(rs, vol)
	if err != nil {
		return names.StreamRef{}, false, err
	}
	from := func(meta map[string][]byte) (names.StreamRef, bool, error) {
		b, has := meta[MetaOwner]
		if !has {
			return names.StreamRef{}, false, nil
		}
		o, err := decodeOwner(b)
		if err != nil {
			return names.StreamRef{}, false, fmt.Errorf("remote log of %s: %w", vol, err)
		}
		return o, true, nil
	}
	var after uint64
	var afterHash remote.Hash
	// A log a delete removed in part (commits newest first, then the
	// checkpoint markers) is read from its oldest commit, and a commit
	// missing in it ends the scan: that delete found the owner it checked.
	gone := func(err error) bool { return errors.Is(err, remote.ErrNotFound) || errors.Is(err, remote.ErrTrimmed) }
	cp, err := l.LatestCheckpoint(ctx)
	switch {
	case errors.Is(err, remote.ErrNoCheckpoint), gone(err):
	case err != nil:
		return names.StreamRef{}, false, fmt.Errorf("archive owner of %s in the remote: %w", vol, err)
	default:
		if o, ok, err := from(cp.Commit.Meta); ok || err != nil {
			return o, ok, err
		}
		after, afterHash = cp.LSN(), cp.Hash
	}
	for e, err := range l.Since(ctx, after, afterHash) {
		if gone(err) {
			break
		}
		if err != nil {
			return names.StreamRef{}, false, fmt.Errorf("archive owner of %s in the remote: %w", vol, err)
		}
		if o, ok, err := from(e.Commit.Meta); ok || err != nil {
			return o, ok, err
		}
	}
	return names.StreamRef{}, false, nil
}
