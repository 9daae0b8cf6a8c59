package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// Error codes of the replication routes.
const (
	// CodeWouldDiscard (409): a reset to the remote would discard
	// acknowledged records (graft.ErrWouldDiscard); repeat the count with
	// discard=N to go on.
	CodeWouldDiscard = api.CodeWouldDiscard
	// CodeRemoteMismatch (409): the remote attached is not the one the
	// volume was pushed to, or lacks its pushed commits
	// (graft.ErrRemoteMismatch).
	CodeRemoteMismatch = api.CodeRemoteMismatch
)

// volumeCode returns the status and code of the replication errors that
// have codes of their own (ok false for any other error). classify may
// call it, so that routes other than the volume routes (a merge-read's
// pull, a cycle's push) answer them too.
func volumeCode(err error) (status int, code string, ok bool) {
	switch {
	case errors.Is(err, graft.ErrWouldDiscard):
		return http.StatusConflict, CodeWouldDiscard, true
	case errors.Is(err, graft.ErrRemoteMismatch):
		return http.StatusConflict, CodeRemoteMismatch, true
	}
	return 0, "", false
}

// volumeError gives an error of the replication routes its own status and
// code (volumeCode); others pass unchanged.
func volumeError(err error) error {
	if status, code, ok := volumeCode(err); ok {
		return &apiError{status, code, err}
	}
	return err
}

// ParseDiscard parses the confirmed count of a reset (--discard, discard=):
// a non-negative decimal integer; "" is 0.
func ParseDiscard(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("discard %q: want the number of records the refused reset named (a non-negative integer)", s)
	}
	return n, nil
}

// volumePath checks the {vid} of the path.
func volumePath(r *http.Request) (names.Volume, error) {
	return names.ParseVolume(r.PathValue("vid"))
}

// volumeOp is a replication route: it runs op on the volume named by the
// path and answers op's result (the volume's info and op's fields), then
// publishes the volume's LSNs.
func volumeOp[T any](s *Server, op func(ctx context.Context, r *http.Request, v names.Volume) (T, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		v, err := volumePath(r)
		if err != nil {
			return err
		}
		out, err := op(r.Context(), r, v)
		if err != nil {
			return volumeError(err)
		}
		s.publishVolume(r.Context(), v, "")
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// volumeRoutes registers the replication routes of a volume.
func (s *Server) volumeRoutes(api func(string, handlerFunc)) {
	api("POST /v1/volumes/{vid}/push", volumeOp(s, func(ctx context.Context, _ *http.Request, v names.Volume) (echostore.PushResult, error) {
		return s.node.Push(ctx, v)
	}))
	api("POST /v1/volumes/{vid}/pull", volumeOp(s, func(ctx context.Context, _ *http.Request, v names.Volume) (echostore.PullResult, error) {
		return s.node.Pull(ctx, v, nil)
	}))
	api("POST /v1/volumes/{vid}/hydrate", volumeOp(s, func(ctx context.Context, _ *http.Request, v names.Volume) (echostore.HydrateResult, error) {
		return s.node.Hydrate(ctx, v, nil)
	}))
	api("POST /v1/volumes/{vid}/reset", volumeOp(s, func(ctx context.Context, r *http.Request, v names.Volume) (echostore.ResetResult, error) {
		// A volume the data dir lacks is 404 before the parameters count.
		if _, err := s.node.VolumeInfo(ctx, v); err != nil {
			return echostore.ResetResult{}, err
		}
		to, err := boolParam(r.URL.Query().Get("to_remote"))
		if err != nil || !to {
			return echostore.ResetResult{}, badRequest("volume reset %s: pass to_remote=true: the reset drops the local commits that were never pushed and follows the remote", v)
		}
		discard, err := ParseDiscard(r.URL.Query().Get("discard"))
		if err != nil {
			return echostore.ResetResult{}, badRequest("volume reset %s: %v", v, err)
		}
		return s.node.Reset(ctx, v, discard)
	}))
	// The remote log's checkpoint and GC (admin, as every volume route).
	api("POST /v1/volumes/{vid}/checkpoint", volumeOp(s, func(ctx context.Context, _ *http.Request, v names.Volume) (echostore.CheckpointResult, error) {
		return s.node.Checkpoint(ctx, v)
	}))
	api("POST /v1/volumes/{vid}/gc", volumeOp(s, func(ctx context.Context, r *http.Request, v names.Volume) (echostore.GCResult, error) {
		opts, err := gcOptions(r.URL.Query())
		if err != nil {
			return echostore.GCResult{}, badRequest("volume gc %s: %v", v, err)
		}
		return s.node.GC(ctx, v, opts)
	}))
}

// gcOptions parses the parameters of POST /v1/volumes/{vid}/gc:
// keep_checkpoints (default 1), min_age (default 1h), grace (default 0)
// and trim_log.
func gcOptions(q url.Values) (echostore.GCOptions, error) {
	opts := echostore.GCOptions{KeepCheckpoints: 1, MinAge: time.Hour}
	var err error
	if v := q.Get("keep_checkpoints"); v != "" {
		if opts.KeepCheckpoints, err = strconv.Atoi(v); err != nil || opts.KeepCheckpoints < 1 {
			return opts, fmt.Errorf("keep_checkpoints %q: want 1 or more", v)
		}
	}
	if v := q.Get("min_age"); v != "" {
		if opts.MinAge, err = time.ParseDuration(v); err != nil || opts.MinAge < 0 {
			return opts, fmt.Errorf("min_age %q: want a duration such as 1h", v)
		}
	}
	if v := q.Get("grace"); v != "" {
		if opts.Grace, err = time.ParseDuration(v); err != nil || opts.Grace < 0 {
			return opts, fmt.Errorf("grace %q: want a duration such as 1h", v)
		}
	}
	if opts.TrimLog, err = boolParam(q.Get("trim_log")); err != nil {
		return opts, fmt.Errorf("trim_log: %w", err)
	}
	return opts, nil
}

func (s *Server) handleVolumes(w http.ResponseWriter, r *http.Request) error {
	res, err := s.node.Volumes(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) handleVolume(w http.ResponseWriter, r *http.Request) error {
	v, err := volumePath(r)
	if err != nil {
		return err
	}
	res, err := s.node.VolumeInfo(r.Context(), v)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
