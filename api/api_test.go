package api_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/echostore/echostore/api"
)

// TestLeaf: the contract links the standard library alone, so a program
// that speaks it links no engine, Redis client or cloud SDK.
func TestLeaf(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/echostore/echostore/api").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 1 || got[0] != "github.com/echostore/echostore/api" {
		t.Fatalf("api links %v beside the standard library", got)
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
