// Package golden is the helper of the golden-file tests (golden_test.go in
// each package with a stored format; docs/FORMAT.md, "Upgrades"). A test
// binary that imports it takes the flag -update, which rewrites the files of
// the current format versions from today's encoders; files of older
// versions, and files whose bytes are not deterministic (data dirs, zstd
// frames), are written only when missing.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the current version's golden files from the encoders")

// Updating reports whether the test runs with -update.
func Updating() bool { return *update }

// Dir is where a package keeps its golden files.
const Dir = "testdata/golden"

// Path returns the path of the golden file name.
func Path(name string) string { return filepath.Join(Dir, filepath.FromSlash(name)) }

// Bytes returns the checked-in bytes of the golden file name. With current,
// enc is what today's encoder writes: -update rewrites the file with it,
// and otherwise the file must hold exactly enc (a byte change is a format
// change). Without current, the file is of an older version (or not
// deterministic): it is written from enc only if missing, and its bytes are
// returned for the test to check as it must.
func Bytes(t testing.TB, name string, current bool, enc []byte) []byte {
	t.Helper()
	path := Path(name)
	_, statErr := os.Stat(path)
	if *update && (current || os.IsNotExist(statErr)) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, enc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test -run Golden -update` to create it)", err)
	}
	if current && !bytes.Equal(file, enc) {
		t.Errorf("%s differs from the bytes the encoder writes today:\n file: %x\n  now: %x\n"+
			"a byte change is a format change: bump the version (docs/FORMAT.md, \"Upgrades\")", path, file, enc)
	}
	return file
}

// CopyDir copies the checked-in directory src (a data dir: opening a store
// writes to its directory) into a fresh temporary directory and returns it.
func CopyDir(t testing.TB, src string) string {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatalf("%v (run `go test -run Golden -update` to create it)", err)
	}
	dir := t.TempDir()
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
