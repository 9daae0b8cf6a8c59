package graft

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/graft/remote"
)

// A remote carries an identity: the object IdentityKey at its root,
// written by the first push to it (a conditional create, so two first
// pushes agree on one) and read by every push, pull, reset and page fault.
// The volume record keeps the identity of the remote its sync point refers
// to, so that a data dir pointed at another remote (another or an empty
// bucket, another prefix) is refused with ErrRemoteMismatch instead of
// reporting success against a remote that lacks its pushed commits.
// docs/REMOTE.md ("Identity object") gives the bytes.

// IdentityKey is the key of a remote's identity object.
const IdentityKey = "identity"

const (
	identityMagic   = "ESRI"
	identityVersion = 1
	identityLen     = 4 + 2 + 2 + 16 + 8 + 4
)

// RemoteID is a remote's identity: 128 random bits. The zero value means
// none (a volume never pushed or pulled, or synced by a version before
// identities; a remote written only by such versions).
type RemoteID [16]byte

// IsZero reports whether id is the zero value.
func (id RemoteID) IsZero() bool { return id == RemoteID{} }

// String returns id in hex.
func (id RemoteID) String() string { return hex.EncodeToString(id[:]) }

// Identity is a remote's identity object.
type Identity struct {
	ID      RemoteID
	Created time.Time // when the first push wrote it
}

// EncodeIdentity returns the bytes of the identity object: magic "ESRI",
// version u16 = 1, flags u16 = 0, the 16 id bytes, the creation time
// (u64, Unix nanoseconds) and a CRC-32C of all of it, big-endian: 36 bytes.
func EncodeIdentity(in Identity) []byte {
	b := make([]byte, 0, identityLen)
	b = append(b, identityMagic...)
	b = binary.BigEndian.AppendUint16(b, identityVersion)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = append(b, in.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(in.Created.UnixNano()))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, durable.Castagnoli))
}

// DecodeIdentity decodes an identity object; anything but exactly the
// bytes EncodeIdentity writes (with a non-zero id) wraps ErrCorrupt.
func DecodeIdentity(b []byte) (Identity, error) {
	const what = "remote identity object"
	switch {
	case len(b) >= 4 && string(b[:4]) == remote.SealedMagic:
		return Identity{}, fmt.Errorf("%s: %w: %w", what, remote.ErrSealed, ErrCorrupt)
	case len(b) != identityLen:
		return Identity{}, corrupt(what, "%d bytes, want %d", len(b), identityLen)
	case binary.BigEndian.Uint32(b[identityLen-4:]) != crc32.Checksum(b[:identityLen-4], durable.Castagnoli):
		return Identity{}, corrupt(what, "checksum mismatch")
	case string(b[:4]) != identityMagic:
		return Identity{}, corrupt(what, "magic %q", b[:4])
	case binary.BigEndian.Uint16(b[4:]) != identityVersion || binary.BigEndian.Uint16(b[6:]) != 0:
		return Identity{}, corrupt(what, "version %d, flags %d", binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]))
	}
	var in Identity
	copy(in.ID[:], b[8:24])
	in.Created = time.Unix(0, int64(binary.BigEndian.Uint64(b[24:])))
	if in.ID.IsZero() {
		return Identity{}, corrupt(what, "zero id")
	}
	return in, nil
}

// ErrRemoteMismatch: the remote attached is not the one the volume was
// pushed to or pulled from (its identity differs, or it has none, or it
// lacks the volume's pushed commits). Nothing was changed. Point --remote
// at the volume's remote; a volume that should move to a new remote is
// pulled into a fresh data dir and pushed from there.
var ErrRemoteMismatch = errors.New("graft: the remote is not the volume's remote")

// RemoteMismatchError reports a push, pull, reset or read against a remote
// that is not the volume's.
type RemoteMismatchError struct {
	Volume    string
	Op        string   // push, pull, reset, read
	Want      RemoteID // the identity the volume recorded (zero: none recorded)
	Got       RemoteID // the attached remote's (zero: it has none)
	RemoteLSN uint64   // the remote LSN the volume is synced at
	Reason    string
}

