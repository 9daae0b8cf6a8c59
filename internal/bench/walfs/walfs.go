// Package walfs wraps a Pebble filesystem so that a hook runs around every
// sync of Pebble's write-ahead-log files (*.log): benchmarks time the syncs,
// tests hold one to see who waits behind it.
package walfs

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a vfs.FS whose WAL files call Hook to sync. Hook receives the real
// sync and must call it (once) for the data to be durable.
type FS struct {
	vfs.FS
	Hook func(sync func() error) error
}

// New wraps fs.
func New(fs vfs.FS, hook func(sync func() error) error) *FS {
	return &FS{FS: fs, Hook: hook}
}

func (w *FS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &file{File: f, w: w}, nil
}

// Create wraps WAL files as Pebble creates them.
func (w *FS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.Create(name, cat)
	return w.wrap(name, f, err)
}

// ReuseForWrite wraps the WAL files Pebble recycles.
func (w *FS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.ReuseForWrite(oldname, newname, cat)
	return w.wrap(newname, f, err)
}

type file struct {
	vfs.File
	w *FS
}

// SyncData runs the hook around the file's fdatasync (Pebble's syncing
// file calls SyncData for the WAL).
func (f *file) SyncData() error { return f.w.Hook(f.File.SyncData) }

// Sync runs the hook around the file's fsync.
func (f *file) Sync() error { return f.w.Hook(f.File.Sync) }
