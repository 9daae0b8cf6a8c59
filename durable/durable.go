// Package durable owns the few steps every part of echostore takes to make
// a file survive a crash, and the checksum table of its formats, so that
// each has one definition:
//
//   - SyncDir: fsync a directory, which makes a create, rename or remove
//     in it durable (fsync of the file alone does not, on Linux);
//   - WriteFile: write a file whole or not at all (a temporary file beside
//     it, written and fsynced, renamed over it, the directory fsynced);
//   - Castagnoli: the CRC-32C table of the accept outbox's blocks, graft's
//     records, the archive's pages and the remote's segments.
//
// No well-kept library does the directory fsync after the rename
// (github.com/google/renameio leaves it to the caller), so it is written
// here once.
package durable

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// TempSuffix ends the name of WriteFile's temporary file: path+TempSuffix
// in the same directory. A file with it found after a crash is an
// unfinished write, safe to remove.
const TempSuffix = ".tmp"

// Castagnoli is the CRC-32C (Castagnoli) table of every checksum in
// echostore's formats (docs/FORMAT.md, docs/ACCEPT.md, docs/GRAFT.md).
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SyncDir fsyncs the directory dir, making the creates, renames and
// removes in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// WriteFile writes data to path whole or not at all: to path+TempSuffix,
// fsynced, renamed over path, and path's directory fsynced. After a crash
// path holds either its old contents or data, never a part; the temporary
// file may be left behind. perm applies to a new file.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	tmp := path + TempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}