// Error says what differs and what to do.
func (e *RemoteMismatchError) Error() string {
	return fmt.Sprintf("graft: %s volume %q: the remote attached is not the volume's remote: %s (the volume is synced at remote LSN %d); nothing was changed: point --remote at the remote it was pushed to",
		e.Op, e.Volume, e.Reason, e.RemoteLSN)
}

// Unwrap returns ErrRemoteMismatch.
func (e *RemoteMismatchError) Unwrap() error { return ErrRemoteMismatch }

// identityCache is a remote handle's identity, read once.
type identityCache struct {
	mu      sync.Mutex
	id      RemoteID // zero until found (or written)
	checked bool     // the remote was found without one (cached: a follower does not look again)
}

// identity returns the identity of the remote of h (zero if it has none).
// With create, a remote without one gets one (a conditional create; if
// another process created it first, its identity is read). A found
// identity is cached for the handle's life.
func (h *remoteHandle) identity(ctx context.Context, create bool) (RemoteID, error) {
	h.ident.mu.Lock()
	defer h.ident.mu.Unlock()
	if !h.ident.id.IsZero() || (h.ident.checked && !create) {
		return h.ident.id, nil
	}
	for attempt := 0; ; attempt++ {
		b, err := h.store.Get(ctx, IdentityKey)
		switch {
		case err == nil:
			in, err := DecodeIdentity(b)
			if err != nil {
				return RemoteID{}, fmt.Errorf("graft: remote %s: %w", IdentityKey, err)
			}
			h.ident.id = in.ID
			return in.ID, nil
		case !errors.Is(err, remote.ErrNotFound):
			return RemoteID{}, fmt.Errorf("graft: remote identity: %w", err)
		case !create || attempt > 0:
			h.ident.checked = true
			return RemoteID{}, nil
		}
		in := Identity{Created: time.Now()}
		if _, err := rand.Read(in.ID[:]); err != nil {
			return RemoteID{}, fmt.Errorf("graft: remote identity: %w", err)
		}
		err = h.store.PutIfAbsent(ctx, IdentityKey, EncodeIdentity(in))
		if err == nil {
			h.ident.id = in.ID
			return in.ID, nil
		}
		if !errors.Is(err, remote.ErrExists) {
			// The reply may be lost while the object landed: read it.
			if b, gerr := h.store.Get(ctx, IdentityKey); gerr == nil {
				if got, derr := DecodeIdentity(b); derr == nil {
					h.ident.id = got.ID
					return got.ID, nil
				}
			}
			return RemoteID{}, fmt.Errorf("graft: write the remote identity: %w", err)
		}
		// Another first push won: read its identity.
	}
}

// checkRemote refuses, with a *RemoteMismatchError and before anything is
// changed, a remote that is not the volume's, for op (push, pull, reset).
// The caller holds pushMu. A volume synced with a remote (remote LSN > 0)
// that recorded its identity needs that identity; one synced by an earlier
// version (none recorded) needs the remote to hold its sync commit (one
// GET; a trimmed one passes). A volume never synced takes any remote. With
// create (a push), a remote without an identity gets one. On success the
// remote's identity is recorded in the volume record (adopting a volume or
// a remote from before identities), unless the store is read-only.
func (v *Volume) checkRemote(ctx context.Context, l *remote.Log, op string, create bool) error {
	h := v.s.remote.Load()
	if h == nil {
		return fmt.Errorf("graft: %s volume %q: %w", op, v.name, ErrNoRemote)
	}
	if v.verified.Load() == h {
		return nil // checked against this remote already
	}
	st := v.state.Load()
	mismatch := func(got RemoteID, format string, args ...any) error {
		return &RemoteMismatchError{Volume: v.name, Op: op, Want: st.RemoteID, Got: got, RemoteLSN: st.RemoteLSN,
			Reason: fmt.Sprintf(format, args...)}
	}
	id, err := h.identity(ctx, false)
	if err != nil {
		return fmt.Errorf("graft: %s volume %q: %w", op, v.name, err)
	}
	synced := st.RemoteLSN > 0
	switch {
	case synced && !st.RemoteID.IsZero():
		if id.IsZero() {
			return mismatch(id, "the volume was pushed to remote %s, and this remote has no identity object (an empty bucket, or another one?)", st.RemoteID)
		}
		if id != st.RemoteID {
			return mismatch(id, "the volume was pushed to remote %s, this remote is %s", st.RemoteID, id)
		}
		v.verified.Store(h)
		return nil
	case synced:
		// Synced before identities: the remote must hold the sync commit.
		e, err := l.Read(ctx, st.RemoteLSN)
		switch {
		case errors.Is(err, remote.ErrTrimmed):
		case errors.Is(err, remote.ErrNotFound):
			return mismatch(id, "this remote has no remote LSN %d of the volume", st.RemoteLSN)
		case err != nil:
			return fmt.Errorf("graft: %s volume %q: check the remote: %w", op, v.name, err)
		case e.Hash != st.RemoteHash:
			return mismatch(id, "this remote's commit at remote LSN %d is another one (hash %s, the volume's %s)", st.RemoteLSN, e.Hash, remote.Hash(st.RemoteHash))
		}
	}
	if id.IsZero() && create {
		if id, err = h.identity(ctx, true); err != nil {
			return fmt.Errorf("graft: %s volume %q: %w", op, v.name, err)
		}
	}
	if !id.IsZero() && id != st.RemoteID && !v.s.opts.ReadOnly {
		if err := v.recordRemoteID(ctx, id); err != nil {
			return err
		}
	}
	v.verified.Store(h)
	return nil
}

