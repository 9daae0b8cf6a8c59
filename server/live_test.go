package server

import (
	"testing"

	"github.com/echostore/echostore/mq"
)

// live returns a client of the server's Redis, closed with the test, for
// what a test reads below the node (lengths, change feeds, raw entries).
func (s *Server) live(t testing.TB) *mq.Client {
	t.Helper()
	c, err := mq.Connect(t.Context(), mq.Options{URL: s.cfg.Redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
