package server

import (
	"cmp"
	"errors"
	"fmt"
	echostore "github.com/echostore/echostore"
	jsonv2 "github.com/go-json-experiment/json"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/server/web"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// handlerFunc is a handler that returns its error, written as JSON.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route is one pattern of the server's mux and its handler.
type route struct {
	pattern string
	h       http.Handler
}

// routes returns every route of the server: the API, behind the token
// check (auth, with the scope routeScope gives each), /healthz, /metrics
// and the dashboard. The fault route is there only with Config.Faults.
func (s *Server) routes() []route {
	var rs []route
	api := func(pattern string, h handlerFunc) {
		rs = append(rs, route{pattern, s.instrument(s.auth(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
			if r.ContentLength != 0 {
				// A body must arrive within Config.BodyTimeout: a client
				// cannot hold a handler by trickling it. (Not a server-wide
				// ReadTimeout: that would also end the event stream.)
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
			}
			if err := h(w, r); err != nil {
				writeError(w, err)
			}
		}))})
	}
	api("POST /v1/streams/{q}/{s}", s.handleAppend)
	api("GET /v1/streams/{q}/{s}", s.handleRead)
	api("DELETE /v1/streams/{q}/{s}", s.handleDelete)
	api("POST /v1/streams/{q}/{s}/cycle", s.handleCycle)
	api("GET /v1/streams/{q}/{s}/archive", s.handleStatus)
	api("GET /v1/streams/{q}/{s}/groups", s.handleGroups)
	api("POST /v1/streams/{q}/{s}/replay", s.handleReplay)
	api("POST /v1/streams/{q}/{s}/export", s.handleExport)
	// The same operations on the stream at any Redis key K, path-escaped
	// as one segment.
	api("POST /v1/keys/{k}", s.handleAppend)
	api("GET /v1/keys/{k}", s.handleRead)
	api("DELETE /v1/keys/{k}", s.handleDelete)
	api("POST /v1/keys/{k}/cycle", s.handleCycle)
	api("GET /v1/keys/{k}/archive", s.handleStatus)
	api("GET /v1/keys/{k}/groups", s.handleGroups)
	api("POST /v1/keys/{k}/replay", s.handleReplay)
	api("POST /v1/keys/{k}/export", s.handleExport)
	api("GET /v1/queues", s.handleQueues)
	api("GET /v1/series", s.handleSeries)
	api("GET /v1/nodes", s.handleNodes)
	api("GET /v1/queues/{q}", s.handleQueueStatus)
	api("GET /v1/queues/{q}/jobs", s.handleJobs)
	api("DELETE /v1/queues/{q}/dead", s.handleDeleteDead)
	api("POST /v1/queues/{q}/jobs", s.handleEnqueue)
	api("POST /v1/queues/{q}/jobs/batch", s.handleEnqueueBatch)
	api("POST /v1/queues/{q}/claim", s.handleClaim)
	api("POST /v1/queues/{q}/ack", s.handleAck)
	api("POST /v1/queues/{q}/fail", s.handleFail)
	api("GET /v1/queues/{q}/dead", s.handleDead)
	api("POST /v1/queues/{q}/redrive", s.handleRedrive)
	api("GET /v1/volumes", s.handleVolumes)
	api("GET /v1/volumes/{vid}", s.handleVolume)
	s.volumeRoutes(api)
	if s.cfg.Faults {
		api("POST /v1/streams/{q}/{s}/fault", s.handleFault)
	}
	api("GET /v1/events", s.handleEvents)
	api("POST /v1/session", s.handleSession)
	metrics := http.Handler(promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	if !s.cfg.MetricsPublic {
		metrics = s.auth(metrics.ServeHTTP)
	}
	rs = append(rs,
		route{"GET /healthz", s.instrument(http.HandlerFunc(s.handleHealth))},
		route{"GET /metrics", s.instrument(metrics)},
		route{"GET /{$}", s.instrument(http.HandlerFunc(s.handleDashboard))})
	return rs
}

// Handler returns the server's HTTP handler: the routes behind the
// browser boundary (boundary.go).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.pattern, rt.h)
	}
	return s.boundary(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A path the mux would clean ("//host/…", "/./", "/../") is no
		// route: the mux would redirect it, keeping the method (307).
		unclean := uncleanPath(r.URL.EscapedPath())
		if _, pattern := mux.Handler(r); pattern != "" && !unclean {
			mux.ServeHTTP(w, r)
			return
		}
		// No route: the mux's own answer (404, or 405 with Allow) as a JSON
		// error, behind the token like every /v1 call.
		rec := &statusOnly{header: http.Header{}}
		if !unclean {
			mux.ServeHTTP(rec, r)
		}
		if rec.status != http.StatusMethodNotAllowed {
			rec.status = http.StatusNotFound
		}
		code, msg := CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)
		if unclean {
			msg += " (paths are not cleaned: send it without empty, . or .. segments)"
		}
		if rec.status == http.StatusMethodNotAllowed {
			code = CodeMethodNotAllowed
			msg = fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))
			w.Header().Set("Allow", rec.header.Get("Allow"))
		}
		h := func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &apiError{cmp.Or(rec.status, http.StatusNotFound), code, errors.New(msg)})
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			h = s.auth(h)
		}
		s.instrument(http.HandlerFunc(h)).ServeHTTP(w, r)
	}))
}

