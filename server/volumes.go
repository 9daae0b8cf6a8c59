package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
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
// The CLI (`echostore volume reset V --to-remote [--discard N]`) and serve
// (POST /v1/volumes/{vid}/reset?to_remote=true[&discard=N]) both call it.
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

// volumePath validates {vid} and returns the volume of the data dir.
// create makes a volume the data dir lacks if the remote has commits of it
// (a pull), refusing a name the remote does not know.
func (s *Server) volumePath(r *http.Request, create bool) (*graft.Volume, error) {
	vid := r.PathValue("vid")
	if err := names.Check(names.KindVolume, vid); err != nil {
		return nil, err
	}
	ctx := r.Context()
	v, err := s.store.Volume(ctx, vid)
	if !create || !errors.Is(err, graft.ErrVolumeNotFound) {
		return v, err
	}
	l, err := remote.NewLog(s.rs, vid)
	if err != nil {
		return nil, err
	}
	head, err := l.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("volume %s: remote: %w", vid, err)
	}
	if head == 0 {
		return nil, fmt.Errorf("volume %q has no commits on the remote: check the name: %w", vid, graft.ErrVolumeNotFound)
	}
	return s.store.CreateVolume(ctx, vid)
}

// volumeOp is a replication route: it runs op on the volume and answers
// the volume's info with op's fields.
func (s *Server) volumeOp(create bool, op func(ctx context.Context, r *http.Request, v *graft.Volume) (map[string]any, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		v, err := s.volumePath(r, create)
		if err != nil {
			return err
		}
		extra, err := op(r.Context(), r, v)
		if err != nil {
			return volumeError(fmt.Errorf("volume %s: %w", v.Name(), err))
		}
		out, err := VolumeInfo(r.Context(), v, extra)
		if err != nil {
			return err
		}
		s.publishVolume(r.Context(), v.Name(), "")
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// volumeRoutes registers the replication routes of a volume.
func (s *Server) volumeRoutes(api func(string, handlerFunc)) {
	api("POST /v1/volumes/{vid}/push", s.volumeOp(false, func(ctx context.Context, _ *http.Request, v *graft.Volume) (map[string]any, error) {
		sp, err := v.Push(ctx)
		return map[string]any{"hash": sp.Hash.String()}, err
	}))
	api("POST /v1/volumes/{vid}/pull", s.volumeOp(true, func(ctx context.Context, _ *http.Request, v *graft.Volume) (map[string]any, error) {
		sp, err := v.Pull(ctx, nil)
		return map[string]any{"hash": sp.Hash.String()}, err
	}))
	api("POST /v1/volumes/{vid}/hydrate", s.volumeOp(false, func(ctx context.Context, _ *http.Request, v *graft.Volume) (map[string]any, error) {
		n, err := v.Unfetched(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{"frames_fetched": n}, v.Hydrate(ctx, nil)
	}))
	api("POST /v1/volumes/{vid}/reset", s.volumeOp(false, func(ctx context.Context, r *http.Request, v *graft.Volume) (map[string]any, error) {
		to, err := boolParam(r.URL.Query().Get("to_remote"))
		if err != nil || !to {
			return nil, badRequest("volume reset %s: pass to_remote=true: the reset drops the local commits that were never pushed and follows the remote", v.Name())
		}
		discard, err := ParseDiscard(r.URL.Query().Get("discard"))
		if err != nil {
			return nil, badRequest("volume reset %s: %v", v.Name(), err)
		}
		return ResetVolume(ctx, v, s.mq, discard)
	}))
}
