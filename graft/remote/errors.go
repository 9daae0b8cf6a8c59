package remote

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns for one of these
// conditions wraps the matching sentinel, so callers branch with errors.Is.
var (
	// ErrExists: a conditional create found the key already present.
	ErrExists = errors.New("remote: object exists")
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("remote: object not found")
	// ErrCorrupt: bytes read from the store are not a valid object of the
	// expected kind (bad magic, version, checksum, truncation, bounds).
	ErrCorrupt = errors.New("remote: corrupt object")
	// ErrDiverged: the remote log holds a different commit at an LSN this
	// writer (or follower) expected to own or to extend. See DivergedError.
	ErrDiverged = errors.New("remote: log diverged")
	// ErrBadKey: an object key that could escape the store or is malformed.
	ErrBadKey = errors.New("remote: bad key")
	// ErrBadURL: a remote URL that cannot be parsed or has bad parameters.
	ErrBadURL = errors.New("remote: bad URL")
	// ErrUnavailable: the object store cannot be reached or refuses to
	// serve: connection refused, DNS failure, a timeout, a 5xx or SlowDown
	// answer, missing or refused credentials, a bucket that does not exist.
	// The object asked for may well be fine; try again once the store is
	// back (never read as ErrNotFound or ErrCorrupt).
	ErrUnavailable = errors.New("remote: object store unavailable")
	// ErrUnknownScheme: a remote URL whose scheme has no driver.
	ErrUnknownScheme = errors.New("remote: unknown URL scheme")
	// ErrInvalid: a commit or page the caller asked to write breaks a rule
	// of the format (unsorted pages, oversized page, bad LSN, bad volume).
	ErrInvalid = errors.New("remote: invalid input")
	// ErrTrimmed: the requested LSN is below the oldest commit the remote
	// log still keeps (remote GC removed it); start from a checkpoint.
	ErrTrimmed = errors.New("remote: log trimmed")
	// ErrNoCheckpoint: the volume has no checkpoint commit yet.
	ErrNoCheckpoint = errors.New("remote: no checkpoint")
	// ErrSealed: the object is an encrypted envelope (graft/remote/sealed,
	// docs/FORMAT.md) read through a store opened without its key. It
	// also wraps ErrCorrupt: the bytes are not an object this reader can
	// decode.
	ErrSealed = errors.New("remote: object is encrypted (open the remote with its key: remote_key_file)")
)

// SealedMagic opens every object graft/remote/sealed writes: the envelope
// of an encrypted object (docs/FORMAT.md). It is here so that a reader
// without the key can say that an object is encrypted rather than corrupt.
const SealedMagic = "ESRE"

// DivergedError says that the remote log of Volume holds, at LSN, a commit
// other than the one expected. It wraps ErrDiverged.
type DivergedError struct {
	Volume string
	LSN    uint64
	// Want is the hash the caller expected (its own commit at LSN, or the
	// hash its next commit's PrevHash names); Got is what the remote holds
	// (zero if unknown).
	Want, Got Hash
	// Reason says which check failed.
	Reason string
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("remote: volume %s diverged at lsn %d: %s (want %s, remote has %s)",
		e.Volume, e.LSN, e.Reason, e.Want.Short(), e.Got.Short())
}

// Unwrap returns ErrDiverged.
func (e *DivergedError) Unwrap() error { return ErrDiverged }

// corrupt returns an error wrapping ErrCorrupt that names what was being
// decoded and why it failed.
func corrupt(what, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", what, fmt.Sprintf(format, args...), ErrCorrupt)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalid)
}
