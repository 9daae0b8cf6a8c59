package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/resp"
)

// listenRESP listens on cfg.RESP and makes the RESP front (package resp)
// over the node: archived streams read through the node's merge-read,
// every other command relayed to cfg.Redis on a connection of its own per
// client, AUTH checked against the server's tokens with their scopes.
func (s *Server) listenRESP() error {
	if s.cfg.RESP == "" {
		return nil
	}
	ep, err := mq.ParseURL(s.cfg.Redis)
	if err != nil {
		return fmt.Errorf("serve: resp: %w", err)
	}
	if len(ep.Addrs) == 0 {
		return fmt.Errorf("%w: resp: the Redis URL names no address", ErrConfig)
	}
	up := resp.Upstream{Addr: ep.Addrs[0], Username: ep.Username, Password: ep.Password, DB: ep.DB, DialTimeout: ep.DialTimeout}
	if ep.TLS {
		if up.TLS, err = ep.TLSConfig(); err != nil {
			return fmt.Errorf("serve: resp: %w", err)
		}
	}
	cfg := resp.Config{
		Upstream: up,
		Archive:  s.node,
		Lookup:   s.node,
		Logger:   s.log,
	}
	if len(s.cfg.tokens) > 0 {
		cfg.Authenticate = s.respAuth
	}
	if s.resp, err = resp.New(cfg); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if s.respLn, err = net.Listen("tcp", s.cfg.RESP); err != nil {
		return fmt.Errorf("serve: listen resp %s: %w", s.cfg.RESP, err)
	}
	return nil
}

// respAuth checks an AUTH password against every token, in constant time;
// the user name is not part of it.
func (s *Server) respAuth(_, password []byte) (resp.Identity, bool) {
	found := -1
	for i, t := range s.cfg.tokens {
		if subtle.ConstantTimeCompare(password, t.bearer[len("Bearer "):]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return resp.Identity{}, false
	}
	t := s.cfg.tokens[found]
	return resp.Identity{Name: t.name, Scope: resp.Scope(t.scope)}, true
}

// serveRESP serves the RESP front until Run shuts down (stopRESP); a
// listener failure is logged.
func (s *Server) serveRESP(ctx context.Context) {
	if s.resp == nil {
		return
	}
	s.log.Info("serve: RESP front listening", "addr", s.respLn.Addr().String(), "tokens", len(s.cfg.tokens) > 0)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.resp.Serve(ctx, s.respLn); err != nil && !errors.Is(err, resp.ErrClosed) {
			s.log.Error("serve: RESP front stopped", "err", err)
		}
	}()
}

// stopRESP closes the RESP front's listener and connections.
func (s *Server) stopRESP() {
	if s.resp != nil {
		_ = s.resp.Close()
	} else if s.respLn != nil {
		s.respLn.Close()
	}
}

// RESPAddr is the address of the RESP front, nil without one
// (Config.RESP).
func (s *Server) RESPAddr() net.Addr {
	if s.respLn == nil {
		return nil
	}
	return s.respLn.Addr()
}
