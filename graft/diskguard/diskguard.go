// Package diskguard keeps a data directory from running out of space under
// a store that cannot survive it (Pebble ends the process when its
// write-ahead log or manifest meets ENOSPC; a log that fails a write must be
// reopened): writes are refused, with an error wrapping ErrFull, while the
// filesystem has less free space than a reserve, and a ballast file holds
// space back for the writes already under way when the disk fills from
// outside.
//
//	g := diskguard.New(diskguard.Options{Dir: dir, Reserve: 0, Ballast: 0})
//	if err := g.Check(); err != nil { return err } // before each write
//	…
//	g.NoSpace() // a write met ENOSPC anyway: release the ballast
//
// The guard recovers by itself: the first Check that finds the reserve free
// again (and room to recreate the ballast) lets writes through.
package diskguard

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrFull is the error of a write refused because the data directory's
// filesystem is full or below its reserve; it wraps syscall.ENOSPC.
var ErrFull = fmt.Errorf("data directory full: %w", syscall.ENOSPC)

// Defaults of Options. Each is capped at a fraction of the filesystem's size
// (Reserve at a tenth, Ballast at a twentieth), so that a small disk is not
// all reserve.
const (
	DefaultReserve = 64 << 20
	DefaultBallast = 16 << 20
)

// BallastName is the ballast file's name in the guarded directory.
const BallastName = "BALLAST"

// MinRoom is the least free space after an ENOSPC before writes are
// accepted again, whatever the reserve.
const MinRoom = 1 << 20

// ProbeInterval is how long a measurement of the free space is trusted.
// What can be written in that time must fit in the reserve.
const ProbeInterval = 10 * time.Millisecond

// Options configure a Guard.
type Options struct {
	// Dir is the guarded directory; the ballast is Dir/BallastName.
	Dir string
	// FS is the filesystem of Dir (nil: the operating system's). A
	// filesystem that cannot report its free space (vfs.NewMem) is not
	// guarded.
	FS vfs.FS
	// Reserve is the free space, in bytes, below which writes are refused.
	// 0: DefaultReserve (capped at a tenth of the filesystem); negative:
	// none.
	Reserve int64
	// Ballast is the size of the ballast file, in bytes. 0: DefaultBallast
	// (capped at a twentieth of the filesystem); negative: no ballast.
	Ballast int64
	// What names the store in messages ("graft", "accept outbox").
	What string
	// Logger receives the transitions (full, room again). nil: discard.
	Logger *slog.Logger
}

// Guard is the disk-space guard of one directory. Its methods are safe for
// concurrent use; a nil *Guard guards nothing.
type Guard struct {
	fs      vfs.FS
	dir     string
	what    string
	log     *slog.Logger
	reserve uint64
	ballast int64 // 0: none

	off     atomic.Bool   // the filesystem reports no free space: unguarded
	full    atomic.Bool   // writes are refused
	noSpace atomic.Bool   // an ENOSPC was met since the last recovery
	epoch   time.Time     // when New ran: probes are timed from it on the monotonic clock, which costs Check half of time.Now
	probed  atomic.Int64  // when the free space was last measured (nanoseconds since epoch)
	avail   atomic.Uint64 // the free space then

	mu         sync.Mutex // one probe at a time
	hasBallast bool       // mu held
}

// New returns the guard of opts.Dir and lays its ballast if there is room
// for it. It measures the filesystem once; where that is not possible it
// returns a guard that lets every write through.
func New(opts Options) *Guard {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Guard{fs: opts.FS, dir: opts.Dir, what: opts.What, log: opts.Logger, epoch: time.Now()}
	u, err := g.fs.GetDiskUsage(g.dir)
	if err != nil {
		if !errors.Is(err, vfs.ErrUnsupported) {
			g.log.Warn(g.what+": cannot measure the free space of the data directory; it is not guarded", "dir", g.dir, "err", err)
		}
		g.off.Store(true)
		return g
	}
	switch {
	case opts.Reserve == 0:
		g.reserve = min(DefaultReserve, u.TotalBytes/10)
	case opts.Reserve > 0:
		g.reserve = uint64(opts.Reserve)
	}
	switch {
	case opts.Ballast == 0:
		g.ballast = int64(min(DefaultBallast, u.TotalBytes/20))
	case opts.Ballast > 0:
		g.ballast = opts.Ballast
	}
	g.mu.Lock()
	if g.ballast > 0 {
		if fi, err := g.fs.Stat(g.ballastPath()); err == nil && fi.Size() >= g.ballast {
			g.hasBallast = true
		}
	}
	g.probeLocked(int64(time.Since(g.epoch)))
	g.mu.Unlock()
	return g
}

func (g *Guard) ballastPath() string { return g.fs.PathJoin(g.dir, BallastName) }

