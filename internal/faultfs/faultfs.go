// Package faultfs wraps a Pebble filesystem so that a test can fill the disk:
// once armed with a byte budget, writes succeed until the budget is spent and
// then fail with ENOSPC (a write that crosses the limit writes what fits and
// fails), as do file creations and preallocations. While armed it reports
// what is left of the budget as the disk's free space (GetDiskUsage), and a
// removed file gives its size back to the budget, as on a real disk.
//
//	fs := faultfs.New(vfs.Default)
//	st, _ := graft.Open(ctx, dir, graft.Options{FS: fs})
//	fs.Arm(64 << 10) // 64 KiB more, then the disk is full
package faultfs

import (
	"fmt"
	"math"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNoSpace is the error of a write to the full disk; it wraps ENOSPC.
var ErrNoSpace = fmt.Errorf("faultfs: no space left on device: %w", syscall.ENOSPC)

// FS is a vfs.FS with a write budget.
type FS struct {
	vfs.FS
	left   atomic.Int64 // bytes that may still be written; MaxInt64 when disarmed
	failed atomic.Int64
}

// New wraps fs, disarmed: every write goes through.
func New(fs vfs.FS) *FS {
	f := &FS{FS: fs}
	f.left.Store(math.MaxInt64)
	return f
}

// Arm lets n more bytes be written, then fails writes with ErrNoSpace.
func (f *FS) Arm(n int64) { f.left.Store(max(n, 0)) }

// Disarm frees the disk again.
func (f *FS) Disarm() { f.left.Store(math.MaxInt64) }

// Free returns what is left of the budget (math.MaxInt64 when disarmed).
func (f *FS) Free() int64 { return f.left.Load() }

// Failed returns how many operations failed for want of space.
func (f *FS) Failed() int64 { return f.failed.Load() }

// take reserves up to n bytes and returns how many were granted.
func (f *FS) take(n int) int {
	for {
		left := f.left.Load()
		if left == math.MaxInt64 {
			return n
		}
		got := int64(n)
		if got > left {
			got = left
		}
		if f.left.CompareAndSwap(left, left-got) {
			return int(got)
		}
	}
}

func (f *FS) full() bool { return f.left.Load() == 0 }

func (f *FS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// Create implements vfs.FS; it fails once the disk is full.
func (f *FS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if f.full() {
		f.failed.Add(1)
		return nil, &pathError{"create", name}
	}
	return f.wrap(f.FS.Create(name, cat))
}

// ReuseForWrite implements vfs.FS.
func (f *FS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.ReuseForWrite(oldname, newname, cat))
}

// OpenReadWrite implements vfs.FS.
func (f *FS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name, cat, opts...))
}

// Remove implements vfs.FS; while armed, the file's size goes back to the
// budget.
func (f *FS) Remove(name string) error {
	var size int64
	if fi, err := f.FS.Stat(name); err == nil {
		size = fi.Size()
	}
	if err := f.FS.Remove(name); err != nil {
		return err
	}
	f.refund(size)
	return nil
}

// refund gives n bytes back to an armed budget.
func (f *FS) refund(n int64) {
	for n > 0 {
		left := f.left.Load()
		if left == math.MaxInt64 || f.left.CompareAndSwap(left, min(left+n, math.MaxInt64-1)) {
			return
		}
	}
}

// GetDiskUsage implements vfs.FS: while armed, the budget left is the free
// space.
func (f *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := f.FS.GetDiskUsage(path)
	if err != nil {
		return u, err
	}
	if left := f.left.Load(); left != math.MaxInt64 {
		u.AvailBytes = min(u.AvailBytes, uint64(left))
	}
	return u, nil
}

type pathError struct{ op, path string }

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + ErrNoSpace.Error() }
func (e *pathError) Unwrap() error { return ErrNoSpace }

type faultFile struct {
	vfs.File
	fs *FS
}

func (w *faultFile) Write(p []byte) (int, error) {
	n := w.fs.take(len(p))
	if n < len(p) {
		w.fs.failed.Add(1)
		m, err := w.File.Write(p[:n])
		if err != nil {
			return m, err
		}
		return m, ErrNoSpace
	}
	return w.File.Write(p)
}

func (w *faultFile) WriteAt(p []byte, off int64) (int, error) {
	n := w.fs.take(len(p))
	if n < len(p) {
		w.fs.failed.Add(1)
		m, err := w.File.WriteAt(p[:n], off)
		if err != nil {
			return m, err
		}
		return m, ErrNoSpace
	}
	return w.File.WriteAt(p, off)
}

func (w *faultFile) Preallocate(off, n int64) error {
	if w.fs.full() {
		w.fs.failed.Add(1)
		return ErrNoSpace
	}
	return w.File.Preallocate(off, n)
}
