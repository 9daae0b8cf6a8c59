package server

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server/web"
)

// DeleteConfirm is the value of the confirm parameter that DELETE
// /v1/streams/{q}/{s} insists on (the CLI's --yes-delete-history).
const DeleteConfirm = "yes-delete-history"

// DeleteOut is the answer of DELETE /v1/streams/{q}/{s}, field for field
// what `echostore archive delete` prints.
type DeleteOut struct {
	Deleted       bool   `json:"deleted"`
	Volume        string `json:"volume"`
	VolumeDropped bool   `json:"volume_dropped"`
	LiveEntries   int64  `json:"live_entries"`
	RemoteKept    bool   `json:"remote_log_kept"`
	RemoteObjects int    `json:"remote_objects"`
}

// Error codes of the JSON error body {"error":{"code":…,"message":…}}.
const (
	CodeBadRequest   = "bad_request"   // 400: a malformed parameter or body
	CodeInvalidName  = "invalid_name"  // 400: a queue, stream or volume name
	CodeInvalidInput = "invalid_input" // 400: a record or job that cannot be stored
	CodeUnauthorized = "unauthorized"  // 401: missing or wrong bearer token
	CodeNotFound     = "not_found"     // 404
	// CodeMethodNotAllowed: 405, the route exists for other methods.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeTooManyStreams: 403, a new stream beyond the server's max_streams.
	CodeTooManyStreams = "too_many_streams"
	// CodeTooManyQueues: 403, a new job queue beyond the server's max_queues.
	CodeTooManyQueues = "too_many_queues"
	CodeConflict      = "conflict" // 409: the lease was lost, the volume is behind
	// CodeIDConflict: 409, an enqueue under the id of an earlier job with
	// another payload.
	CodeIDConflict  = "id_conflict"
	CodeTimeout     = "timeout"     // 408: the body did not arrive within body_timeout
	CodeTooLarge    = "too_large"   // 413: the body exceeds the server's limit
	CodeUnavailable = "unavailable" // 503: shutting down, Redis unreachable or loading
	CodeInternal    = "internal"    // 500
)

// CodeInsufficientStorage is the code of 507: the data dir or the remote
// object store is full; nothing was written, and writes are accepted again
// once space is freed.
const CodeInsufficientStorage = "insufficient_storage"

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
	case errors.Is(err, accept.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	case errors.Is(err, ErrTooManyStreams):
		return http.StatusForbidden, CodeTooManyStreams
	case errors.Is(err, accept.ErrTooManyQueues):
		return http.StatusForbidden, CodeTooManyQueues
	case errors.Is(err, remote.ErrUnavailable):
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.Is(err, graft.ErrVolumeNotFound), errors.Is(err, mq.ErrNoJob):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, graft.ErrWouldDiscard), errors.Is(err, graft.ErrRemoteMismatch):
		status, code, _ := volumeCode(err)
		return status, code
	case errors.Is(err, accept.ErrIDConflict), errors.Is(err, mq.ErrIDConflict):
		return http.StatusConflict, CodeIDConflict
	case errors.Is(err, archive.ErrFenced), errors.Is(err, archive.ErrVolumeBehind), errors.Is(err, archive.ErrNoVolume),
		errors.Is(err, archive.ErrVolumeOwner), errors.Is(err, accept.ErrDuplicate):
		return http.StatusConflict, CodeConflict
	case graft.IsStorageFull(err): // the data dir (graft, the accept outbox) or the remote
		return http.StatusInsufficientStorage, CodeInsufficientStorage
	case mq.IsUnavailable(err):
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
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": err.Error()}})
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
	api("GET /v1/queues/{q}", s.handleQueueStatus)
	api("POST /v1/queues/{q}/jobs", s.handleEnqueue)
	api("POST /v1/queues/{q}/claim", s.handleClaim)
	api("POST /v1/queues/{q}/ack", s.handleAck)
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

// streamPath validates the {q} and {s} of the path.
func streamPath(r *http.Request) (string, string, error) {
	q, st := r.PathValue("q"), r.PathValue("s")
	if err := names.Check(names.KindQueue, q); err != nil {
		return "", "", err
	}
	if err := names.Check(names.KindStream, st); err != nil {
		return "", "", err
	}
	return q, st, nil
}

