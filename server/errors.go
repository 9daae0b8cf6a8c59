package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Error codes of the JSON error body {"error":{"code":…,"message":…}}.
const (
	CodeBadRequest   = api.CodeBadRequest   // 400: a malformed parameter or body
	CodeInvalidName  = api.CodeInvalidName  // 400: a queue, stream or volume name
	CodeInvalidInput = api.CodeInvalidInput // 400: a record or job that cannot be stored
	CodeUnauthorized = api.CodeUnauthorized // 401: missing or wrong bearer token
	CodeNotFound     = api.CodeNotFound     // 404
	// CodeMethodNotAllowed: 405, the route exists for other methods.
	CodeMethodNotAllowed = api.CodeMethodNotAllowed
	// CodeTooManyStreams: 403, a new stream beyond the server's max_streams.
	CodeTooManyStreams = api.CodeTooManyStreams
	// CodeTooManyQueues: 403, a new job queue beyond the server's max_queues.
	CodeTooManyQueues = api.CodeTooManyQueues
	CodeConflict      = api.CodeConflict // 409: the lease was lost, the volume is behind
	// CodeGone: 410, an as-of read of a state the archive no longer keeps.
	CodeGone = api.CodeGone
	// CodeIDConflict: 409, an enqueue under the id of an earlier job with
	// another payload.
	CodeIDConflict = api.CodeIDConflict
	// CodeWrongType: 409, the stream's Redis key holds another type (a
	// hash, a string, …) than a stream; the message names the key and type.
	CodeWrongType   = api.CodeWrongType
	CodeTimeout     = api.CodeTimeout     // 408: the body did not arrive within body_timeout
	CodeTooLarge    = api.CodeTooLarge    // 413: the body exceeds the server's limit
	CodeUnavailable = api.CodeUnavailable // 503: shutting down, Redis unreachable or loading
	CodeInternal    = api.CodeInternal    // 500
	// CodeRemoteKey: 500, an object of the remote this server cannot open
	// with its keys: sealed with a key it lacks, encrypted while it has no
	// key, or not encrypted while it has one (remote_key_file, docs/SERVE.md).
	CodeRemoteKey = api.CodeRemoteKey
)

// CodeInsufficientStorage is the code of 507: the data dir or the remote
// object store is full; nothing was written, and writes are accepted again
// once space is freed.
const CodeInsufficientStorage = api.CodeInsufficientStorage

// apiError is an error with its HTTP status and code.
type apiError struct {
	status int
	code   string
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, CodeBadRequest, fmt.Errorf(format, a...)}
}

// classify maps an error to its status and code. One case per kind of
// error, the client's mistakes (4xx) first, then what is ours (5xx).
func classify(err error) (int, string) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, names.ErrInvalid):
		return http.StatusBadRequest, CodeInvalidName
	case errors.Is(err, mq.ErrInvalidEntryID), errors.Is(err, mq.ErrInvalidConsumer):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, mq.ErrInvalidRecord), errors.Is(err, mq.ErrSyntax), errors.Is(err, accept.ErrInvalid):
		return http.StatusBadRequest, CodeInvalidInput
	case errors.Is(err, echostore.ErrInvalid):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, accept.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, ErrTooManyStreams):
		return http.StatusForbidden, CodeTooManyStreams
	case errors.Is(err, accept.ErrTooManyQueues):
		return http.StatusForbidden, CodeTooManyQueues
	case errors.Is(err, remote.ErrUnavailable):
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.Is(err, sealed.ErrUnknownKey), errors.Is(err, sealed.ErrNotSealed), errors.Is(err, remote.ErrSealed):
		return http.StatusInternalServerError, CodeRemoteKey
	case errors.Is(err, archive.ErrAsOfFuture):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, archive.ErrAsOfGone):
		return http.StatusGone, CodeGone
	case errors.Is(err, graft.ErrVolumeNotFound), errors.Is(err, mq.ErrNoJob), errors.Is(err, archive.ErrNoStream):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, graft.ErrWouldDiscard), errors.Is(err, graft.ErrRemoteMismatch):
		status, code, _ := volumeCode(err)
		return status, code
	case errors.Is(err, accept.ErrIDConflict), errors.Is(err, mq.ErrIDConflict):
		return http.StatusConflict, CodeIDConflict
	case errors.Is(err, mq.ErrWrongType):
		return http.StatusConflict, CodeWrongType
	case errors.Is(err, archive.ErrFenced), errors.Is(err, archive.ErrVolumeBehind), errors.Is(err, archive.ErrNoVolume),
		errors.Is(err, archive.ErrVolumeOwner), errors.Is(err, accept.ErrDuplicate):
		return http.StatusConflict, CodeConflict
	case graft.IsStorageFull(err): // the data dir (graft, the accept outbox) or the remote
		return http.StatusInsufficientStorage, CodeInsufficientStorage
	case mq.IsUnavailable(err), errors.Is(err, echostore.ErrNoRedis):
		return http.StatusServiceUnavailable, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

// RetryAfter is the Retry-After (seconds) of every 503 answer.
const RetryAfter = "1"

// writeError writes err as {"error":{"code":…,"message":…}}; a 503 carries
// Retry-After.
func writeError(w http.ResponseWriter, err error) {
	status, code := classify(err)
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", RetryAfter)
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: err.Error()}})
}

// ErrorBody is the body of every error answer:
// {"error":{"code":…,"message":…}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is an error answer's code (one of the Code constants) and
// message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, `{"error":{"code":%q,"message":%q}}`+"\n", CodeInternal, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
