package server

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerOf reads the credentials of the process at the other end of c
// (SO_PEERCRED: those it had when it connected).
func peerOf(c *net.UnixConn) peer {
	rc, err := c.SyscallConn()
	if err != nil {
		return peer{err: fmt.Errorf("peer credentials: %w", err)}
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{err: fmt.Errorf("peer credentials: %w", err)}
	}
	if cerr != nil {
		return peer{err: fmt.Errorf("peer credentials: SO_PEERCRED: %w", cerr)}
	}
	return peer{uid: cred.Uid, known: true}
}