// Check returns nil if a write may go ahead, or an error wrapping ErrFull
// that says how much is free and what is needed. It measures the free space
// at most every ProbeInterval.
func (g *Guard) Check() error {
	if g == nil || g.off.Load() {
		return nil
	}
	if now := int64(time.Since(g.epoch)); now-g.probed.Load() >= int64(ProbeInterval) && g.mu.TryLock() {
		g.probeLocked(now)
		g.mu.Unlock()
	}
	if !g.full.Load() {
		return nil
	}
	if g.noSpace.Load() {
		return fmt.Errorf("%s: %s ran out of space (%d bytes free): writes are refused until %d bytes are free (reads go on): %w",
			g.what, g.dir, g.avail.Load(), max(g.reserve+uint64(g.ballast), MinRoom), ErrFull)
	}
	return fmt.Errorf("%s: %s has %d bytes free, below the %d bytes kept in reserve: writes are refused until space is freed (reads go on): %w",
		g.what, g.dir, g.avail.Load(), g.reserve, ErrFull)
}

// CheckFor is Check for a write of about need bytes: it also refuses, with
// an error wrapping ErrFull, a write that would take the free space below
// the reserve, and debits need from the measured free space until the next
// measurement, so that writes admitted within one ProbeInterval are counted
// together. need 0 is Check.
func (g *Guard) CheckFor(need uint64) error {
	if err := g.Check(); err != nil || need == 0 || g == nil || g.off.Load() {
		return err
	}
	for {
		avail := g.avail.Load()
		if avail < g.reserve+need {
			return fmt.Errorf("%s: %s has %d bytes free: a write of about %d bytes does not fit above the %d bytes kept in reserve: it is refused (nothing written; reads go on): %w",
				g.what, g.dir, avail, need, g.reserve, ErrFull)
		}
		if g.avail.CompareAndSwap(avail, avail-need) {
			return nil
		}
	}
}

// Avail returns the free space as last measured (less what CheckFor
// admitted since), and whether the filesystem is measured at all.
func (g *Guard) Avail() (uint64, bool) {
	if g == nil || g.off.Load() {
		return 0, false
	}
	return g.avail.Load(), true
}

// Full reports whether writes are refused now (as of the last measurement).
func (g *Guard) Full() bool { return g != nil && !g.off.Load() && g.full.Load() }

// NoSpace records that a write met ENOSPC: writes are refused from now on,
// and the ballast is released so that the writes under way can finish. It
// is cheap (one unlink), for vfs.OnDiskFull.
func (g *Guard) NoSpace() {
	if g == nil || g.off.Load() {
		return
	}
	g.noSpace.Store(true)
	if !g.full.Swap(true) {
		g.log.Error(g.what+": the data directory is full; writes are refused until space is freed (reads go on)", "dir", g.dir)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	defer func() {
		if u, err := g.fs.GetDiskUsage(g.dir); err == nil {
			g.avail.Store(u.AvailBytes)
		}
	}()
	if !g.hasBallast {
		return
	}
	if err := g.fs.Remove(g.ballastPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		g.log.Error(g.what+": cannot release the ballast file", "path", g.ballastPath(), "err", err)
		return
	}
	g.hasBallast = false
	g.log.Warn(g.what+": released the ballast file so that the writes under way can finish", "path", g.ballastPath(), "bytes", g.ballast)
}

// probeLocked measures the free space, g.mu held, and moves between full
// and not: full below the reserve, and after an ENOSPC until MinRoom is
// free and the released ballast could be laid anew; a missing ballast is laid once the reserve and
// the ballast fit.
func (g *Guard) probeLocked(now int64) {
	u, err := g.fs.GetDiskUsage(g.dir)
	g.probed.Store(now)
	if err != nil {
		g.log.Warn(g.what+": cannot measure the free space of the data directory", "dir", g.dir, "err", err)
		return
	}
	avail := u.AvailBytes
	if !g.hasBallast && g.ballast > 0 && avail >= g.reserve+uint64(g.ballast) {
		if err := g.layBallast(); err != nil {
			g.log.Warn(g.what+": cannot lay the ballast file", "path", g.ballastPath(), "err", err)
		} else {
			avail -= uint64(g.ballast)
		}
	}
	g.avail.Store(avail)
	if avail < g.reserve || (g.noSpace.Load() && (avail < MinRoom || (!g.hasBallast && g.ballast > 0))) {
		if !g.full.Swap(true) {
			g.log.Error(g.what+": the data directory is below its free-space reserve; writes are refused until space is freed (reads go on)",
				"dir", g.dir, "free", avail, "reserve", g.reserve)
		}
		return
	}
	g.noSpace.Store(false)
	if g.full.Swap(false) {
		g.log.Warn(g.what+": the data directory has room again; writes are accepted", "dir", g.dir, "free", avail)
	}
}

// layBallast writes the ballast file, g.mu held: allocated space (not a
// sparse file), so that removing it frees that much.
func (g *Guard) layBallast() error {
	path := g.ballastPath()
	f, err := g.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = allocate(f, g.ballast)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = g.fs.Remove(path)
		return err
	}
	g.hasBallast = true
	return nil
}

// allocate gives f size bytes of allocated space: fallocate where the
// file has a descriptor and the filesystem supports it, zeros otherwise.
func allocate(f vfs.File, size int64) error {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		err := fallocate(fd, size)
		if err == nil || errors.Is(err, syscall.ENOSPC) {
			return err
		}
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}
