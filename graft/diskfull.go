package graft

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/internal/diskguard"
)

// A full data directory. Pebble treats ENOSPC on its write-ahead log or
// manifest as fatal (the process ends), so a read-write Store keeps the disk
// from filling under it: commits and volume creations are refused with
// ErrDiskFull while the filesystem is below Options.DiskReserve; a ballast
// file (Options.Ballast) holds space back for the writes already under way
// when something else fills the disk, and is released on the first ENOSPC
// that Pebble meets (vfs.OnDiskFull retries that write once, which then
// fits); background errors (a flush or compaction that met ENOSPC, which
// Pebble retries) refuse writes too. Once the reserve and the ballast fit
// again the store accepts writes by itself; nothing acknowledged is lost on
// the way, since a refused commit writes nothing.

// ErrDiskFull: the data directory's filesystem is full or below the store's
// free-space reserve; nothing was written, and writes are accepted again by
// themselves once space is freed. It wraps syscall.ENOSPC.
var ErrDiskFull = diskguard.ErrFull

// CheckRoom returns nil if the data directory has room for a write, or an
// error wrapping ErrDiskFull that says how much is free and what is kept in
// reserve. Callers that record elsewhere before they commit (the accept
// outbox) ask first, so that a full disk refuses before any side effect.
func (s *Store) CheckRoom() error {
	if s.disk == nil {
		return nil
	}
	if err := s.disk.Check(); err != nil {
		return err
	}
	return nil
}

// IsStorageFull reports whether err says that there is no room to store:
// the data directory (ErrDiskFull, or any ENOSPC) or the object store (an
// S3 "storage full" answer such as MinIO's XMinioStorageFull, or HTTP 507
// Insufficient Storage).
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrDiskFull) || errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) {
		switch coded.ErrorCode() {
		case "XMinioStorageFull", "StorageFull", "InsufficientStorage":
			return true
		}
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() == http.StatusInsufficientStorage {
		return true
	}
	return false
}

// eventListener logs Pebble's background errors, and tells the disk guard
// of one that met ENOSPC (a flush or compaction that did not fit: Pebble
// retries it, and the store refuses writes meanwhile).
func eventListener(log *slog.Logger, g *diskguard.Guard) *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device") {
				g.NoSpace()
			}
			log.Error("graft: pebble background error", "component", "pebble", "err", err)
		},
	}
}
