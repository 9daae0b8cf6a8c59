package accept

import "errors"

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
