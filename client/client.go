// Package client is a typed client of the HTTP API of `echostore serve`,
// over its TCP address or its unix socket <data>/serve.sock.
//
// A *Client has the method set of *echostore.Node (Append, Read, Cycle,
// Status, Delete, Replay, Enqueue, Claim, Ack, Dead, Redrive, QueueStatus,
// Volumes, VolumeInfo, Push, Pull, Hydrate, Reset, Checkpoint, GC), with the same
// request and result types, so that a program (the echostore CLI is one) can
// be written once against an interface and run on a Node it opened or on
// the serve that holds the data dir. Those types are package api's, the
// wire contract (the root package's are aliases of them), so a program
// that speaks to serve through this package links no engine: no Pebble,
// Redis client or cloud SDK (TestLinksNoEngine).
//
// # Authentication
//
// On the TCP address every /v1 call needs a bearer token (Options.Token)
// with the scope of its route. On the unix socket serve knows its caller by
// the socket's peer credentials (SO_PEERCRED): serve's own user and root
// have the admin scope without a token, every other user is refused
// (ErrPeerRefused).
//
// # Errors
//
// An answer other than 2xx is an *Error with serve's HTTP status, its error
// code and message, and, for a 503, its Retry-After. errors.Is matches an
// *Error against the sentinel errors of this package by code (ErrNotFound,
// ErrConflict, ErrUnavailable …), the ones a caller branches on.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/api"
)

// SocketName is the name of serve's unix socket in its data dir.
const SocketName = api.SocketName

// DialTimeout bounds how long a connection to serve may take to open.
const DialTimeout = 2 * time.Second

// Options configure a Client.
type Options struct {
	// Token is the bearer token sent with every request ("" sends none:
	// the unix socket needs none from serve's own user).
	Token string
	// Transport is the HTTP transport (default: a transport of its own,
	// dialling the unix socket for Unix).
	Transport http.RoundTripper
}

// Client talks to one echostore serve. Its methods are safe for concurrent
// use.
type Client struct {
	base  string // scheme://host, no trailing slash
	where string // what errors name: the socket's path or the base URL
	token string
	hc    *http.Client
}

// New returns a client of the serve listening at baseURL (http://host:port
// or https://host:port).
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http://host:port or https://host:port", baseURL)
	}
	rt := opts.Transport
	if rt == nil {
		rt = &http.Transport{
			Proxy:       http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{Timeout: DialTimeout}).DialContext,
		}
	}
	base := strings.TrimRight(u.Scheme+"://"+u.Host, "/")
	return &Client{base: base, where: base, token: opts.Token, hc: &http.Client{Transport: rt}}, nil
}

// Unix returns a client of the serve listening on the unix socket sock
// (<data>/serve.sock). It dials nothing until the first request.
func Unix(sock string, opts Options) *Client {
	rt := opts.Transport
	if rt == nil {
		rt = &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{Timeout: DialTimeout}).DialContext(ctx, "unix", sock)
			},
			DisableCompression: true,
		}
	}
	return &Client{base: "http://serve", where: sock, token: opts.Token, hc: &http.Client{Transport: rt}}
}

// Where is the socket's path or the base URL the client talks to.
func (c *Client) Where() string { return c.where }

// Close closes the client's idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// Health is serve's GET /healthz (api.Health): Status "ok" (200), or
// "degraded" or "shutting_down" (503) with the state of Redis and the
// remote.
type Health = api.Health

