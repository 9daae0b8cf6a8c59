package server

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The corpus of TestMalformedCorpus is generated from the route table as well
// as written by hand (testdata/malformed): every route gets, by construction,
// a request with a method it does not serve (405) and, for each name in its
// path, one with an invalid name (400 invalid_name). TestCorpusCoversRoutes
// fails when an API route has no hand-written case, so that a new route
// comes with cases of its own mistakes (its query and body).

var wildcardRE = regexp.MustCompile(`\{([a-z$]+)\}`)

// badNames are names each path wildcard refuses.
var badNames = map[string][]string{
	"q":   {"a:b", "%20"},
	"s":   {"a:b", url.PathEscape("a\xffb")},
	"k":   {url.PathEscape("emq:{x}:stream:s"), url.PathEscape(strings.Repeat("k", 1<<12))},
	"vid": {"a:b", "%00"},
}

// routePath fills the wildcards of a pattern's path with names of the
// corpus's existing stream (or a key and volume that do not exist), except
// the one named bad, which is filled with badValue.
func routePath(path string, v corpusVars, bad, badValue string) string {
	return wildcardRE.ReplaceAllStringFunc(path, func(m string) string {
		w := m[1 : len(m)-1]
		if w == bad {
			return badValue
		}
		switch w {
		case "q":
			return v.q0
		case "s":
			return v.s0
		case "k":
			return "nokey"
		case "vid":
			return "archive.nope.nope"
		}
		return "" // {$}
	})
}

// generatedCases returns the corpus cases of each route of patterns.
func generatedCases(patterns []string, v corpusVars) []malformedCase {
	var out []malformedCase
	for _, p := range patterns {
		method, path, _ := strings.Cut(p, " ")
		c := malformedCase{file: "routes.go", header: http.Header{}}
		c.name = fmt.Sprintf("%s: PATCH is not a method of the route", p)
		c.method, c.path, c.status, c.code = "PATCH", routePath(path, v, "", ""), 405, CodeMethodNotAllowed
		out = append(out, c)
		for _, m := range wildcardRE.FindAllStringSubmatch(path, -1) {
			for _, bad := range badNames[m[1]] {
				c := malformedCase{file: "routes.go", header: http.Header{}}
				c.name = fmt.Sprintf("%s: invalid {%s} %q", p, m[1], bad)
				c.method, c.path, c.status, c.code = method, routePath(path, v, m[1], bad), 400, CodeInvalidName
				if method == http.MethodPost {
					c.body = []byte("{}")
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// patterns returns the patterns of the server's routes.
func (e *env) patterns() []string {
	var ps []string
	for _, rt := range e.srv.routes() {
		ps = append(ps, rt.pattern)
	}
	return ps
}

// TestCorpusCoversRoutes: every API route of the route table has at least
// one hand-written case in testdata/malformed (one the route's mux pattern
// matches), and every hand-written case reaches a route or the mux's own
// 404/405.
func TestCorpusCoversRoutes(t *testing.T) {
	e := start(t, Config{Faults: true})
	v := corpusVars{q0: "q0", s0: "s", job0: "JOB_x", k0: "k0", hash0: "h0", str0: "s0", hashs: "hs"}
	mux := http.NewServeMux()
	var api []string
	for _, p := range e.patterns() {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
		if strings.Contains(p, " /v1/") {
			api = append(api, p)
		}
	}
	hit := map[string]int{}
	for _, c := range parseCorpus(t, filepath.Join("testdata", "malformed"), v) {
		req, err := http.NewRequest(c.method, "http://x"+c.path, nil)
		if err != nil {
			continue // a path the client refuses to send is no route's
		}
		if _, p := mux.Handler(req); p != "" {
			hit[p]++
		}
	}
	noInput, err := os.ReadFile(filepath.Join("testdata", "malformed", "noinput"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(noInput), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if !slices.Contains(api, l) {
				t.Errorf("testdata/malformed/noinput: %q is no route", l)
			}
			if hit[l] > 0 {
				t.Errorf("testdata/malformed/noinput: %q has hand-written cases: take it off the list", l)
			}
			hit[l]++
		}
	}
	var missing []string
	for _, p := range api {
		if hit[p] == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d API routes have no case in testdata/malformed (write the mistakes a caller can make on each):\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
	if gen := generatedCases(e.patterns(), v); len(gen) < 2*len(api) || !slices.ContainsFunc(gen, func(c malformedCase) bool {
		return c.code == CodeInvalidName
	}) {
		t.Errorf("%d generated cases for %d routes", len(gen), len(api))
	}
}

// TestRouteTablesCover: every route of the route table (with the fault
// route) has a sample in routeSamples, which the browser boundary's tests
// send, and a scope in wantScope, which the scope matrix holds it to: a
// new route left out of either would go untested at the boundary.
func TestRouteTablesCover(t *testing.T) {
	e := start(t, Config{Faults: true})
	for _, p := range e.patterns() {
		if _, ok := routeSamples[p]; !ok {
			t.Errorf("route %s has no sample in routeSamples (boundary_test.go)", p)
		}
		if _, ok := wantScope[p]; !ok && strings.Contains(p, " /v1/") {
			t.Errorf("route %s has no scope in wantScope (scope_test.go)", p)
		}
	}
}
