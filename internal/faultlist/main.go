// Command faultlist runs the fault tests of the packages named on its
// command line: the test functions marked with the directive
//
//	//echostore:fault
//
// on the line directly above their func line (inside or below their doc
// comment). The mark moves with the function, so renaming a fault test
// keeps it in the suite; `make faults` runs it as
//
//	go run ./internal/faultlist -race -count=1 -timeout 15m ./graft/ ./archive/ ...
//
// Before running anything it checks the marks and fails if any is wrong:
//   - a mark not directly above a func declaration, or above a func that
//     is not a top-level TestXxx(*testing.T);
//   - a marked test that `go test -list` does not list for its package
//     (a build constraint or a bad signature hid it);
//   - a named package with no marked test;
//   - a marked test in a package of the module that is not named (it
//     would never run).
//
// With -list it prints "<package> <test>" for every marked test, sorted,
// after the checks, and runs nothing. Packages are the arguments that start
// with "./" (run it from the module's root); every other argument besides
// -list (flags and their values, e.g. -timeout 15m) is passed on to
// `go test`, which runs each package on its own with an exact -run.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// directive marks a fault test.
const directive = "//echostore:fault"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "faultlist:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var list bool
	var flags, pkgs []string
	for _, a := range args {
		switch {
		case a == "-list" || a == "--list":
			list = true
		case strings.HasPrefix(a, "./"):
			pkgs = append(pkgs, a)
		case a == "-run" || strings.HasPrefix(a, "-run="):
			return errors.New("-run is faultlist's to set")
		default: // a go test flag or a flag's value, as in -timeout 15m
			flags = append(flags, a)
		}
	}
	if len(pkgs) == 0 {
		return errors.New("usage: faultlist [-list] [go test flags] ./pkg/ ...")
	}
	marked, err := collect(".")
	if err != nil {
		return err
	}
	var problems []string
	named := map[string]bool{}
	for _, p := range pkgs {
		dir := filepath.Clean(p)
		named[dir] = true
		if len(marked[dir]) == 0 {
			problems = append(problems, fmt.Sprintf("%s: no test is marked %s", p, directive))
		}
	}
	for _, dir := range sortedKeys(marked) {
		if !named[dir] {
			problems = append(problems, fmt.Sprintf("./%s: %s marked %s but the package is not in the fault run",
				dir, strings.Join(marked[dir], ", "), directive))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	for _, p := range pkgs {
		listed, err := goTestList(p, marked[filepath.Clean(p)])
		if err != nil {
			return err
		}
		for _, name := range marked[filepath.Clean(p)] {
			if !slices.Contains(listed, name) {
				problems = append(problems, fmt.Sprintf("%s: %s is marked %s but go test -list does not list it", p, name, directive))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	if list {
		for _, p := range pkgs {
			for _, name := range marked[filepath.Clean(p)] {
				fmt.Println(p, name)
			}
		}
		return nil
	}
	var failed []string
	for _, p := range pkgs {
		cmd := exec.Command("go", append(append([]string{"test"}, flags...), "-run", runPattern(marked[filepath.Clean(p)]), p)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			failed = append(failed, p)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("fault tests failed in %s", strings.Join(failed, " "))
	}
	return nil
}

// collect returns the marked tests of every package under root, by the
// package's directory relative to root, each list sorted. A misplaced mark
// is an error.
func collect(root string) (map[string][]string, error) {
	marked := map[string][]string{}
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(src, []byte(directive)) {
			return nil
		}
		names, bad, err := marks(path, src)
		if err != nil {
			return err
		}
		problems = append(problems, bad...)
		dir := filepath.Dir(path)
		marked[dir] = append(marked[dir], names...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("collect the marked tests: %w", err)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	for dir := range marked {
		slices.Sort(marked[dir])
		if d := slices.Compact(slices.Clone(marked[dir])); len(d) != len(marked[dir]) {
			return nil, fmt.Errorf("./%s: a test is marked twice", dir)
		}
	}
	return marked, nil
}

// marks returns the tests of one file marked with the directive, and a
// description of each mark that is not directly above a test function.
func marks(path string, src []byte) (names, bad []string, err error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", path, err)
	}
	placed := map[*ast.Comment]bool{}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Doc == nil {
			continue
		}
		last := fn.Doc.List[len(fn.Doc.List)-1]
		for _, c := range fn.Doc.List {
			if strings.TrimSpace(c.Text) != directive {
				continue
			}
			placed[c] = true
			switch {
			case c != last:
				bad = append(bad, fmt.Sprintf("%s: %s must be the line directly above func %s", fset.Position(c.Pos()), directive, fn.Name.Name))
			case !isTest(fn):
				bad = append(bad, fmt.Sprintf("%s: %s marks %s, which is not a func TestXxx(*testing.T)", fset.Position(c.Pos()), directive, fn.Name.Name))
			default:
				names = append(names, fn.Name.Name)
			}
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.HasPrefix(strings.TrimSpace(c.Text), directive) && !placed[c] {
				bad = append(bad, fmt.Sprintf("%s: %s is not directly above a func declaration", fset.Position(c.Pos()), strings.TrimSpace(c.Text)))
			}
		}
	}
	return names, bad, nil
}

// testName is what go test takes for a test function's name.
var testName = regexp.MustCompile(`^Test([^a-z].*)?$`)

func isTest(fn *ast.FuncDecl) bool {
	if fn.Recv != nil || !testName.MatchString(fn.Name.Name) || fn.Type.Results != nil || fn.Type.TypeParams != nil {
		return false
	}
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) > 1 {
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

// runPattern selects exactly the named top-level tests (and their subtests).
func runPattern(names []string) string {
	quoted := make([]string, len(names))
	for k, n := range names {
		quoted[k] = regexp.QuoteMeta(n)
	}
	return "^(" + strings.Join(quoted, "|") + ")$"
}

// goTestList returns the tests `go test -list` finds among names in pkg.
func goTestList(pkg string, names []string) ([]string, error) {
	out, err := exec.Command("go", "test", "-list", runPattern(names), pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go test -list %s: %w\n%s", pkg, err, ee.Stderr)
		}
		return nil, fmt.Errorf("go test -list %s: %w", pkg, err)
	}
	var listed []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "ok ") && !strings.HasPrefix(line, "ok\t") {
			listed = append(listed, line)
		}
	}
	return listed, nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