// Health asks serve for its health. A 503 answer is no error: its Health
// says why (the caller reads Status); an answer that is not serve's fails.
// On the unix socket of another user's serve it fails with ErrPeerRefused.
func (c *Client) Health(ctx context.Context) (Health, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return Health{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Health{}, fmt.Errorf("serve on %s: %w", c.where, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return Health{}, fmt.Errorf("serve on %s: healthz: %w", c.where, err)
	}
	var h struct {
		Health
		Error *errorBody `json:"error"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Health{}, fmt.Errorf("%s answers, but not as echostore serve: %w: %w", c.where, ErrNotServe, err)
	}
	if h.Error != nil {
		return Health{}, c.apiError(resp, h.Error)
	}
	if h.Status == "" {
		return Health{}, fmt.Errorf("%s answers, but not as echostore serve (no status): %w", c.where, ErrNotServe)
	}
	return h.Health, nil
}

// maxErrorBody bounds what is read of an error answer.
const maxErrorBody = 1 << 20

// errorBody is the error of serve's JSON error answers.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// request is one API call: method, path (escaped), query and JSON body.
type request struct {
	method string
	path   string
	query  url.Values
	body   any    // nil: no body
	raw    []byte // a body sent as it is, if body is nil
}

// do sends r and returns the response of a 2xx; any other status is an
// *Error. The caller closes the body.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if r.raw != nil {
		rd = bytes.NewReader(r.raw)
	} else if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: body: %w", r.method, r.path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if r.body != nil || r.raw != nil || (r.method != http.MethodGet && r.method != http.MethodHead) {
		// serve refuses a request that changes state without it (the
		// browser boundary), an empty body too.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("serve on %s: %s %s: %w", c.where, r.method, r.path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e struct {
		Error errorBody `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
		e.Error.Message = fmt.Sprintf("%s %s: %s: %s", r.method, r.path, resp.Status, bytes.TrimSpace(b))
	}
	return nil, c.apiError(resp, &e.Error)
}

// apiError is the *Error of an answer.
func (c *Client) apiError(resp *http.Response, e *errorBody) *Error {
	out := &Error{Status: resp.StatusCode, Code: e.Code, Message: e.Message, Where: c.where}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			out.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			out.RetryAfter = max(time.Until(t), 0)
		}
	}
	return out
}

// call sends r and decodes the JSON answer into v.
func (c *Client) call(ctx context.Context, r request, v any) error {
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("serve on %s: %s %s: answer: %w", c.where, r.method, r.path, err)
	}
	return nil
}

// Error is an answer of serve other than 2xx.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is serve's error code (CodeNotFound …; "" if the answer had
	// none).
	Code string
	// Message is serve's message.
	Message string
	// RetryAfter is the answer's Retry-After (a 503's), 0 if none.
	RetryAfter time.Duration
	// Where is the socket's path or the base URL that answered.
	Where string
}

// Error is serve's message, with where it came from.
func (e *Error) Error() string {
	switch {
	case e.Status == http.StatusUnauthorized:
		return fmt.Sprintf("%s (the serve on %s refused the token given)", e.Message, e.Where)
	case e.Code == CodeForbidden:
		return fmt.Sprintf("%s (the serve on %s: use a token with that scope)", e.Message, e.Where)
	}
	return fmt.Sprintf("%s (through the serve on %s)", e.Message, e.Where)
}

// Is matches the sentinel error of e's code (or, for an answer without a
// code, of its status).
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	if !ok {
		return false
	}
	if e.Code != "" {
		return slices.Contains(s.codes, e.Code)
	}
	return s.status != 0 && s.status == e.Status
}

// The error codes of serve's answers ({"error":{"code":…}}).
const (
	CodeBadRequest          = api.CodeBadRequest
	CodeInvalidName         = api.CodeInvalidName
	CodeInvalidInput        = api.CodeInvalidInput
	CodeUnauthorized        = api.CodeUnauthorized
	CodeForbidden           = api.CodeForbidden
	CodePeerRefused         = api.CodePeerRefused
	CodeNotFound            = api.CodeNotFound
	CodeMethodNotAllowed    = api.CodeMethodNotAllowed
	CodeTimeout             = api.CodeTimeout
	CodeConflict            = api.CodeConflict
	CodeGone                = api.CodeGone
	CodeIDConflict          = api.CodeIDConflict
	CodeWrongType           = api.CodeWrongType
	CodeWouldDiscard        = api.CodeWouldDiscard
	CodeRemoteMismatch      = api.CodeRemoteMismatch
	CodeTooLarge            = api.CodeTooLarge
	CodeTooManyStreams      = api.CodeTooManyStreams
	CodeTooManyQueues       = api.CodeTooManyQueues
	CodeInsufficientStorage = api.CodeInsufficientStorage
	CodeUnavailable         = api.CodeUnavailable
	CodeInternal            = api.CodeInternal
	CodeRemoteKey           = api.CodeRemoteKey
	CodeCrossSite           = api.CodeCrossSite
	CodeUnsupportedMedia    = api.CodeUnsupportedMediaType
	CodeMisdirected         = api.CodeMisdirected
)

