package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoEngine: a program that speaks to serve through the client
// links the wire contract (api), the leaf packages it names (xid, brand,
// names) and api's JSON tokenizer (jsontext), and none of the engine: no
// Pebble, no Redis client, no cloud SDK, and no part of echostore that
// runs a node.
func TestLinksNoEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/echostore/echostore/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/echostore/echostore"
	forbidden := []string{"github.com/cockroachdb", "github.com/redis/rueidis", "gocloud.dev", "aws", "google.golang.org/api"}
	// The engine: the root package (mod itself) and these below it.
	engine := []string{"/mq", "/graft", "/archive", "/accept", "/server", "/resp"}
	deps := strings.Fields(string(out))
	var bad []string
	for _, d := range deps {
		if d == mod || inEngine(d, mod, engine) || containsAny(d, forbidden) {
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("client links %d packages it must not: %v\nits packages beside the standard library:\n\t%s",
			len(bad), bad, strings.Join(deps, "\n\t"))
	}
}

// inEngine reports whether path is one of the engine's packages (mod
// followed by one of subs) or a package below one of them.
func inEngine(path, mod string, subs []string) bool {
	for _, s := range subs {
		if p := mod + s; path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
