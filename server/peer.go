package server

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/echostore/echostore/api"
)

// CodePeerRefused: 403, a request over the unix socket whose peer is
// neither serve's own user nor root (whatever token it carries).
const CodePeerRefused = api.CodePeerRefused

// peer is the process at the other end of a unix socket connection, as
// the kernel reports it (SO_PEERCRED): what the socket trusts instead of a
// token.
type peer struct {
	uid   uint32
	known bool  // the kernel reported the peer's credentials
	err   error // why it did not, if !known
}

// peerKey is the request context's key of a unix socket connection's peer
// (connContext puts it there; TCP connections have none).
type peerKey struct{}

// connContext is the http.Server's ConnContext: a connection accepted on
// the unix socket carries its peer's credentials, read once when it is
// accepted, into every request it sends.
func connContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, peerOf(uc))
}

// socketPeer returns the peer of a request that came over the unix socket;
// ok is false for a TCP request.
func socketPeer(r *http.Request) (peer, bool) {
	p, ok := r.Context().Value(peerKey{}).(peer)
	return p, ok
}

// trustedPeer reports whether a socket peer is serve's own user or root:
// the users who can read the data dir (and its serve.token) anyway.
func (s *Server) trustedPeer(p peer) bool {
	return p.known && (p.uid == 0 || int64(p.uid) == int64(s.uid))
}

// checkPeer refuses a socket request of another user, even one that could
// open the socket (a chmod, a data dir shared through a group): 403
// CodePeerRefused. A peer whose credentials are unknown (a platform
// without SO_PEERCRED) is not refused here; it needs a token, as on TCP.
func (s *Server) checkPeer(r *http.Request) error {
	p, ok := socketPeer(r)
	if !ok || !p.known || s.trustedPeer(p) {
		return nil
	}
	return &apiError{http.StatusForbidden, CodePeerRefused, fmt.Errorf(
		"the unix socket answers only uid %d (serve's user) and root, not uid %d: use serve's TCP address with a token", s.uid, p.uid)}
}
