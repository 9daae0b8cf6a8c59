package graft

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/graft/diskguard"
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
// reserve (or the store's failure: see ErrStoreFailed). Callers that record
// elsewhere before they commit (the accept outbox) ask first, so that a
// full disk refuses before any side effect. It is CheckRoomFor(0).
func (s *Store) CheckRoom() error { return s.CheckRoomFor(0) }

// CheckRoomFor is CheckRoom for a write that stages about staged bytes: it
// refuses, with ErrDiskFull, a write whose share of the disk
// (RoomFactor × staged) does not fit above the reserve, so that a commit
// larger than the free space is refused before Pebble meets ENOSPC on its
// write-ahead log (which Pebble cannot survive). What it admits is counted
// against the free space until the guard next measures it.
func (s *Store) CheckRoomFor(staged int64) error {
	if err := s.failure(); err != nil {
		return err
	}
	if s.disk == nil {
		return nil
	}
	return s.disk.CheckFor(uint64(max(staged, 0)) * RoomFactor)
}

// RoomFactor is how many times its staged bytes a commit needs free above
// the reserve: once for its write-ahead-log record, written now, and once
// for the table (or blob file) its memtable is flushed to, written while
// that log is still on disk. A later compaction rewrites the table only
// after the flush deleted the log, so its output fits in the log's space
// (and blob files of separated values are not rewritten); compression only
// makes both smaller.
const RoomFactor = 2

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

// isNoSpace reports an error of a write that found no space.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device")
}

// bgLogEvery is how often, at most, Pebble's background errors are logged
// after the first: a flush or compaction that fails is retried at once, so
// a full disk would otherwise write a line per retry.
const bgLogEvery = 10 * time.Second

// bgMaxBackoff bounds the pause after a background write that found no
// space (see backgroundErrors.report).
const bgMaxBackoff = 250 * time.Millisecond

// backgroundErrors reports Pebble's background errors: it tells the disk
// guard of one that met ENOSPC, logs the first and then one line per
// bgLogEvery with the count of those not logged, and slows Pebble's retry
// loop down on a full disk.
type backgroundErrors struct {
	log *slog.Logger
	g   *diskguard.Guard

	mu       sync.Mutex
	logged   time.Time // when a line was last logged
	unlogged int       // errors since then not logged
	noSpace  int       // consecutive ENOSPC errors
}

func (b *backgroundErrors) report(err error) {
	full := isNoSpace(err)
	if full {
		b.g.NoSpace()
	}
	b.mu.Lock()
	if full {
		b.noSpace++
	} else {
		b.noSpace = 0
	}
	n := b.noSpace
	now := time.Now()
	logIt := b.logged.IsZero() || now.Sub(b.logged) >= bgLogEvery
	unlogged := b.unlogged
	if logIt {
		b.logged, b.unlogged = now, 0
	} else {
		b.unlogged++
	}
	b.mu.Unlock()
	if logIt {
		b.log.Error("graft: pebble background error", "component", "pebble", "err", err, "not_logged_since_last", unlogged)
	}
	// Pebble retries a failed flush or compaction at once, with no backoff:
	// on a full disk that is a busy loop (at open it held start-up for as
	// long as the disk stayed full). Pause before the retry, from 10 ms
	// doubling up to bgMaxBackoff; Pebble holds its mutex meanwhile, which
	// delays at most that long the reads that need it.
	if full && n > 1 {
		time.Sleep(min(10*time.Millisecond<<min(n-2, 10), bgMaxBackoff))
	}
}

// eventListener is Pebble's event listener of a store: background errors
// go to a backgroundErrors.
func eventListener(b *backgroundErrors) *pebble.EventListener {
	return &pebble.EventListener{BackgroundError: b.report}
}

// ErrStoreFailed: Pebble met an error it cannot go on from (a commit whose
// write-ahead-log write failed, e.g. the disk filled from outside faster
// than the guard measures), and the store refuses every later write, and
// Close, with an error wrapping ErrStoreFailed and that cause (which wraps
// ENOSPC when it was a full disk, so IsStorageFull holds). Reads go on: they
// use Pebble's tables and memtables, not its commit pipeline, and a volume
// reads at its own head, which the failed commit did not move. The commit
// that failed may or may not be found after a restart; none after it was
// written. Only a restart of the process (a new Open) clears it.
var ErrStoreFailed = errors.New("graft: the store met a fatal storage error; writes are refused until the process restarts (reads go on)")

// fatalState is the failure of one store, shared by its Pebble logger.
type fatalState struct {
	log *slog.Logger
	err atomic.Pointer[error]
}

// fail records cause as the store's failure (the first one wins, and is
// the only one logged) and returns the failure.
func (f *fatalState) fail(cause error) error {
	err := fmt.Errorf("%w: %w", ErrStoreFailed, cause)
	if f.err.CompareAndSwap(nil, &err) {
		f.log.Error("graft: the store failed: writes are refused until the process restarts (reads go on)", "component", "pebble", "err", cause)
	}
	return *f.err.Load()
}

// get returns the failure, nil if none.
func (f *fatalState) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fatalPanic is what the Pebble logger's Fatalf panics with: Store.commit
// and Store.set recover it as the store's failure.
type fatalPanic struct{ err error }

// failure returns the store's failure, nil if none.
func (s *Store) failure() error { return s.fatal.get() }

// Failed returns nil, or the error (wrapping ErrStoreFailed) of the fatal
// storage error that stopped the store's writes; /healthz reports it.
func (s *Store) Failed() error { return s.fatal.get() }

// commit commits b unless the store has failed; a fatal error of Pebble's
// commit (its Fatalf, or its panic on a failed write-ahead-log write) fails
// the store and is returned, instead of ending the goroutine.
func (s *Store) commit(b *pebble.Batch, opt *pebble.WriteOptions) (err error) {
	if err := s.failure(); err != nil {
		return err
	}
	defer s.recoverFatal(&err)
	n := s.committing.Add(1)
	defer s.committing.Add(-1)
	if hook := s.testHookCommitting.Load(); hook != nil {
		(*hook)(n)
	}
	return b.Commit(opt)
}

// set is db.Set as commit is b.Commit.
func (s *Store) set(key, value []byte, opt *pebble.WriteOptions) (err error) {
	if err := s.failure(); err != nil {
		return err
	}
	defer s.recoverFatal(&err)
	return s.db.Set(key, value, opt)
}

// recoverFatal turns a panic of Pebble's commit path into the store's
// failure: the logger's fatalPanic, or an error that is a failed write
// (commitWrite panics with the log writer's error). Any other panic goes on.
func (s *Store) recoverFatal(err *error) {
	r := recover()
	if r == nil {
		return
	}
	switch v := r.(type) {
	case fatalPanic:
		*err = v.err
		return
	case error:
		if isNoSpace(v) || errors.Is(v, syscall.EIO) || errors.Is(v, syscall.EROFS) {
			*err = s.fatal.fail(v)
			return
		}
	}
	panic(r)
}
