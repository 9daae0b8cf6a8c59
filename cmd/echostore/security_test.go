package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecurityCLINames: every command that takes a queue, stream or volume
// name refuses one that could leave the data dir or the bucket, break a
// Redis hashtag or collide with another key, with an error naming the rule;
// nothing is created outside the data dir.
func TestSecurityCLINames(t *testing.T) {
	r := startRedis(t)
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	g := []string{"--redis", r.URL, "--data", data}
	bad := []string{"../x", "../../escape", "/abs", "a\x00b", "x}", "{x", "x:archived", "é", "\u0430dmin", "a\u200bb",
		strings.Repeat("n", 129), "..", "."}
	for _, n := range bad {
		for _, args := range [][]string{
			{"stream", "append", n, "s", "k=v"},
			{"stream", "append", "q", n, "k=v"},
			{"stream", "read", n, "s", "--live-only"},
			{"stream", "read", "q", n, "--archive-only"},
			{"archive", "cycle", "q", n, "--keep", "0"},
			{"archive", "status", n, "s"},
			{"archive", "delete", "q", n, "--yes-delete-history"},
			{"volume", "info", n},
			{"volume", "push", n},
			{"volume", "pull", n},
			{"volume", "hydrate", n},
			{"volume", "reset", n, "--to-remote"},
			{"queue", "status", n},
			{"enqueue", n, "--payload", `{"a":1}`, "--mode", "async"},
		} {
			out, _, err := run(t, "", append(append([]string{}, g...), args...)...)
			if err == nil || !strings.Contains(err.Error(), "name") || out != "" {
				t.Errorf("%q: out %q, err %v; want an error about the name", args, out, err)
			}
		}
	}
	ents, err := os.ReadDir(parent)
	if err != nil || len(ents) > 1 || len(ents) == 1 && ents[0].Name() != "data" {
		t.Fatalf("the data dir's parent holds %v, %v", ents, err)
	}
}

// TestSecurityCLIRedisPasswordNotPrinted: the --redis password appears in
// no output of a command, neither its error nor its logs, when Redis
// refuses it, is unreachable, or the URL is malformed.
func TestSecurityCLIRedisPasswordNotPrinted(t *testing.T) {
	const secret = "Pa55w0rdXYZ"
	r := startRedis(t)
	data := t.TempDir()
	commitTo(t, data, "v", 1, "a")
	for _, url := range []string{
		"redis://user:" + secret + "@127.0.0.1:1/0",        // nothing listens
		"redis://user:" + secret + "@" + r.Addr + "/0",     // wrong password
		"redis://user:" + secret + "@" + r.Addr + "/0?x=1", // bad option
		"redis://:" + secret[:4] + "/" + secret[4:] + "@" + r.Addr + "/0",
	} {
		for _, args := range [][]string{
			{"volume", "push", "v"},
			{"stream", "append", "q", "s", "k=v"},
			{"queue", "status", "q"},
		} {
			out, stderr, err := run(t, "", append([]string{"--redis", url, "--data", data}, args...)...)
			text := out + stderr
			if err != nil {
				text += err.Error()
			}
			for _, frag := range []string{secret, secret[:4], secret[4:]} {
				if strings.Contains(text, frag) {
					t.Errorf("%q with --redis %s: %q of the password is printed:\n%s", args, url, frag, text)
				}
			}
		}
	}
}
