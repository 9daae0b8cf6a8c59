package api_test

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/echostore/echostore/api"
)

// TestLeaf: the contract links the standard library and the leaf packages
// its values are made of, xid (record ids), brand (branded ids: EVT_…,
// JOB_…) and names (queues, streams, volumes), and the JSON tokenizer its
// record codec reads with, jsontext with the internal packages of its module
// that it links (not that module's reflection-based json package), each of
// which links the standard library alone; so a program that speaks it
// (package client) links no engine, Redis client or cloud SDK.
func TestLeaf(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	const mod = "github.com/echostore/echostore/"
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", mod+"api").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	admitted := map[string]bool{mod + "api": true, mod + "xid": true, mod + "brand": true, mod + "names": true}
	const jsonMod = "github.com/go-json-experiment/json/"
	for _, p := range []string{"jsontext", "internal", "internal/jsonflags", "internal/jsonopts", "internal/jsonwire"} {
		admitted[jsonMod+p] = true
	}
	got := strings.Fields(string(out))
	for _, p := range got {
		if !admitted[p] {
			t.Fatalf("api links %v beside the standard library; it may link only %v", got, slices.Sorted(maps.Keys(admitted)))
		}
	}
}

func TestScopes(t *testing.T) {
	for _, s := range []api.Scope{api.ScopeRead, api.ScopeWrite, api.ScopeAdmin} {
		got, err := api.ParseScope(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScope(%q) = %v, %v", s.String(), got, err)
		}
	}
	for _, bad := range []string{"", "none", "Admin", "root"} {
		if s, err := api.ParseScope(bad); err == nil {
			t.Errorf("ParseScope(%q) = %v, want an error", bad, s)
		}
	}
	if !(api.ScopeNone < api.ScopeRead && api.ScopeRead < api.ScopeWrite && api.ScopeWrite < api.ScopeAdmin) {
		t.Fatal("the scopes are not ordered lowest first")
	}
}