// sentinel is an error a caller branches on; an *Error matches it by code.
type sentinel struct {
	msg    string
	codes  []string
	status int // matched when the answer has no code
}

func (s *sentinel) Error() string { return s.msg }

// Sentinel errors: errors.Is(err, ErrX) holds for an *Error of their codes.
var (
	// ErrInvalid: the request was refused as malformed (bad_request,
	// invalid_name, invalid_input): nothing was done.
	ErrInvalid error = &sentinel{"client: invalid request", []string{CodeBadRequest, CodeInvalidName, CodeInvalidInput}, http.StatusBadRequest}
	// ErrUnauthorized: no token, or a token serve does not know.
	ErrUnauthorized error = &sentinel{"client: unauthorized", []string{CodeUnauthorized}, http.StatusUnauthorized}
	// ErrForbidden: the token's scope does not cover the route.
	ErrForbidden error = &sentinel{"client: forbidden", []string{CodeForbidden}, http.StatusForbidden}
	// ErrPeerRefused: serve's unix socket refused this process's user.
	ErrPeerRefused error = &sentinel{"client: refused by the socket's owner", []string{CodePeerRefused}, 0}
	// ErrNotFound: no such volume, job, or route.
	ErrNotFound error = &sentinel{"client: not found", []string{CodeNotFound}, http.StatusNotFound}
	// ErrConflict: the stream's lease was lost, its volume is missing or
	// behind, a job was enqueued twice under one id, or the stream's key
	// holds another type (ErrWrongType).
	ErrConflict error = &sentinel{"client: conflict", []string{CodeConflict, CodeIDConflict, CodeWrongType}, http.StatusConflict}
	// ErrGone: an as-of read of a state the archive no longer keeps; the
	// message says which LSNs it keeps.
	ErrGone error = &sentinel{"client: no longer kept", []string{CodeGone}, http.StatusGone}
	// ErrWrongType: the stream's Redis key holds another type (a hash, a
	// string, …): nothing was done; the message names the key and its type.
	ErrWrongType error = &sentinel{"client: the key holds another type than a stream", []string{CodeWrongType}, 0}
	// ErrWouldDiscard: a reset refused to drop acknowledged records.
	ErrWouldDiscard error = &sentinel{"client: the reset would discard acknowledged records", []string{CodeWouldDiscard}, 0}
	// ErrRemoteMismatch: the volume's remote log is not the one it follows.
	ErrRemoteMismatch error = &sentinel{"client: remote mismatch", []string{CodeRemoteMismatch}, 0}
	// ErrTooLarge: the body, or a record or job, is over serve's limit.
	ErrTooLarge error = &sentinel{"client: too large", []string{CodeTooLarge}, http.StatusRequestEntityTooLarge}
	// ErrLimit: serve takes no more streams or queues.
	ErrLimit error = &sentinel{"client: too many streams or queues", []string{CodeTooManyStreams, CodeTooManyQueues}, 0}
	// ErrInsufficientStorage: the data dir or the remote is full.
	ErrInsufficientStorage error = &sentinel{"client: insufficient storage", []string{CodeInsufficientStorage}, http.StatusInsufficientStorage}
	// ErrRemoteKey: serve cannot open an object of its remote with its keys
	// (sealed with a key it lacks, encrypted while it has none, or not
	// encrypted while it has one): its remote_key_file is to be fixed.
	ErrRemoteKey error = &sentinel{"client: the remote's key does not open its objects", []string{CodeRemoteKey}, 0}
	// ErrUnavailable: serve is shutting down, or Redis or the remote is
	// unreachable; Error.RetryAfter says when to try again.
	ErrUnavailable error = &sentinel{"client: unavailable", []string{CodeUnavailable}, http.StatusServiceUnavailable}
)

// ErrNotServe: the address answers, but not as echostore serve.
var ErrNotServe = errors.New("client: not echostore serve")

// RetryAfter returns the Retry-After of err's *Error, 0 if none.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
