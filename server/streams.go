package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// DeleteConfirm is the value of the confirm parameter that DELETE
// /v1/streams/{q}/{s} insists on (the CLI's --yes-delete-history).
const DeleteConfirm = echostore.DeleteConfirm

// DeleteOut is the answer of DELETE /v1/streams/{q}/{s}, field for field
// what `echostore archive delete` prints: echostore.DeleteResult.
type DeleteOut = echostore.DeleteResult

// streamPath checks the {q} and {s} of the path, and their archive
// volume's name, once.
func streamPath(r *http.Request) (names.StreamRef, error) {
	if q := r.PathValue("q"); q == "" {
		// /v1/keys/{k}/…: the stream at key k (path-unescaped by the mux).
		return names.ParseKeyRef(r.PathValue("k"))
	}
	return names.ParseStreamRef(r.PathValue("q"), r.PathValue("s"))
}

// apiPath returns the API path of ref's stream: /v1/streams/{q}/{s}, or
// /v1/keys/{k} with the key path-escaped (one segment).
func apiPath(ref names.StreamRef) string {
	if k, ok := ref.Key(); ok {
		return "/v1/keys/" + url.PathEscape(k.String())
	}
	return "/v1/streams/" + url.PathEscape(ref.Queue().String()) + "/" + url.PathEscape(ref.Stream().String())
}

// refLabels returns the queue and stream labels of ref's metric series
// and events: its names for a stream of a queue; for a stream at key K an
// empty queue and the stream `key "K"` (K Go-quoted, so that a key of any
// bytes is a valid label value and never equals a stream name).
func refLabels(ref names.StreamRef) (queue, stream string) {
	if ref.IsKey() {
		return "", ref.String()
	}
	return ref.Queue().String(), ref.Stream().String()
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
	return mq.ParseJSONLines(body)
}

func (s *Server) handleAppend(w http.ResponseWriter, r *http.Request) (err error) {
	ref, err := streamPath(r)
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
	decl, fresh, err := s.touchFresh(ref)
	if err != nil {
		return err
	}
	if fresh && decl.archived {
		// Once its first records are in (the handler ends without an
		// error), it is registered, so that the node whose share it is
		// finds it before any cycle here registers it (it may never: the
		// stream may be another's share).
		defer func() {
			if err == nil {
				s.announce(context.WithoutCancel(r.Context()), ref)
			}
		}()
	}
	res, err := s.node.Append(r.Context(), ref, recs)
	if err != nil {
		return err
	}
	q, st := refLabels(ref)
	s.m.appended.WithLabelValues(q, st).Add(float64(len(recs)))
	s.m.tally.appended.Add(int64(len(recs)))
	writeJSON(w, http.StatusOK, res)
	return nil
}

// readRange parses from, to, limit, reverse of a read, whether it is
// live_only or archive_only, and its as_of.
func readRange(r *http.Request) (echostore.ReadOptions, error) {
	q := r.URL.Query()
	rg := echostore.ReadOptions{From: xid.Min, To: xid.Max, Limit: DefaultMaxReadLimit}
	var err error
	if v := q.Get("from"); v != "" {
		if rg.From, err = mq.ParseID(v, false); err != nil {
			return rg, badRequest("from: %w", err)
		}
	}
	if v := q.Get("to"); v != "" {
		if rg.To, err = mq.ParseID(v, true); err != nil {
			return rg, badRequest("to: %w", err)
		}
	}
	if v := q.Get("limit"); v != "" {
		if rg.Limit, err = strconv.Atoi(v); err != nil || rg.Limit < 0 {
			return rg, badRequest("limit %q: want 0 (all) or more", v)
		}
	}
	if rg.Reverse, err = boolParam(q.Get("reverse")); err != nil {
		return rg, badRequest("reverse: %w", err)
	}
	liveOnly, err := boolParam(q.Get("live_only"))
	if err != nil {
		return rg, badRequest("live_only: %w", err)
	}
	archiveOnly, err := boolParam(q.Get("archive_only"))
	if err != nil {
		return rg, badRequest("archive_only: %w", err)
	}
	if v := q.Get("as_of"); v != "" {
		if rg.AsOf, err = echostore.ParseAsOf(v); err != nil {
			return rg, badRequest("as_of: %w", err)
		}
		if liveOnly {
			return rg, badRequest("as_of reads the archive as it stood then; live_only reads the live stream, which keeps no past: give one")
		}
	}
	switch {
	case liveOnly && archiveOnly:
		return rg, badRequest("live_only and archive_only exclude each other: give one, or neither for the merge-read")
	case liveOnly:
		rg.Side = echostore.ReadLiveOnly
	case archiveOnly:
		rg.Side = echostore.ReadArchiveOnly
	}
	return rg, nil
}

