package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// ErrInjectedFault is the error of a cycle that an armed fault failed (POST
// /v1/streams/{q}/{s}/fault): the cycle folded, then failed before its trim,
// so the stream over-retains and loses nothing.
var ErrInjectedFault = errors.New("serve: injected fault: the cycle failed after its fold and before its trim; trim skipped")

// faultPusher is the replication step of the faulty archiver: it fails, so a
// cycle run through that archiver commits its fold and never reaches the trim
// (archive.Archiver.Cycle trims nothing after an error).
type faultPusher struct{}

func (faultPusher) Push(context.Context, *graft.Volume) (remote.SyncPoint, error) {
	return remote.SyncPoint{}, ErrInjectedFault
}
func (faultPusher) Pushed(context.Context, *graft.Volume) (uint64, error) {
	return 0, ErrInjectedFault
}

// newFaultyArchiver returns the archiver that runs a stream's cycle while a
// fault is armed: the archive package's own cycle (lease, fold, seam cache),
// trimming only what a push covers, through a pusher that always fails.
func newFaultyArchiver(opts archive.Options) (*archive.Archiver, error) {
	opts.TrimAfter = archive.TrimAfterRemote
	opts.Pusher = faultPusher{}
	return archive.New(opts)
}

// armFault arms a one-shot fault for the next archive cycle of ref, through
// the API or on the beat.
func (s *Server) armFault(ref names.StreamRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[ref] = true
}

// takeFault disarms and reports the fault armed for ref.
func (s *Server) takeFault(ref names.StreamRef) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	armed := s.faults[ref]
	delete(s.faults, ref)
	return armed
}

// takeFaults disarms and returns the declared archived streams with an armed
// fault.
func (s *Server) takeFaults() []stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []stream
	for k := range s.faults {
		if st, ok := s.streams[k]; ok && st.archived {
			out = append(out, st)
			delete(s.faults, k)
		}
	}
	return out
}

// FaultOut is the answer of POST /v1/streams/{q}/{s}/fault: the fault is
// armed for the next cycle of the stream.
type FaultOut struct {
	Armed  bool   `json:"armed"`
	Queue  string `json:"queue"`
	Stream string `json:"stream"`
}

// handleFault arms a one-shot fault in the next cycle of the stream: it
// folds, then fails before the trim, which it skips (the stream keeps every
// record live; nothing is lost). The cycle after it trims again.
func (s *Server) handleFault(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	cfg, err := s.touch(ref)
	if err != nil {
		return err
	}
	if !cfg.archived {
		return &apiError{http.StatusConflict, CodeConflict, fmt.Errorf(
			"%s is declared archived: false: nothing is folded, so there is no fold to fault", ref)}
	}
	s.armFault(ref)
	s.log.Warn("serve: fault armed: the next cycle folds, then fails before its trim", ref.LogAttr())
	writeJSON(w, http.StatusOK, FaultOut{Armed: true, Queue: ref.Queue().String(), Stream: ref.Stream().String()})
	return nil
}
