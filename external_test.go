package echostore_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestProgramOutsideTheModule builds and runs a program in a module of its
// own (testdata/external/main.go.txt, requiring this module by a replace
// directive) that appends 100 records, cycles with a window of 10 and
// merge-reads the stream: the root package is an API another Go program can
// use, through its exported names alone.
func TestProgramOutsideTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program (about half a minute)")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "external", "main.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/external\n\ngo 1.26.0\n\nrequire github.com/echostore/echostore v0.0.0\n\nreplace github.com/echostore/echostore => " + root + "\n"
	for name, b := range map[string][]byte{"main.go": src, "go.mod": []byte(mod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(runtime.GOROOT(), "bin", "go"), "run", ".", filepath.Join(dir, "data"), redisURL)
	cmd.Dir = dir
	// The module graph is this module's: go.sum (copied) pins every
	// module, and the build fetches only go.mod files the cache may lack
	// on a fresh machine (a pruned requirement's).
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "folded 90 trimmed 90 read 100" {
		t.Fatalf("the program printed %q, want %q", got, "folded 90 trimmed 90 read 100")
	}
}
