package server

import (
	"context"
	"fmt"

	"github.com/echostore/echostore"
)

// adopt is the node's discovery's offer of a (echostore.BeatOptions.Adopt:
// on the first beat, then at most every echostore.DefaultDiscoverEvery or
// when the group changed): an archived stream registered in Redis that the
// node may adopt and that this server did not meet through the API. It is
// archived with the defaults' window and trim_after, within max_streams.
// It runs inside the beat (Beat holds beatMu), so no delete runs meanwhile.
func (s *Server) adopt(_ context.Context, a echostore.Adoptable) error {
	k := a.Ref
	if _, known := s.lookup(k); known {
		return nil
	}
	st, err := s.cfg.resolve(k, StreamConfig{})
	if err != nil {
		return err
	}
	if err := s.admit(k); err != nil {
		return fmt.Errorf("serve: max_streams reached: %w", err)
	}
	st.archived = true // registered as archived: retention would refuse it
	s.log.Info("serve: archived stream discovered in Redis", k.LogAttr(),
		"keep", st.window.Keep, "max_age", st.window.MaxAge, "local_volume", a.LocalVolume)
	if err := s.declare(st); err != nil {
		s.unadmit(k)
		return err
	}
	return nil
}