// queuePath validates the {q} of the path.
func queuePath(r *http.Request) (string, error) {
	q := r.PathValue("q")
	return q, names.Check(names.KindQueue, q)
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

// parseRecords parses an append body: one {"fields":…} object (pretty
// printed or not) or JSON lines of them.
func parseRecords(body []byte) ([][]mq.Field, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, badRequest(`empty body: send {"fields":{"name":"value",…}} or JSON lines of them`)
	}
	if !bytes.Contains(body, []byte("\n")) || json.Valid(body) {
		f, err := mq.ParseInputLine(body)
		if err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
		return [][]mq.Field{f}, nil
	}
	var out [][]mq.Field
	for i, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		f, err := mq.ParseInputLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func (s *Server) handleAppend(w http.ResponseWriter, r *http.Request) error {
	q, st, err := streamPath(r)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	recs, err := parseRecords(body)
	if err != nil {
		return err
	}
	if _, err := s.touch(q, st); err != nil {
		return err
	}
	ids, err := s.mq.AppendBatch(r.Context(), q, st, recs)
	if err != nil {
		return err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = brand.EVT.Format(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"ids": out})
	return nil
}

// readRange parses from, to, limit, reverse of a read, and whether it is
// live_only or archive_only.
func readRange(r *http.Request) (archive.Range, bool, bool, error) {
	q := r.URL.Query()
	rg := archive.Range{From: 0, To: brand.Max, Limit: DefaultMaxReadLimit}
	var err error
	if v := q.Get("from"); v != "" {
		if rg.From, err = brand.EVT.ParseAny(v); err != nil {
			return rg, false, false, badRequest("from: %w", err)
		}
	}
	if v := q.Get("to"); v != "" {
		if rg.To, err = brand.EVT.ParseAny(v); err != nil {
			return rg, false, false, badRequest("to: %w", err)
		}
	}
	if v := q.Get("limit"); v != "" {
		if rg.Limit, err = strconv.Atoi(v); err != nil || rg.Limit < 0 {
			return rg, false, false, badRequest("limit %q: want 0 (all) or more", v)
		}
	}
	if rg.Reverse, err = boolParam(q.Get("reverse")); err != nil {
		return rg, false, false, badRequest("reverse: %w", err)
	}
	liveOnly, err := boolParam(q.Get("live_only"))
	if err != nil {
		return rg, false, false, badRequest("live_only: %w", err)
	}
	archiveOnly, err := boolParam(q.Get("archive_only"))
	if err != nil {
		return rg, false, false, badRequest("archive_only: %w", err)
	}
	if liveOnly && archiveOnly {
		return rg, false, false, badRequest("live_only and archive_only exclude each other: give one, or neither for the merge-read")
	}
	return rg, liveOnly, archiveOnly, nil
}

func boolParam(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

// archiveVolume returns q/s's archive volume in the data dir, nil if none.
func (s *Server) archiveVolume(ctx context.Context, q, st string) (*graft.Volume, error) {
	name, err := names.ArchiveVolume(q, st)
	if err != nil {
		return nil, err
	}
	v, err := s.store.Volume(ctx, name)
	if errors.Is(err, graft.ErrVolumeNotFound) {
		return nil, nil
	}
	return v, err
}

func (s *Server) handleRead(w http.ResponseWriter, r *http.Request) error {
	q, st, err := streamPath(r)
	if err != nil {
		return err
	}
	rg, liveOnly, archiveOnly, err := readRange(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	var seq func(func(mq.Record, error) bool)
	if liveOnly {
		seq = s.mq.Read(ctx, q, st, rg.From, rg.To, rg.Limit, rg.Reverse)
	} else {
		vol, err := s.archiveVolume(ctx, q, st)
		if err != nil {
			return err
		}
		src := archive.Source{Queue: q, Stream: st, Live: s.mq, Volume: vol, Store: s.store}
		if archiveOnly {
			if vol == nil {
				name, _ := names.ArchiveVolume(q, st)
				return fmt.Errorf("no archive of %s/%s in this data dir (volume %s): %w", q, st, name, graft.ErrVolumeNotFound)
			}
			src.Live = nil
		}
		seq = archive.MergeRead(ctx, src, rg)
	}
	// Headers go out with the first record (or the end), so an error before
	// any record is a JSON error; one after it aborts the response, which the
	// client sees as a truncated body.
	var out *bufio.Writer
	start := func() {
		if out == nil {
			w.Header().Set("Content-Type", "application/x-ndjson")
			out = bufio.NewWriterSize(w, 32<<10)
		}
	}
	var buf []byte
	for rec, err := range seq {
		var ee *mq.EntryError
		switch {
		case errors.As(err, &ee):
			s.log.Warn("serve: read skipped an entry that is not a branded record", "queue", q, "stream", st, "err", err)
			continue
		case err != nil && out == nil:
			return err
		case err != nil:
			out.Flush()
			s.log.Warn("serve: read failed after its first record; response aborted", "queue", q, "stream", st, "err", err)
			panic(http.ErrAbortHandler)
		}
		start()
		buf = append(mq.AppendJSON(buf[:0], rec), '\n')
		if _, err := out.Write(buf); err != nil {
			return nil // the client went away
		}
	}
	start()
	out.Flush()
	return nil
}

// watermark renders W: "EVT_…", or nil before the first fold.
func watermark(st archive.State) any {
	if st.Empty() {
		return nil
	}
	return brand.EVT.Format(st.W)
}

func (s *Server) handleCycle(w http.ResponseWriter, r *http.Request) error {
	q, st, err := streamPath(r)
	if err != nil {
		return err
	}
	cfg, known := s.lookup(q, st)
	if !known {
		if cfg, err = s.cfg.resolve(q, st, StreamConfig{}); err != nil {
			return err
		}
	}
	if !cfg.archived {
		return &apiError{http.StatusConflict, CodeConflict, fmt.Errorf(
			"%s/%s is declared archived: false (retention trims it, nothing is folded); a cycle would register it as archived", q, st)}
	}
	win := cfg.window
	qv := r.URL.Query()
	if v := qv.Get("keep"); v != "" {
		if win.Keep, err = strconv.ParseInt(v, 10, 64); err != nil || win.Keep < 1 {
			return badRequest("keep %q: want 1 or more (the newest records to leave live); for an age window alone give max_age and no keep", v)
		}
		if qv.Get("max_age") == "" {
			win.MaxAge = 0
		}
	}
	if v := qv.Get("max_age"); v != "" {
		if win.MaxAge, err = time.ParseDuration(v); err != nil || win.MaxAge < 0 {
			return badRequest("max_age %q: want a duration such as 24h", v)
		}
		if qv.Get("keep") == "" {
			win.Keep = 0 // an age window alone, as keep alone is a count window
		}
	}
	if v := qv.Get("trim_after"); v != "" {
		if cfg.trimAfter, err = archive.ParseTrimAfter(v); err != nil {
			return badRequest("trim_after: %w", err)
		}
	}
	if win.Keep == 0 && win.MaxAge == 0 {
		return badRequest("give keep=N (the records to leave live) and/or max_age=D")
	}
	if rc, ra := qv.Get("retain_count"), qv.Get("retain_age"); rc != "" || ra != "" {
		// Either one gives this cycle's retention: the other is then none.
		cfg.retain = archive.Retention{}
		if rc != "" {
			if cfg.retain.Count, err = strconv.ParseUint(rc, 10, 64); err != nil {
				return badRequest("retain_count %q: want 0 (no limit) or more", rc)
			}
		}
		if ra != "" {
			if cfg.retain.MaxAge, err = time.ParseDuration(ra); err != nil || cfg.retain.MaxAge < 0 {
				return badRequest("retain_age %q: want a duration such as 720h (0: no limit)", ra)
			}
		}
	}
	if !known {
		// Cycled here, undeclared: it gets a volume and a registration,
		// and discovery adopts it later; it counts from now on.
		if err := s.admit(q, st); err != nil {
			return err
		}
	}
	res, err := s.cycle(r.Context(), cfg, win)
	if err != nil {
		return err
	}
	out := map[string]any{"folded": res.Folded, "trimmed": res.Trimmed, "watermark": watermark(res.State)}
	if res.Dropped != 0 {
		out["dropped"] = res.Dropped
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleDelete deletes an archived stream and its archive (Archiver.Delete
// with serve's store and remote) once confirm=DeleteConfirm: serve stops
// cycling the stream first, so no beat re-creates its volume. A failed
// delete declares the stream again as it was.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) error {
	q, st, err := streamPath(r)
	if err != nil {
		return err
	}
	name, err := names.ArchiveVolume(q, st)
	if err != nil {
		return err
	}
	if c := r.URL.Query().Get("confirm"); c != DeleteConfirm {
		return badRequest("deleting %s/%s deletes the stream and its whole archived history (%s); nothing was deleted: add confirm=%s",
			q, st, name, DeleteConfirm)
	}
	res, err := s.deleteStream(r.Context(), q, st)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, DeleteOut{true, res.Volume, res.VolumeDropped, res.LiveEntries, !res.RemoteDeleted, res.RemoteObjects})
	return nil
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) error {
	q, st, err := streamPath(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	name, _ := names.ArchiveVolume(q, st)
	vol, err := s.archiveVolume(ctx, q, st)
	if err != nil {
		return err
	}
	var state archive.State
	if vol != nil {
		if state, err = archive.StreamFrontier(ctx, vol, q, st); err != nil {
			return err
		}
	} else if seam, ok, err := archive.GetArchived(ctx, s.mq, q, st); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s/%s is archived up to %s but %s is not in this data dir: %w",
			q, st, brand.EVT.Format(seam.W), name, archive.ErrNoVolume)
	}
	n, err := s.mq.Len(ctx, q, st)
	if err != nil {
		return err
	}
	out := map[string]any{"watermark": watermark(state), "archived": state.Pages, "live": n, "volume": name, "lsn": state.LSN}
	if state.Low != 0 { // archive retention dropped the oldest pages
		out["low"], out["retained"] = state.Low, state.Retained()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleQueueStatus(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	st, err := s.mq.Status(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// intParam parses an integer query parameter with a default and a minimum.
// MaxBatch bounds the jobs or entries one claim, dead-letter listing or
// redrive handles: a larger request is 400, so that no single call takes a
// queue's every job in one Redis script.
const MaxBatch = 1000

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

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	count, err := intParam(r, "count", 1, 1)
	if err != nil {
		return err
	}
	consumer := r.URL.Query().Get("consumer")
	if consumer == "" {
		consumer = "http"
	}
	if err := mq.CheckConsumer(consumer); err != nil {
		return badRequest("consumer: %w", err)
	}
	var stalled time.Duration
	if v := r.URL.Query().Get("stalled"); v != "" {
		if stalled, err = time.ParseDuration(v); err != nil || stalled < 0 {
			return badRequest("stalled %q: want a duration such as 5m", v)
		}
	}
	ctx := r.Context()
	jobs := []mq.Delivery{}
	if stalled > 0 {
		rec, err := s.mq.Recover(ctx, q, consumer, stalled, count)
		if err != nil {
			return err
		}
		jobs = append(jobs, rec.Claimed...)
	}
	if len(jobs) < count {
		more, err := s.mq.Claim(ctx, q, consumer, count-len(jobs))
		if err != nil && len(jobs)+len(more) == 0 {
			return err
		}
		jobs = append(jobs, more...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
	return nil
}

// jobBody is the body of an enqueue.
type jobBody struct {
	// Payload is the job, any JSON value.
	Payload jsontext.Value `json:"payload"`
	// ID is the job's id (JOB_…) to retry an enqueue idempotently; "" mints.
	ID string `json:"id"`
	// RunAt (RFC 3339) makes the job due no earlier; "" is at once.
	RunAt string `json:"run_at"`
}

// handleEnqueue is the two-tier enqueue: mode=async (the default) answers
// once the job is in the outbox (a crash loses at most K), mode=sync once its
// batch is one commit of the accept volume pushed to the remote.
func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	mode := accept.Async
	if v := r.URL.Query().Get("mode"); v != "" {
		if mode, err = accept.ParseMode(v); err != nil {
			return badRequest("mode %q: want async or sync", v)
		}
	}
	var b jobBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if len(b.Payload) == 0 {
		return badRequest(`give the job: {"payload":<any JSON value>}`)
	}
	var id brand.ID
	if b.ID != "" {
		bid, err := brand.Parse(b.ID)
		if err != nil || bid.Brand != brand.JOB || bid.ID == 0 || brand.JOB.Format(bid.ID) != b.ID {
			return badRequest("id %q: want a JOB id (JOB_…) that is not zero, as an earlier enqueue answered it, or no id to mint one", b.ID)
		}
		id = bid.ID
	}
	var runAt time.Time
	if b.RunAt != "" {
		if runAt, err = time.Parse(time.RFC3339Nano, b.RunAt); err != nil || runAt.UnixMilli() <= 0 {
			return badRequest("run_at %q: want an RFC 3339 time after 1970, such as 2030-01-02T03:04:05Z", b.RunAt)
		}
	}
	rc, err := s.tier.EnqueueAt(r.Context(), q, id, b.Payload, mode, runAt)
	if err != nil {
		return fmt.Errorf("enqueue on %s: %w", q, err)
	}
	var lsn any
	if rc.Mode == accept.Sync {
		lsn = rc.LSN
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": brand.JOB.Format(rc.ID), "mode": rc.Mode.String(), "lsn": lsn, "volume": rc.Volume})
	return nil
}

// entriesBody is the body of ack and redrive.
type entriesBody struct {
	Entries []string `json:"entries"`
	All     bool     `json:"all"`
	Limit   int      `json:"limit"`
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

func (s *Server) handleAck(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	var b entriesBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if len(b.Entries) == 0 {
		return badRequest(`give the entries to acknowledge: {"entries":["<entry id>",…]}`)
	}
	n, err := s.mq.Ack(r.Context(), q, b.Entries...)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int64{"acked": n})
	return nil
}

func (s *Server) handleDead(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 100, 1)
	if err != nil {
		return err
	}
	dead, err := s.mq.Dead(r.Context(), q, r.URL.Query().Get("after"), limit)
	if err != nil {
		return err
	}
	if dead == nil {
		dead = []mq.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead": dead})
	return nil
}

func (s *Server) handleRedrive(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	var b entriesBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if b.All == (len(b.Entries) > 0) {
		return badRequest(`give the dead-letter entries to redrive {"entries":[…]} or {"all":true,"limit":N} (not both)`)
	}
	if b.Limit < 0 || b.Limit > MaxBatch || b.Limit != 0 && !b.All {
		return badRequest(`limit %d: give {"all":true,"limit":N} with N from 1 to %d (0 or none: %d)`, b.Limit, MaxBatch, MaxBatch)
	}
	var ids []string
	if b.All {
		if b.Limit == 0 {
			b.Limit = MaxBatch
		}
		ids, err = s.mq.RedriveAll(r.Context(), q, b.Limit)
	} else {
		ids, err = s.mq.Redrive(r.Context(), q, b.Entries...)
	}
	if err != nil {
		return err
	}
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"redriven": len(ids), "entries": ids})
	return nil
}

func (s *Server) handleVolumes(w http.ResponseWriter, r *http.Request) error {
	infos, err := s.store.Volumes(r.Context())
	if err != nil {
		return err
	}
	if infos == nil {
		infos = []graft.Info{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"volumes": infos})
	return nil
}

func (s *Server) handleVolume(w http.ResponseWriter, r *http.Request) error {
	vid := r.PathValue("vid")
	if err := names.Check(names.KindVolume, vid); err != nil {
		return err
	}
	v, err := s.store.Volume(r.Context(), vid)
	if err != nil {
		return err
	}
	out, err := VolumeInfo(r.Context(), v, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "+frameAncestors)
	w.Write(web.Page(s.cfg.Faults))
}

// handleEvents streams server-sent events: "cycle" and "lsn", each first
// the newest of every stream and volume, then as they happen.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	rc := http.NewResponseController(w)
	ch, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": echostore events\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return nil
		case <-keepalive.C:
			io.WriteString(w, ": keepalive\n\n")
		case e, ok := <-ch:
			if !ok {
				return nil // shut down, or too slow: the client reconnects
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Kind, strings.TrimSpace(string(e.Data)))
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
