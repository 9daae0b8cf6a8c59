package mq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/echostore/echostore/api"
)

// Sentinel errors. Callers branch on them with errors.Is; the errors
// returned carry the queue, stream or record they concern.
var (
	// ErrInvalidRecord is wrapped by every error about a record that cannot
	// be stored: no fields, a duplicate field name, invalid UTF-8, too large
	// (api.ErrInvalidRecord; the next three are api's too).
	ErrInvalidRecord = api.ErrInvalidRecord
	// ErrEmptyRecord: a record with no fields (Redis keeps no such entry).
	ErrEmptyRecord = api.ErrEmptyRecord
	// ErrDuplicateField: two fields of one record share a name.
	ErrDuplicateField = api.ErrDuplicateField
	// ErrInvalidUTF8: a field name or value is not valid UTF-8.
	ErrInvalidUTF8 = api.ErrInvalidUTF8
	// ErrTooLarge: a record has more fields or bytes than Limits allow.
	ErrTooLarge = fmt.Errorf("record too large: %w", ErrInvalidRecord)
	// ErrReservedField: a job field uses a name the job queue keeps for
	// itself (see ReservedJobFields).
	ErrReservedField = fmt.Errorf("reserved field name: %w", ErrInvalidRecord)

	// ErrSyntax: JSON text that is not a record (or not a fields object)
	// (api.ErrSyntax).
	ErrSyntax = api.ErrSyntax

	// ErrForeignEntry: a reply to a stream read that is not an entry: an id
	// that is not a Redis id, no fields, or an odd number of field strings.
	// Every entry Redis stores is a record (any id, any bytes), so only a
	// server that does not speak Redis streams sends one. Reads report such
	// replies instead of skipping them.
	ErrForeignEntry = errors.New("stream entry is not a record")

	// ErrEvictingPolicy: the server's maxmemory-policy may evict keys
	// (invariant 9). Set maxmemory-policy to noeviction, or connect with
	// Options.AllowEviction.
	ErrEvictingPolicy = errors.New("redis maxmemory-policy may evict keys")

	// ErrArchived: the stream is registered as archived, so only the archive
	// driver (which folds before it trims) may trim it.
	ErrArchived = errors.New("stream is archived: only the archive driver may trim it")

	// ErrOutcomeUnknown: an append or enqueue was sent but its reply was
	// lost and the retries ran out (or the context ended) before its
	// outcome was known. The records may or may not be in the stream, under
	// the ids reported in the *AppendError; the jobs may or may not be
	// enqueued, under the ids reported in the *EnqueueError.
	ErrOutcomeUnknown = errors.New("outcome unknown: the reply was lost")

	// ErrLaneGap: a lane follower fell behind by more than the lane's cap;
	// the entries between its last seen id and the oldest kept one are gone.
	ErrLaneGap = errors.New("lane entries were trimmed before they were read")

	// ErrNoJob: a job id or entry that is not pending in the queue.
	ErrNoJob = errors.New("no such pending job")
	// ErrJobNotPending: a Fail of a delivery that is pending no more
	// (acknowledged, failed or buried already). It wraps ErrNoJob; a Fail
	// of one that another consumer has taken over is ErrNoJob alone.
	ErrJobNotPending = fmt.Errorf("%w: not pending any more", ErrNoJob)

	// ErrIDConflict: a job id enqueued within the dedup window with other
	// fields: the id is taken, and the job was not enqueued.
	ErrIDConflict = errors.New("job id already enqueued with other fields")

	// ErrInvalidEntryID: an entry id (ack, redrive, dead letters after) that
	// is not a stream id <ms>-<seq> (or <ms>) of decimal 64-bit numbers.
	// Nothing was sent.
	ErrInvalidEntryID = errors.New("invalid stream entry id")

	// ErrInvalidConsumer: a consumer name that is empty, longer than
	// MaxConsumerName bytes, not UTF-8, or holds a space or a control or
	// other non-graphic character. Nothing was sent.
	ErrInvalidConsumer = errors.New("invalid consumer name")

	// ErrUnavailable: Redis could not be reached or cannot serve now (see
	// IsUnavailable); the call may succeed later.
	ErrUnavailable = errors.New("redis unavailable")

	// ErrBadURL: a Redis URL this package does not accept.
	ErrBadURL = errors.New("invalid redis URL")
)

// RecordError is api.RecordError: which record and field of an input is
// invalid, wrapping one of the ErrInvalidRecord sentinels.
type RecordError = api.RecordError

// EntryError reports a stream entry that is not a record (ErrForeignEntry).
// XID is its raw id. It wraps ErrForeignEntry and the cause.
type EntryError struct {
	Key string // the stream key
	XID string // the entry's Redis id as the server gave it
	Err error  // the cause (xid.ErrSyntax, ErrInvalidRecord, …)
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("%s entry %s: %v: %v", e.Key, clip(e.XID), ErrForeignEntry, e.Err)
}

func (e *EntryError) Unwrap() []error { return []error{ErrForeignEntry, e.Err} }

// clip shortens s for an error message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ErrWrongType: a key holds another type than the command needs, such as
// a hash or a string where a stream is read, appended to or trimmed (Redis's
// WRONGTYPE reply). Nothing was written. The error is a *WrongTypeError
// naming the key and its type.
var ErrWrongType = errors.New("key holds the wrong type")

// WrongTypeError reports a WRONGTYPE reply: Key holds a Type (as Redis's
// TYPE names it: "hash", "string", "list", "set", "zset") where a stream
// is wanted. Key is "" when no stream key of the command holds another
// type (another key of a script did). It wraps ErrWrongType and the reply.
type WrongTypeError struct {
	Key  string // the key that holds another type than a stream
	Type string // its type, TYPE's reply
	Err  error  // Redis's WRONGTYPE reply
}

func (e *WrongTypeError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("a key of the command holds another type than echostore keeps there: %v", e.Err)
	}
	return fmt.Sprintf("key %q holds a %s, not a stream", clip(e.Key), e.Type)
}

func (e *WrongTypeError) Unwrap() []error { return []error{ErrWrongType, e.Err} }

// isWrongType reports whether err is, or wraps, Redis's WRONGTYPE reply.
func isWrongType(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && !re.IsNil() && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// typeError turns a WRONGTYPE reply into a *WrongTypeError that names the
// first of keys that should hold a stream (isStreamKey) and holds another
// type: one TYPE per such key, asked only here, on the error path. Any
// other error, and one that is a *WrongTypeError already, is returned as
// it is.
func (c *Client) typeError(ctx context.Context, err error, keys ...string) error {
	var wte *WrongTypeError
	if !isWrongType(err) || errors.As(err, &wte) {
		return err
	}
	wte = &WrongTypeError{Err: err}
	for _, k := range keys {
		if !isStreamKey(k) {
			continue
		}
		typ, terr := c.rdb.Do(ctx, c.rdb.B().Type().Key(k).Build()).ToString()
		if terr == nil && typ != "stream" && typ != "none" {
			wte.Key, wte.Type = k, typ
			break
		}
	}
	return wte
}

// isStreamKey reports whether key is one that holds a stream: any key
// outside echostore's namespace (a key stream, a replay target) or the
// stream key of a queue's stream, emq:{Q}:stream:S (names hold no ':').
// echostore's other keys (seam caches, leases, sets) hold other types.
func isStreamKey(key string) bool {
	rest, ok := strings.CutPrefix(key, "emq:{")
	if !ok {
		return true
	}
	_, s, ok := strings.Cut(rest, "}:stream:")
	return ok && s != "" && !strings.Contains(s, ":")
}