// recordRemoteID records id as the volume's remote, synced.
func (v *Volume) recordRemoteID(ctx context.Context, id RemoteID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.commitMu.Lock()
	defer v.commitMu.Unlock()
	v.pinMu.Lock()
	defer v.pinMu.Unlock()
	if err := v.checkDropped("remote identity of"); err != nil {
		return err
	}
	rec := *v.state.Load()
	rec.RemoteID = id
	if err := v.s.set(v.key, encodeVolumeRecord(rec), pebble.Sync); err != nil {
		return fmt.Errorf("graft: volume %q: record the remote identity: %w", v.name, err)
	}
	v.state.Store(&rec)
	return nil
}

// checkFaultRemote refuses a page fault from a remote that is not the one
// the volume recorded (a recorded identity is needed to tell; a volume
// without one fetches as before).
func (v *Volume) checkFaultRemote(ctx context.Context) error {
	st := v.state.Load()
	if st.RemoteID.IsZero() {
		return nil
	}
	h := v.s.remote.Load()
	if h == nil {
		return nil
	}
	id, err := h.identity(ctx, false)
	if err != nil {
		return err
	}
	if id != st.RemoteID {
		reason := fmt.Sprintf("the volume was pulled from remote %s, this remote is %s", st.RemoteID, id)
		if id.IsZero() {
			reason = fmt.Sprintf("the volume was pulled from remote %s, and this remote has no identity object", st.RemoteID)
		}
		return &RemoteMismatchError{Volume: v.name, Op: "read", Want: st.RemoteID, Got: id, RemoteLSN: st.RemoteLSN, Reason: reason}
	}
	return nil
}

// CheckRemote verifies that the attached remote is the one the volume
// synced with, as a push or pull does before it touches the remote log
// (ErrNoRemote without one; a *RemoteMismatchError for another remote).
// The answer is kept while the attached store stays the same, so a check
// after the first costs no request. Remote GC calls it before it writes a
// checkpoint or deletes anything of the volume's log.
func (v *Volume) CheckRemote(ctx context.Context) error {
	l := v.remoteLog()
	if l == nil {
		return fmt.Errorf("graft: remote gc of volume %q: %w", v.name, ErrNoRemote)
	}
	return v.checkRemote(ctx, l, "remote gc of", false)
}

// RemoteIdentity returns the identity of the remote attached to the store,
// writing one first if the remote has none (as a first push does). Nodes
// that share a remote share its identity, whatever URL names it: serve's
// nodes take it as the name of the group that shares the archived streams.
// No remote attached fails wrapping ErrNoRemote.
func (s *Store) RemoteIdentity(ctx context.Context) (RemoteID, error) {
	h := s.remote.Load()
	if h == nil {
		return RemoteID{}, fmt.Errorf("graft: remote identity: %w", ErrNoRemote)
	}
	return h.identity(ctx, true)
}
