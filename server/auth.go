package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/api"
)

// MinTokenLen is the shortest bearer token the server accepts (bytes): a
// shorter one is refused at start. `openssl rand -hex 32` makes a good one.
const MinTokenLen = 16

// Scope is what a token may do (api.Scope): each scope includes the ones
// below it, ScopeAdmin ⊇ ScopeWrite ⊇ ScopeRead.
type Scope = api.Scope

// The scopes, lowest first (api's).
const (
	ScopeNone  = api.ScopeNone
	ScopeRead  = api.ScopeRead
	ScopeWrite = api.ScopeWrite
	ScopeAdmin = api.ScopeAdmin
)

// ParseScope parses "read", "write" or "admin" (api.ParseScope).
func ParseScope(v string) (Scope, error) { return api.ParseScope(v) }

// authToken is a token the server accepts, with its value.
type authToken struct {
	name    string
	scope   Scope
	bearer  []byte // "Bearer <token>", the Authorization header that carries it
	session string // the session cookie's value it signs (sessionValue)
}

// newAuthToken checks a token's value and returns it; what names the token
// in errors (never its value).
func newAuthToken(name string, scope Scope, value, what string) (authToken, error) {
	if len(value) < MinTokenLen {
		return authToken{}, fmt.Errorf("%w: %s is %d bytes long: a token needs at least %d (make one with `openssl rand -hex 32`)",
			ErrConfig, what, len(value), MinTokenLen)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c <= ' ' || c > '~' {
			return authToken{}, fmt.Errorf("%w: %s holds a space, a control character or a non-ASCII byte at byte %d: a token is printable ASCII",
				ErrConfig, what, i)
		}
	}
	return authToken{name: name, scope: scope, bearer: []byte("Bearer " + value), session: sessionValue(value)}, nil
}

// ReadTokenFile reads a token file as serve does (and the CLI, which sends
// the token to serve): it must exist, not be readable by every user, and
// hold the token (one trailing newline trimmed). Errors wrap ErrConfig and
// never hold the token.
func ReadTokenFile(path string) (string, error) { return readTokenFile(path, "token file") }

// readTokenFile is ReadTokenFile; what names the file in errors.
func readTokenFile(path, what string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s: %s is not a regular file", ErrConfig, what, path)
	}
	if fi.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("%w: %s: %s is readable by every user of the machine (mode %v): chmod o-r %s (or 600)",
			ErrConfig, what, path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("%w: %s: %s is empty: put the token in it", ErrConfig, what, path)
	}
	return v, nil
}

