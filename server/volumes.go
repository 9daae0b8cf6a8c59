package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

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
	if err := names.Check(names.Volume, vid); err != nil {
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
			return fmt.Errorf("volume %s: %w", v.Name(), err)
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
		n, err := v.Reset(ctx, true)
		return map[string]any{"dropped": n}, err
	}))
}