// handleRead answers a read: the merge-read (Node.Read), or the live
// stream or the archive alone, as JSON lines.
func (s *Server) handleRead(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	rg, err := readRange(r)
	if err != nil {
		return err
	}
	seq := s.node.Read(r.Context(), ref, rg)
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
			s.log.Warn("serve: read skipped an entry that is not a record", ref.LogAttr(), "err", err)
			continue
		case err != nil && out == nil:
			return err
		case err != nil:
			out.Flush()
			s.log.Warn("serve: read failed after its first record; response aborted", ref.LogAttr(), "err", err)
			panic(http.ErrAbortHandler)
		}
		start()
		buf = append(echostore.AppendRecordJSON(buf[:0], ref, rec), '\n')
		if _, err := out.Write(buf); err != nil {
			return nil // the client went away
		}
	}
	start()
	out.Flush()
	return nil
}

func (s *Server) handleCycle(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	cfg, known := s.lookup(ref)
	if !known {
		if cfg, err = s.cfg.resolve(ref, StreamConfig{}); err != nil {
			return err
		}
	}
	if !cfg.archived {
		return &apiError{http.StatusConflict, CodeConflict, fmt.Errorf(
			"%s is declared archived: false (retention trims it, nothing is folded); a cycle would register it as archived", ref)}
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
	if err := groupLimitsQuery(qv, &win.Groups); err != nil {
		return err
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
		if err := s.admit(ref); err != nil {
			return err
		}
	}
	res, err := s.cycle(r.Context(), ref, cfg, win)
	if !known && (errors.Is(err, archive.ErrNoStream) || errors.Is(err, mq.ErrWrongType)) {
		s.unadmit(ref) // no stream there: the cycle took no place
	}
	if err != nil {
		return err
	}
	if !known {
		// The cycle registered it: the group's nodes discover it now.
		if err := s.node.Announce(r.Context(), ref); err != nil {
			s.log.Warn("serve: a new archived stream not announced to the group; found by the next periodic discovery", ref.LogAttr(), "err", err)
		}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// handleDelete deletes an archived stream and its archive (Archiver.Delete
// with serve's store and remote) once confirm=DeleteConfirm: serve stops
// cycling the stream first, so no beat re-creates its volume. A failed
// delete declares the stream again as it was.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	if c := r.URL.Query().Get("confirm"); c != DeleteConfirm {
		return badRequest("deleting %s deletes the stream and its whole archived history (%s); nothing was deleted: add confirm=%s",
			ref, ref.Volume(), DeleteConfirm)
	}
	res, err := s.deleteStream(r.Context(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// handleStatus answers where the seam of the stream is (Node.Status,
// which pulls a volume this data dir lacks or holds behind the seam).
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	st, err := s.node.Status(r.Context(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// noBody refuses a request body on a route that takes its parameters in
// the query (a cycle's keep=…): silently ignoring {"keep":5} would run the
// cycle with other settings than the caller meant.
func noBody(r *http.Request) error {
	var one [1]byte
	if n, _ := io.ReadFull(r.Body, one[:]); n > 0 {
		return badRequest("this route takes its parameters in the query string (e.g. ?keep=5), not in a body; nothing was done")
	}
	return nil
}
