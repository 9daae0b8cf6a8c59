//go:build !linux

package server

import (
	"errors"
	"net"
)

// peerOf: without SO_PEERCRED the peer is unknown, and a socket request
// needs a token as on TCP.
func peerOf(*net.UnixConn) peer {
	return peer{err: errors.New("peer credentials: not read on this platform")}
}
