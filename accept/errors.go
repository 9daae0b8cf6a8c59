package accept

import (
	"errors"
	"fmt"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// Sentinel errors. Callers branch on them with errors.Is; every error
// returned wraps one of them, or a context error, or an I/O error.
var (
	// ErrCorrupt: bytes on disk (a block, a segment header, a snapshot) are
	// not what the format allows. A torn tail of the newest log segment is
	// not reported: recovery drops it and keeps the intact prefix.
	ErrCorrupt = errors.New("accept: corrupt outbox data")
	// ErrVersion: a file has the right magic but a format version this code
	// does not read.
	ErrVersion = errors.New("accept: unsupported format version")
	// ErrInvalid: an intent or option is malformed (id 0, a bad queue name, a
	// bad option). Nothing was recorded.
	ErrInvalid = errors.New("accept: invalid input")
	// ErrTooLarge: a payload exceeds Options.MaxPayload. Nothing was recorded.
	ErrTooLarge = errors.New("accept: payload too large")
	// ErrDuplicate: an intent with this id is already in the outbox. Nothing
	// was recorded.
	ErrDuplicate = errors.New("accept: duplicate id")
	// ErrIDConflict: an enqueue under the id of an earlier job (pending in
	// the outbox, or remembered by the job stream's dedup window) with
	// another payload or on another queue. Nothing was recorded; the id
	// stays the earlier job's.
	ErrIDConflict = errors.New("accept: job id taken by another job")
	// ErrTooManyQueues: an enqueue on a queue new to the Tier would exceed
	// TierOptions.MaxQueues. Nothing was recorded.
	ErrTooManyQueues = errors.New("accept: too many queues")
	// ErrClosed: the Outbox is closed.
	ErrClosed = errors.New("accept: outbox closed")
	// ErrBusy: another Outbox, in this process or another, has the
	// directory open.
	ErrBusy = errors.New("accept: outbox directory in use")
	// ErrFailed: an earlier write or fsync of the log failed. The Outbox
	// refuses further work (a failed fsync is not retried: the kernel may
	// have dropped the dirty pages); reopen it to recover from disk.
	ErrFailed = errors.New("accept: outbox failed")
)

// FutureIDError: an enqueue under an explicit id that lies ahead of this
// node's minter (brand.Minter.Top): the minter could mint it later for
// another job, which would then be lost as a duplicate of it. Explicit ids
// are for retrying an id the client was given, or one from the past. It
// wraps ErrInvalid (and brand.ErrAhead); nothing was recorded.
type FutureIDError struct {
	ID    brand.ID // the id asked for
	Queue names.Queue
	Top   brand.ID // the minter's top when the id was refused
	Err   error    // the minter's refusal, wrapping brand.ErrAhead
}

// Error says what was refused and why.
func (e *FutureIDError) Error() string {
	return fmt.Sprintf("accept: enqueue of %s on %s: %v: the id (time %s) is in the future of this node's clock (it mints above %s now); "+
		"explicit ids are for retrying an id the client was given or one from the past; enqueue without an id to have one minted",
		brand.JOB.Format(e.ID), e.Queue, ErrInvalid, e.ID.Time().Format("2006-01-02T15:04:05.000Z07:00"), brand.JOB.Format(e.Top))
}

// Unwrap returns ErrInvalid and the minter's refusal.
func (e *FutureIDError) Unwrap() []error { return []error{ErrInvalid, e.Err} }
