// Package datadriven runs test scripts kept in testdata files, in the style
// of Pebble's data-driven tests (github.com/cockroachdb/datadriven, which is
// not a dependency of this module; this is the small part of it the tests
// use).
//
// A script is a sequence of directives. Each is a command line, optional
// input lines, a line "----", and the expected output, which ends at the
// first blank line (so an output holds no blank line):
//
//	# A comment, up to the end of the line; blank lines separate directives.
//	put k=1 v=a
//	----
//	ok
//
//	get k=1
//	----
//	a
//
// A command line is a command name followed by arguments, each `key=value`
// or a bare `key`. The test's function gets each directive and returns its
// output; a difference from the expected output fails the test at that
// directive's line (the script goes on, so one run shows every difference).
// With ECHOSTORE_REWRITE=1 in the environment the files are rewritten with
// the outputs the test produced instead.
package datadriven

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestData is one directive of a script.
type TestData struct {
	// Pos is the file and line of the command, "path:line".
	Pos string
	// Cmd is the command name, the first word of the command line.
	Cmd string
	// CmdArgs are the arguments after it, in order.
	CmdArgs []CmdArg
	// Input is the text between the command line and "----", lines joined
	// with "\n", without a final newline.
	Input string
	// Expected is the output the script expects, without a final newline.
	Expected string

	sepLine int // index of the "----" line
	endLine int // index of the line after the expected output
}

// CmdArg is one argument of a command line: `Key=Value`, or `Key` alone
// (Value "" and Bare true).
type CmdArg struct {
	Key   string
	Value string
	Bare  bool
}

// Has reports whether the command line has an argument key.
func (d *TestData) Has(key string) bool {
	_, ok := d.lookup(key)
	return ok
}

func (d *TestData) lookup(key string) (CmdArg, bool) {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return a, true
		}
	}
	return CmdArg{}, false
}

// String returns the value of argument key; a missing one fails the test.
func (d *TestData) String(t testing.TB, key string) string {
	t.Helper()
	a, ok := d.lookup(key)
	if !ok || a.Bare {
		t.Fatalf("%s: %s needs %s=…", d.Pos, d.Cmd, key)
	}
	return a.Value
}

// Uint returns the value of argument key as an unsigned integer (decimal,
// or 0x hexadecimal); a missing or malformed one fails the test.
func (d *TestData) Uint(t testing.TB, key string) uint64 {
	t.Helper()
	s := d.String(t, key)
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatalf("%s: %s %s=%q: %v", d.Pos, d.Cmd, key, s, err)
	}
	return n
}

// Walk calls f for every file of dir, each in a subtest named by the file's
// name (f typically makes the script's state and calls RunTest); a dir with
// no file fails the test.
func Walk(t *testing.T, dir string, f func(t *testing.T, path string)) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		n++
		path := filepath.Join(dir, e.Name())
		t.Run(e.Name(), func(t *testing.T) { f(t, path) })
	}
	if n == 0 {
		t.Fatalf("no script in %s", dir)
	}
}

// RunTest runs the script in path, calling f for each directive in order.
func RunTest(t *testing.T, path string, f func(t *testing.T, d *TestData) string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := Parse(path, string(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("%s: no directive", path)
	}
	rewrite := os.Getenv("ECHOSTORE_REWRITE") == "1"
	var out bytes.Buffer
	lines := strings.Split(string(src), "\n")
	next := 0 // first line of src not yet copied to out
	for _, d := range dirs {
		got := strings.TrimRight(f(t, d), "\n")
		if strings.Contains(got, "\n\n") {
			t.Fatalf("%s: %s output has a blank line, which a script cannot hold:\n%s", d.Pos, d.Cmd, got)
		}
		if rewrite {
			// Copy through the "----" line, then the new output.
			sep := d.sepLine
			out.WriteString(strings.Join(lines[next:sep+1], "\n") + "\n")
			if got != "" {
				out.WriteString(got + "\n")
			}
			next = d.endLine
			continue
		}
		if got != d.Expected {
			t.Errorf("%s: %s\nexpected:\n%s\ngot:\n%s", d.Pos, d.Cmd, indent(d.Expected), indent(got))
		}
	}
	if rewrite {
		out.WriteString(strings.Join(lines[next:], "\n"))
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func indent(s string) string {
	if s == "" {
		return "  (nothing)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// Parse reads the directives of a script; name is used in positions.
func Parse(name, src string) ([]*TestData, error) {
	var dirs []*TestData
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(nil, 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("datadriven: read %s: %w", name, err)
	}
	for i := 0; i < len(lines); {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			i++
			continue
		}
		d := &TestData{Pos: fmt.Sprintf("%s:%d", name, i+1)}
		fields := strings.Fields(line)
		d.Cmd = fields[0]
		for _, f := range fields[1:] {
			if k, v, ok := strings.Cut(f, "="); ok {
				d.CmdArgs = append(d.CmdArgs, CmdArg{Key: k, Value: v})
			} else {
				d.CmdArgs = append(d.CmdArgs, CmdArg{Key: f, Bare: true})
			}
		}
		i++
		var input []string
		for ; i < len(lines) && lines[i] != "----"; i++ {
			if strings.TrimSpace(lines[i]) == "" {
				return nil, fmt.Errorf("datadriven: %s: %s has no \"----\" line", d.Pos, d.Cmd)
			}
			input = append(input, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("datadriven: %s: %s has no \"----\" line", d.Pos, d.Cmd)
		}
		d.Input = strings.Join(input, "\n")
		d.sepLine = i
		i++
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		d.Expected = strings.Join(want, "\n")
		d.endLine = i
		dirs = append(dirs, d)
	}
	return dirs, nil
}
