package accept

import (
	"errors"
	"syscall"

	"github.com/echostore/echostore/graft"
)

// ErrDiskFull: the data directory (the outbox's or the accept volumes'
// graft store's) is full or below its free-space reserve. Nothing was
// recorded; enqueues are accepted again by themselves once space is freed.
// It is graft.ErrDiskFull (so errors.Is matches either) and wraps
// syscall.ENOSPC.
var ErrDiskFull = graft.ErrDiskFull

// noSpace reports a write that failed for want of space.
func noSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
