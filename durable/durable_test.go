package durable_test

import (
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/echostore/echostore/durable"
)

func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range [][]byte{[]byte("first"), []byte("second, longer"), {}} {
		if err := durable.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(data) {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
		if _, err := os.Stat(path + durable.TempSuffix); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the temporary file is left: %v", err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "f")
	err := durable.WriteFile(path, []byte("x"), 0o600)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err %v; want fs.ErrNotExist", err)
	}
}

func TestSyncDirMissing(t *testing.T) {
	if err := durable.SyncDir(filepath.Join(t.TempDir(), "no")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err %v; want fs.ErrNotExist", err)
	}
}

// The table is CRC-32C: the check value of "123456789" is 0xE3069283.
func TestCastagnoli(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), durable.Castagnoli); got != 0xE3069283 {
		t.Fatalf("check value %#x; want 0xe3069283", got)
	}
}