// loadTokens reads Token and Tokens into the tokens the server accepts.
func (c Config) loadTokens() ([]authToken, error) {
	var out []authToken
	if c.Token != "" {
		t, err := newAuthToken("token", ScopeAdmin, c.Token, "the token (token:, ECHOSTORE_TOKEN)")
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	names := map[string]bool{}
	for i, tc := range c.Tokens {
		what := fmt.Sprintf("tokens[%d] %q", i, tc.Name)
		if tc.Name == "" {
			return nil, fmt.Errorf("%w: tokens[%d]: give it a name", ErrConfig, i)
		}
		if names[tc.Name] {
			return nil, fmt.Errorf("%w: %s: two tokens have this name", ErrConfig, what)
		}
		names[tc.Name] = true
		if len(tc.Scopes) == 0 {
			return nil, fmt.Errorf("%w: %s: give its scopes: [read], [write] or [admin]", ErrConfig, what)
		}
		scope := ScopeNone
		for _, v := range tc.Scopes {
			sc, err := ParseScope(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
			}
			scope = max(scope, sc)
		}
		value := tc.Value
		switch {
		case tc.File != "" && tc.Value != "":
			return nil, fmt.Errorf("%w: %s: give its file or its value, not both", ErrConfig, what)
		case tc.File != "":
			v, err := readTokenFile(tc.File, what+" file")
			if err != nil {
				return nil, err
			}
			value = v
		case value == "":
			return nil, fmt.Errorf("%w: %s: give the file that holds it (file: PATH)", ErrConfig, what)
		}
		t, err := newAuthToken(tc.Name, scope, value, what)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	for i := range out {
		for j := range i {
			if subtle.ConstantTimeCompare(out[i].bearer, out[j].bearer) == 1 {
				return nil, fmt.Errorf("%w: tokens %q and %q have the same value: give each its own", ErrConfig, out[j].name, out[i].name)
			}
		}
	}
	return out, nil
}

// routeScope is the scope a request to r.Pattern needs. A route it does
// not list needs admin (TestScopeMatrix checks every registered route).
func routeScope(r *http.Request) Scope {
	pattern := r.Pattern
	if pattern == "POST /v1/keys/{k}/replay" {
		// The replay of a stream at a key: the scopes of a stream's.
		pattern = "POST /v1/streams/{q}/{s}/replay"
	}
	switch pattern {
	case "GET /v1/streams/{q}/{s}", "GET /v1/streams/{q}/{s}/archive", "GET /v1/keys/{k}", "GET /v1/keys/{k}/archive", "GET /v1/streams/{q}/{s}/groups", "GET /v1/keys/{k}/groups", "GET /v1/queues", "GET /v1/series", "GET /v1/nodes", "GET /v1/queues/{q}", "GET /v1/queues/{q}/jobs",
		"GET /v1/queues/{q}/dead", "GET /v1/volumes", "GET /v1/volumes/{vid}", "GET /v1/events",
		"POST /v1/session", "GET /metrics",
		"": // no route: the 404 or 405 of a caller with any token
		return ScopeRead
	case "POST /v1/streams/{q}/{s}", "POST /v1/keys/{k}", "POST /v1/queues/{q}/jobs", "POST /v1/queues/{q}/jobs/batch", "POST /v1/queues/{q}/claim",
		"POST /v1/queues/{q}/ack", "POST /v1/queues/{q}/fail", "POST /v1/queues/{q}/redrive":
		return ScopeWrite
	case "POST /v1/streams/{q}/{s}/cycle", "POST /v1/keys/{k}/cycle":
		if dropsHistory(r.URL.Query()) {
			return ScopeAdmin
		}
		return ScopeWrite
	case "POST /v1/streams/{q}/{s}/replay":
		// force writes into echostore's own namespace: admin; so does a
		// force that does not parse (the handler then refuses it), or
		// more than one. force=false (or 0, or empty) is no force.
		if v, ok := r.URL.Query()["force"]; ok {
			if force, err := boolParam(v[0]); err != nil || force || len(v) > 1 {
				return ScopeAdmin
			}
		}
		return ScopeWrite
	}
	// DELETE /v1/streams/{q}/{s} and /v1/keys/{k}, DELETE /v1/queues/{q}/dead,
	// the volume routes (push, pull, hydrate, reset) and the fault route.
	return ScopeAdmin
}

// dropsHistory reports whether a cycle's parameters give it a retention
// that drops archived records: a retain_count or retain_age other than 0
// (or one that does not parse, which the handler then refuses); or a
// trim_after other than remote, which would trim what no remote holds on a
// stream configured to trim only what is pushed (its failover promise); or
// a stalled_groups other than hold, which trims entries consumer groups
// hold (the applications' pending entries).
func dropsHistory(q url.Values) bool {
	if v, ok := q["stalled_groups"]; ok && (len(v) > 1 || v[0] != "hold" && v[0] != "") {
		return true
	}
	if v, ok := q["trim_after"]; ok && (len(v) > 1 || v[0] != "remote") {
		return true
	}
	if v, ok := q["retain_count"]; ok {
		if n, err := strconv.ParseUint(v[0], 10, 64); err != nil || n != 0 || len(v) > 1 {
			return true
		}
	}
	if v, ok := q["retain_age"]; ok {
		if d, err := time.ParseDuration(v[0]); err != nil || d != 0 || len(v) > 1 {
			return true
		}
	}
	return false
}

// SessionCookie is the name of the cookie that POST /v1/session sets.
const SessionCookie = "echostore_session"

// sessionValue is the session cookie's value for token: an HMAC of a fixed
// label keyed by the token, so the cookie proves the token was presented
// without carrying it, and every session ends when the token changes. It
// carries the read scope only, whatever the token's.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("echostore session v2 scope read"))
	return hex.EncodeToString(m.Sum(nil))
}

// caller is who sent a request: the token it carried and the scope it
// may use.
type caller struct {
	name  string
	scope Scope
}

// authenticate returns the request's caller: a request over the unix
// socket without an Authorization header, from serve's own user or root
// (checkPeer refused every other), has ScopeAdmin; with no tokens
// configured, everyone has ScopeAdmin; otherwise the token of its
// Authorization header (on the socket too: a token given is a token
// judged, so a read token there reads only), or for GET /v1/events (a
// browser's EventSource cannot send the header) the session cookie, which
// gives ScopeRead. Every token is compared, in constant time. ok is false
// for a request without a known token.
func (s *Server) authenticate(r *http.Request) (caller, bool) {
	if p, ok := socketPeer(r); ok && s.trustedPeer(p) {
		if _, given := r.Header["Authorization"]; !given {
			return caller{name: fmt.Sprintf("uid %d (socket)", p.uid), scope: ScopeAdmin}, true
		}
	}
	if len(s.cfg.tokens) == 0 {
		return caller{name: "anyone", scope: ScopeAdmin}, true
	}
	got := []byte(r.Header.Get("Authorization"))
	found := -1
	for i, t := range s.cfg.tokens {
		if subtle.ConstantTimeCompare(got, t.bearer) == 1 {
			found = i
		}
	}
	if found >= 0 {
		t := s.cfg.tokens[found]
		return caller{name: t.name, scope: t.scope}, true
	}
	if r.Pattern == "GET /v1/events" {
		if c, err := r.Cookie(SessionCookie); err == nil {
			for i, t := range s.cfg.tokens {
				if subtle.ConstantTimeCompare([]byte(c.Value), []byte(t.session)) == 1 {
					found = i
				}
			}
			if found >= 0 {
				return caller{name: s.cfg.tokens[found].name + " (session)", scope: ScopeRead}, true
			}
		}
	}
	return caller{}, false
}

// auth lets a request through when its caller has the scope its route
// needs (routeScope): no or a wrong token is 401, a token without the
// scope 403 CodeForbidden, naming the scope.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.authenticate(r)
		if !ok || c.scope < routeScope(r) {
			closeUnread(w, r)
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="echostore"`)
			writeError(w, &apiError{http.StatusUnauthorized, CodeUnauthorized,
				errors.New("missing or wrong bearer token: send Authorization: Bearer <token>")})
			return
		}
		if need := routeScope(r); c.scope < need {
			writeError(w, &apiError{http.StatusForbidden, CodeForbidden,
				fmt.Errorf("%s %s needs a token with the %s scope; token %q has %s", r.Method, r.URL.Path, need, c.name, c.scope)})
			return
		}
		h(w, r)
	}
}

// SessionOut is the answer of POST /v1/session: whether a session cookie
// was set and its scope, or why not (a server without a token needs none).
type SessionOut struct {
	Session bool   `json:"session"`
	Scope   string `json:"scope,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// handleSession signs a browser in: the request carried a token (auth
// checked it), and the answer sets an HttpOnly, SameSite=Strict session
// cookie that GET /v1/events accepts, with the read scope alone.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) error {
	if len(s.cfg.tokens) == 0 {
		writeJSON(w, http.StatusOK, SessionOut{Session: false, Reason: "this server has no token"})
		return nil
	}
	got := []byte(r.Header.Get("Authorization"))
	value := ""
	for _, t := range s.cfg.tokens {
		if subtle.ConstantTimeCompare(got, t.bearer) == 1 {
			value = t.session
		}
	}
	if value == "" { // auth let a cookie through: only the header signs in
		writeError(w, &apiError{http.StatusUnauthorized, CodeUnauthorized, errors.New("sign in with Authorization: Bearer <token>")})
		return nil
	}
	http.SetCookie(w, &http.Cookie{
		Name:     SessionCookie,
		Value:    value,
		Path:     "/v1/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
	})
	writeJSON(w, http.StatusOK, SessionOut{Session: true, Scope: ScopeRead.String()})
	return nil
}
