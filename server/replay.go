package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// ReplayBody is the body of POST /v1/streams/{q}/{s}/replay and of
// POST /v1/keys/{k}/replay (the source is the stream at key k): the range
// (from, to: EVT_… or Redis ids, inclusive; "" leaves an end open), the
// Redis key of the target stream, the rate in records per second (0:
// echostore.DefaultReplayRate) and the most records to copy in this
// request (0: all). The query parameter force=true (admin scope) lets the
// target be a key in echostore's namespace.
type ReplayBody struct {
	From  string  `json:"from"`
	To    string  `json:"to"`
	Into  string  `json:"into"`
	Rate  float64 `json:"rate"`
	Limit int     `json:"limit"`
}

// ReplayOut is the answer of a replay: echostore.ReplayResult, field for
// field what `echostore stream replay` prints.
type ReplayOut = echostore.ReplayResult

// replayOptions checks a replay's body and returns its options. Every
// error is a 400.
func replayOptions(b ReplayBody) (echostore.ReplayOptions, error) {
	opts := echostore.ReplayOptions{To: xid.Max, Into: b.Into, Rate: b.Rate, Limit: b.Limit}
	var err error
	if b.From != "" {
		if opts.From, err = mq.ParseID(b.From, false); err != nil {
			return opts, badRequest("from: %w", err)
		}
	}
	if b.To != "" {
		if opts.To, err = mq.ParseID(b.To, true); err != nil {
			return opts, badRequest("to: %w", err)
		}
	}
	switch {
	case b.Into == "":
		return opts, badRequest(`into: give the Redis key of the stream to copy into ({"into":"orders-replay"})`)
	case opts.To.Less(opts.From):
		return opts, badRequest("from %s is above to %s", b.From, b.To)
	case b.Rate < 0 || math.IsNaN(b.Rate) || math.IsInf(b.Rate, 0):
		return opts, badRequest("rate %v: want a positive number of records per second (0: %d)", b.Rate, echostore.DefaultReplayRate)
	case b.Limit < 0:
		return opts, badRequest("limit %d: want 0 (all) or more", b.Limit)
	}
	return opts, nil
}

// handleReplay copies a range of the stream into the Redis stream of the
// body's key under the original ids (Node.Replay): a refused target or a
// target holding other entries in the range is 409 conflict, before
// anything is written; a replay that serve's shutdown stopped is 503 (the
// records copied stay; run it again to go on).
func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	force, err := boolParam(r.URL.Query().Get("force"))
	if err != nil {
		return badRequest("force: %w", err)
	}
	var b ReplayBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	opts, err := replayOptions(b)
	if err != nil {
		return err
	}
	opts.Force = force
	// A shutdown stops the replay at its next batch, so that it never
	// holds serve's shutdown up (a run again goes on where it stopped).
	ctx, cancel := s.untilShutdown(r.Context())
	defer cancel()
	res, err := s.node.Replay(ctx, ref, opts)
	if res.Copied > 0 || err != nil {
		queue, stream := refLabels(ref)
		s.log.Info("serve: replay", "queue", queue, "stream", stream, "copied", res.Copied, "done", res.Done, "err", err)
	}
	switch {
	case errors.Is(err, echostore.ErrReplayTarget) || errors.Is(err, echostore.ErrReplayConflict):
		return &apiError{http.StatusConflict, CodeConflict, err}
	case err != nil && r.Context().Err() == nil && ctx.Err() != nil:
		return &apiError{http.StatusServiceUnavailable, CodeUnavailable, fmt.Errorf("serve is shutting down: %w", err)}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// untilShutdown returns ctx, ended also by serve's shutdown: a long
// request (a replay, an export) stops at its next step and never holds
// the shutdown up. The caller must call cancel.
func (s *Server) untilShutdown(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
