package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Error codes of the replication routes.
const (
	// CodeWouldDiscard (409): a reset to the remote would discard
	// acknowledged records (graft.ErrWouldDiscard); repeat the count with
	// discard=N to go on.
	CodeWouldDiscard = "would_discard"
	// CodeRemoteMismatch (409): the remote attached is not the one the
	// volume was pushed to, or lacks its pushed commits
	// (graft.ErrRemoteMismatch).
	CodeRemoteMismatch = "remote_mismatch"
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

// ResetVolume resets v to the remote (graft.Volume.ResetWith), guarded by
// the count of the acknowledged records that only its unpushed commits
// hold: for an archive volume (archive.Q.S) the archived records no longer
// in the live stream (archive.DiscardCounter over live, which may be nil
// when Redis is unreachable: then every unpushed archived record counts),
// for an accept volume (accept.Q.N) the jobs on its unpushed pages
// (AcceptDiscardCounter). discard is the count the caller confirms; any
// other count refuses with a *graft.DiscardError and drops nothing. After
// the reset of an archive volume, a seam cache that named the dropped folds
// is lowered to the volume (archive.RepairSeam), so the stream stays
// readable and cycles go on. It returns the fields `volume reset` prints:
// dropped (local commits) and discarded (records).
//
// Deprecated: the CLI's direct path calls it until it runs on
// echostore.Node; use Node.Reset, which serve's reset route calls.
func ResetVolume(ctx context.Context, v *graft.Volume, live *mq.Client, discard uint64) (map[string]any, error) {
	if strings.HasPrefix(v.Name(), "archive.") {
		res, err := archive.ResetVolume(ctx, v, live, discard)
		out := map[string]any{"dropped": res.Dropped, "discarded": res.Discarded}
		if res.SeamLowered {
			out["seam_lowered"] = true
		}
		return out, err
	}
	opts := graft.ResetOptions{Discard: discard}
	var counted uint64
	if strings.HasPrefix(v.Name(), "accept.") {
		opts.Count = func(ctx context.Context, u *graft.Unpushed) (uint64, string, error) {
			n, what, err := AcceptDiscardCounter(ctx, u)
			counted = n
			return n, what, err
		}
	}
	n, err := v.ResetWith(ctx, opts)
	if err != nil {
		counted = 0
	}
	return map[string]any{"dropped": n, "discarded": counted}, err
}

// WhatJobs names the records AcceptDiscardCounter counts.
const WhatJobs = "acknowledged jobs not in the remote"

// AcceptDiscardCounter is the graft.DiscardCounter of an accept volume
// (accept.Q.N): every job page the unpushed commits wrote (accept's page
// layout, accept.DecodeJob) is a job acknowledged to its producer that the
// remote does not hold. A page that does not decode as a job counts too:
// nothing shows it is held elsewhere.
//
// Deprecated: ResetVolume's counter; Node.Reset has its own.
func AcceptDiscardCounter(ctx context.Context, u *graft.Unpushed) (uint64, string, error) {
	if len(u.Pages) == 0 {
		return 0, WhatJobs, nil
	}
	snap, err := u.Volume.SnapshotAt(ctx, u.Head)
	if err != nil {
		return 0, "", err
	}
	defer snap.Close()
	var n uint64
	for _, p := range u.Pages {
		if p >= graft.ArchiveBase {
			continue
		}
		b, err := snap.Get(ctx, p)
		if errors.Is(err, graft.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, "", err
		}
		if _, err := accept.DecodeJob(b); err != nil {
			slog.Default().Warn("an unpushed page of an accept volume is not a job; counted as one", "volume", u.Volume.Name(), "page", p, "err", err)
		}
		n++
	}
	return n, WhatJobs, nil
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

// VolumeInfo is a volume's graft.Info as a JSON object, with the frames not
// yet fetched (unfetched_frames) and extra's fields: what GET
// /v1/volumes/{vid}, the replication routes, `echostore volume info` and
// the replication commands answer.
//
// Deprecated: the CLI's direct path calls it until it runs on
// echostore.Node; use Node.VolumeInfo and the replication methods, whose
// typed results serve answers.
func VolumeInfo(ctx context.Context, v *graft.Volume, extra map[string]any) (map[string]any, error) {
	b, err := json.Marshal(v.Info())
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if n, err := v.Unfetched(ctx); err == nil {
		out["unfetched_frames"] = n
	}
	for k, x := range extra {
		out[k] = x
	}
	return out, nil
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
// keep_checkpoints (default 1), min_age (default 1h) and trim_log.
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
