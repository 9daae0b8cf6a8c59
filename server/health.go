package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/redact"
)

// Health checks of /healthz and of the start.
const (
	// HealthTimeout bounds each check of Redis and of the remote.
	HealthTimeout = 2 * time.Second
	// HealthCacheFor is how long a check's answer is reused: however often
	// /healthz is asked, Redis and the remote see at most one check each
	// per HealthCacheFor.
	HealthCacheFor = 2 * time.Second
)

// Health is the body of GET /healthz (api.Health): "ok" or "degraded",
// and each dependency's state, "ok" or "unavailable: <reason>" (secrets
// hidden).
type Health = api.Health

// health checks Redis and the remote, at most once per HealthCacheFor.
type health struct {
	s       *Server
	secrets []string // of the Redis and remote URLs, hidden in every reason

	mu   sync.Mutex // held during a check: concurrent callers share it
	at   time.Time
	last Health
}

func newHealth(s *Server, redisURL, remoteURL string) *health {
	return &health{s: s, secrets: append(redact.Secrets(redisURL), redact.Secrets(remoteURL)...)}
}

// check returns the state of Redis and the remote, checking them if the
// last answer is older than HealthCacheFor.
func (h *health) check(ctx context.Context) Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < HealthCacheFor {
		return h.last
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HealthTimeout)
	defer cancel()
	rerr, serr := h.s.node.Probe(ctx)
	got := Health{Status: "ok", Redis: h.state(rerr), Remote: h.state(serr)}
	if rerr != nil || serr != nil {
		got.Status = "degraded"
	}
	h.last, h.at = got, time.Now()
	return got
}

// state is "ok" for nil, else "unavailable: " and err with the URLs'
// secrets hidden.
func (h *health) state(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "unavailable: no answer within " + HealthTimeout.String()
	}
	return "unavailable: " + redact.Scrub(err.Error(), h.secrets...)
}

// handleHealth answers GET /healthz: 200 and {"status":"ok","redis":"ok",
// "remote":"ok"}, or 503 (with Retry-After) and "degraded" while Redis or
// the remote is unavailable, or while shutting down.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.done:
		writeError(w, &apiError{http.StatusServiceUnavailable, CodeUnavailable, errors.New("shutting down")})
		return
	default:
	}
	h := s.health.check(r.Context())
	status := http.StatusOK
	if h.Status != "ok" {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", RetryAfter)
	}
	writeJSON(w, status, h)
}