// uncleanPath reports whether p is not in the mux's clean form: an empty,
// "." or ".." segment (a trailing slash aside).
func uncleanPath(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c != p
}

// statusOnly records the status and headers of the mux's answer to a
// request no route matches.
type statusOnly struct {
	header http.Header
	status int
}

func (w *statusOnly) Header() http.Header         { return w.header }
func (w *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (w *statusOnly) WriteHeader(code int)        { w.status = code }

// statusWriter remembers the status code for the latency histogram.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument observes each request's latency by route pattern.
func (s *Server) instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.m.http.WithLabelValues(r.Pattern, methodLabel(r.Method), strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
	})
}

// methodLabel bounds the method label of the latency histogram: a made-up
// method is "other", so clients cannot grow /metrics by a series each. The
// route label is bounded already: a mux pattern, "" when none matched.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// readBody reads the whole (size-limited) body. A body that does not
// arrive within Config.BodyTimeout (the read deadline the API sets) is 408,
// one over Config.MaxBody 413, one cut short 400.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var ne net.Error
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return nil, &apiError{http.StatusRequestTimeout, CodeTimeout,
				fmt.Errorf("the body did not arrive within body_timeout (%d bytes read); nothing was done", len(b))}
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("read body: %w", err) // 413
		}
		// The client hung up or sent a broken chunked encoding: its mistake,
		// and nothing to do with Redis (whose EOFs are 503).
		return nil, &apiError{http.StatusBadRequest, CodeBadRequest, fmt.Errorf("read body: %w", err)}
	}
	return b, nil
}

func boolParam(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

// intParam parses an integer query parameter with a default and a minimum.
// MaxBatch bounds the jobs or entries one claim, dead-letter listing or
// redrive handles: a larger request is 400, so that no single call takes a
// queue's every job in one Redis script.
const MaxBatch = echostore.MaxBatch

// intParam parses the query parameter name as a whole number from min to
// MaxBatch, def when absent.
func intParam(r *http.Request, name string, def, min int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > MaxBatch {
		return 0, badRequest("%s %q: want a whole number from %d to %d", name, v, min, MaxBatch)
	}
	return n, nil
}

// decodeBody decodes a JSON body into v strictly: one JSON value and
// nothing after it, no duplicate names at any depth, no unknown or
// differently cased member names, valid UTF-8 and no lone surrogate
// escapes (encoding/json accepts all of these silently, keeping the last
// duplicate and replacing bad text by U+FFFD).
func decodeBody(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return badRequest("body: %s", bodyError(err))
	}
	return nil
}

// bodyError is the message of a body that did not decode: what was wrong
// and where, without Go type names.
func bodyError(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		msg := "unexpected JSON value"
		switch {
		case se.Err != nil:
			msg = strings.TrimPrefix(se.Err.Error(), "jsontext: ")
		case se.JSONKind != 0:
			msg = "unexpected JSON " + se.JSONKind.String()
		}
		if se.JSONPointer != "" {
			return fmt.Sprintf("%s at %s", msg, se.JSONPointer)
		}
		return msg
	}
	return strings.TrimPrefix(err.Error(), "jsontext: ")
}

func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "+frameAncestors)
	w.Write(web.Page(s.cfg.Faults))
}
