package graft

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns for one of these
// conditions wraps the sentinel, so callers branch with errors.Is; the typed
// errors below carry the details for errors.As.
var (
	// ErrVolumeNotFound: the named volume does not exist in this store.
	ErrVolumeNotFound = errors.New("graft: volume not found")
	// ErrNotFound: the page or metadata key has no version at the snapshot's LSN.
	ErrNotFound = errors.New("graft: not found")
	// ErrPageTooLarge: a page is longer than Options.MaxPageSize.
	ErrPageTooLarge = errors.New("graft: page too large")
	// ErrPageRange: a page index is outside the range of the API used
	// (business pages are below ArchiveBase, archive pages at or above it).
	ErrPageRange = errors.New("graft: page index out of range")
	// ErrMetaTooLarge: a metadata key or value exceeds its bound.
	ErrMetaTooLarge = errors.New("graft: metadata too large")
	// ErrTxnTooLarge: a transaction's staged bytes exceed Options.MaxTxnBytes.
	ErrTxnTooLarge = errors.New("graft: transaction too large")
	// ErrEmptyCommit: a commit with neither pages nor metadata.
	ErrEmptyCommit = errors.New("graft: empty commit")
	// ErrTxnDone: the transaction was already committed or discarded.
	ErrTxnDone = errors.New("graft: transaction already committed or discarded")
	// ErrConflict: the volume's head moved past the transaction's base.
	ErrConflict = errors.New("graft: commit conflict")
	// ErrSnapshotGone: the LSN asked for is below the volume's GC horizon.
	ErrSnapshotGone = errors.New("graft: snapshot garbage-collected")
	// ErrFutureLSN: the LSN asked for is above the volume's head.
	ErrFutureLSN = errors.New("graft: LSN not yet committed")
	// ErrCorrupt: stored bytes do not decode; nothing was changed.
	ErrCorrupt = errors.New("graft: corrupt record")
	// ErrClosed: the store or snapshot was closed.
	ErrClosed = errors.New("graft: closed")
	// ErrReadOnly: a write to a store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("graft: store opened read-only")
	// ErrNoStore: Options.ReadOnly and there is no store in the directory.
	ErrNoStore = errors.New("graft: no store in this directory")
	// ErrNoRemote: replication or a page fault needs a remote store and the
	// Store has none (Options.Remote, Store.AttachRemote).
	ErrNoRemote = errors.New("graft: no remote store attached")
	// ErrLocked: another process holds the data directory.
	ErrLocked = errors.New("graft: data directory locked by another process")
)

// PageTooLargeError reports a page longer than the store's limit.
type PageTooLargeError struct {
	Index uint64 // the page index the caller wrote
	Size  int    // the page's length in bytes
	Max   int    // Options.MaxPageSize
}

// Error describes the failure and what to do about it.
func (e *PageTooLargeError) Error() string {
	return fmt.Sprintf("graft: page %d is %d bytes, at most %d are allowed (Options.MaxPageSize)", e.Index, e.Size, e.Max)
}

// Unwrap returns ErrPageTooLarge.
func (e *PageTooLargeError) Unwrap() error { return ErrPageTooLarge }

// PageRangeError reports a page index that the API used may not write.
type PageRangeError struct {
	Archive bool   // true for PutArchive, false for Put
	Index   uint64 // Put: the page index; PutArchive: the offset n
}

// Error describes the failure and what to do about it.
func (e *PageRangeError) Error() string {
	if e.Archive {
		return fmt.Sprintf("graft: archive offset %d overflows the page index space (at most %d)", e.Index, MaxArchiveOffset)
	}
	return fmt.Sprintf("graft: page %d is in the archive range (≥ ArchiveBase = %d); business pages must be below it", e.Index, ArchiveBase)
}

// Unwrap returns ErrPageRange.
func (e *PageRangeError) Unwrap() error { return ErrPageRange }

// MetaTooLargeError reports a metadata key or value over its bound.
type MetaTooLargeError struct {
	KeyLen   int // length of the key in bytes
	ValueLen int // length of the value in bytes
	MaxKey   int // MaxMetaKeyLen
	MaxValue int // Options.MaxMetaValueSize
}

// Error describes the failure and what to do about it.
func (e *MetaTooLargeError) Error() string {
	return fmt.Sprintf("graft: metadata key of %d bytes (at most %d) with value of %d bytes (at most %d)",
		e.KeyLen, e.MaxKey, e.ValueLen, e.MaxValue)
}

// Unwrap returns ErrMetaTooLarge.
func (e *MetaTooLargeError) Unwrap() error { return ErrMetaTooLarge }

// ConflictError reports an optimistic commit that lost: some other commit
// landed on the volume after the transaction began.
type ConflictError struct {
	Volume string
	Base   uint64 // the LSN the transaction began at
	Head   uint64 // the volume's head when the commit was attempted
}

// Error describes the failure and what to do about it.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("graft: commit to volume %q conflicts: began at LSN %d but the head is now %d; begin again and retry",
		e.Volume, e.Base, e.Head)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// SnapshotGoneError reports a read below the volume's GC horizon.
type SnapshotGoneError struct {
	Volume  string
	LSN     uint64 // the LSN asked for
	Horizon uint64 // the lowest LSN still readable
}

// Error describes the failure and what to do about it.
func (e *SnapshotGoneError) Error() string {
	return fmt.Sprintf("graft: LSN %d of volume %q was garbage-collected; the oldest readable LSN is %d",
		e.LSN, e.Volume, e.Horizon)
}

// Unwrap returns ErrSnapshotGone.
func (e *SnapshotGoneError) Unwrap() error { return ErrSnapshotGone }

// CorruptError reports stored bytes that do not decode.
type CorruptError struct {
	What   string // which record: "commit record", "volume record", …
	Reason string
}

// Error describes the failure and what to do about it.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("graft: corrupt %s: %s", e.What, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corrupt(what, format string, args ...any) error {
	return &CorruptError{What: what, Reason: fmt.Sprintf(format, args...)}
}
