package server

import (
	"fmt"
	"net/http"

	"github.com/echostore/echostore"
)

// ErrInjectedFault is the error of a cycle that an armed fault failed (POST
// /v1/streams/{q}/{s}/fault, echostore.Node.ArmFault): the cycle folded,
// then failed before its trim, so the stream over-retains and loses nothing.
var ErrInjectedFault = echostore.ErrInjectedFault

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
	if err := s.node.ArmFault(ref); err != nil {
		return err
	}
	s.log.Warn("serve: fault armed: the next cycle folds, then fails before its trim", ref.LogAttr())
	writeJSON(w, http.StatusOK, FaultOut{Armed: true, Queue: ref.Queue().String(), Stream: ref.Stream().String()})
	return nil
}
