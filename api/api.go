// Package api is the wire contract of echostore serve, written once: the
// error codes of its JSON error body, the token scopes of its HTTP API and
// its RESP front, the name of its unix socket, the confirmation words of
// the commands that drop what exists nowhere else, and the body of
// /healthz; and the values the API carries, with their JSON: records and
// their codec (record.go, json.go: the one place that renders a record
// and the one that parses it back; json_decode.go: claimed jobs and dead
// letters read back), jobs and queues (jobs.go), streams and
// reads (stream.go), archive cycles and status (archive.go), volumes
// (volume.go) and replays (replay.go). The server, the client, the RESP
// front and the write rule all name these; none defines its own, and the
// engine's packages (the root package, mq, archive, graft, accept) give
// them their own names by aliases.
//
// It imports the standard library, the leaf packages its values are made
// of, xid, brand and names, and the JSON tokenizer jsontext (of
// github.com/go-json-experiment/json, pure Go on the standard library),
// alone, so that any program may speak the contract without linking the
// engine (TestLeaf).
package api

import "fmt"

// SocketName is the unix socket in the data dir on which a running serve
// answers the same API as on its TCP address (mode 0600).
const SocketName = "serve.sock"

// The confirmation words of the commands that drop what exists nowhere
// else: the HTTP API's confirm parameter and the CLI's flag (--WORD).
const (
	// DeleteConfirm confirms the delete of a stream and its archived
	// history (DELETE /v1/streams/{q}/{s}, archive delete).
	DeleteConfirm = "yes-delete-history"
	// DeleteDeadConfirm confirms the delete of dead letters (DELETE
	// /v1/queues/{q}/dead, queue delete-dead).
	DeleteDeadConfirm = "yes-delete-jobs"
)

// Health is the body of GET /healthz: Status "ok" (200), or "degraded" or
// "shutting_down" (503), and each dependency's state, "ok" or
// "unavailable: <reason>" (secrets hidden).
type Health struct {
	Status string `json:"status"`
	Redis  string `json:"redis"`
	Remote string `json:"remote"`
}

// The codes of the JSON error body {"error":{"code":…,"message":…}}, with
// the HTTP status each comes with.
const (
	CodeBadRequest   = "bad_request"   // 400: a malformed parameter or body
	CodeInvalidName  = "invalid_name"  // 400: a queue, stream or volume name
	CodeInvalidInput = "invalid_input" // 400: a record or job that cannot be stored
	CodeUnauthorized = "unauthorized"  // 401: a missing or wrong bearer token
	// CodeForbidden: 403, a token without the scope the route needs.
	CodeForbidden = "forbidden"
	// CodePeerRefused: 403, a request over the unix socket whose peer is
	// neither serve's own user nor root (whatever token it carries).
	CodePeerRefused = "peer_refused"
	// CodeCrossSite: 403, a request another site's page sent.
	CodeCrossSite = "cross_site"
	// CodeTooManyStreams: 403, a new stream beyond the server's max_streams.
	CodeTooManyStreams = "too_many_streams"
	// CodeTooManyQueues: 403, a new job queue beyond the server's max_queues.
	CodeTooManyQueues = "too_many_queues"
	CodeNotFound      = "not_found" // 404
	// CodeMethodNotAllowed: 405, the route exists for other methods.
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTimeout          = "timeout"  // 408: the body did not arrive in time
	CodeConflict         = "conflict" // 409: the lease was lost, the volume is behind
	// CodeGone: 410, an as-of read of a state the archive no longer keeps
	// (its GC horizon passed it); the message says which LSNs it keeps.
	CodeGone = "gone"
	// CodeIDConflict: 409, an enqueue under the id of an earlier job with
	// another payload.
	CodeIDConflict = "id_conflict"
	// CodeWrongType: 409, the stream's Redis key holds another type than a
	// stream; the message names the key and its type.
	CodeWrongType = "wrong_type"
	// CodeWouldDiscard: 409, a reset to the remote would discard
	// acknowledged records; repeat the count with discard=N to go on.
	CodeWouldDiscard = "would_discard"
	// CodeRemoteMismatch: 409, the remote is not the one the data dir was
	// replicated to.
	CodeRemoteMismatch = "remote_mismatch"
	CodeTooLarge       = "too_large" // 413: the body exceeds the server's limit
	// CodeUnsupportedMediaType: 415, a body that is not application/json.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeMisdirected: 421, a Host that is neither the listen address nor
	// in allowed_hosts.
	CodeMisdirected = "misdirected"
	CodeInternal    = "internal" // 500
	// CodeRemoteKey: 500, an object of the remote the server cannot open
	// with its keys.
	CodeRemoteKey   = "remote_key"
	CodeUnavailable = "unavailable" // 503: shutting down, Redis unreachable or loading
	// CodeInsufficientStorage: 507, the data dir or the remote object store
	// is full; nothing was written.
	CodeInsufficientStorage = "insufficient_storage"
)

// Scope is what a token may do, on the HTTP API and on the RESP front.
// Each scope includes the ones below it: ScopeAdmin ⊇ ScopeWrite ⊇
// ScopeRead. The zero Scope may do nothing.
type Scope int

// The scopes, lowest first.
const (
	// ScopeNone may do nothing (on the RESP front: authenticate).
	ScopeNone Scope = iota
	// ScopeRead reads: streams, archive status, queues, dead letters,
	// volumes, the event stream and /metrics; on the RESP front, the
	// commands that change no data.
	ScopeRead
	// ScopeWrite also appends, enqueues, claims, acknowledges, redrives and
	// cycles (a cycle folds before it trims: it drops nothing); on the
	// RESP front, the commands that write data, within the write rule.
	ScopeWrite
	// ScopeAdmin also runs what can drop history or move a volume (volume
	// reset, push, pull and hydrate, a cycle with a retention, the delete
	// of a stream, the fault route) and, on the RESP front, server
	// administration. No scope lifts the write rule.
	ScopeAdmin
)

// String returns the scope's name as a configuration gives it.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return "none"
}

// ParseScope parses "read", "write" or "admin".
func ParseScope(v string) (Scope, error) {
	switch v {
	case "read":
		return ScopeRead, nil
	case "write":
		return ScopeWrite, nil
	case "admin":
		return ScopeAdmin, nil
	}
	return ScopeNone, fmt.Errorf("scope %q: want read, write or admin", v)
}
