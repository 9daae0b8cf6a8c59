package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/internal/testserver"
)

// planted is the secret the tests below put into --redis and --remote;
// it must appear in no output.
const planted = "PLANTEDx9q"

// leafArgs gives every leaf command of the tree the arguments that take it
// to its use of --redis and --remote; a command missing here fails
// TestSecretsInNoCommandOutput, so that a new command cannot escape it.
// skip says why a command is not run.
var leafArgs = map[string]struct {
	args []string
	skip string
}{
	"archive cycle":     {args: []string{"q", "s", "--keep", "5", "--trim-after", "remote"}},
	"export":            {args: []string{"q", "s", "--dir", "/nonexistent/export"}},
	"bench":             {args: []string{"all"}}, // hidden: says where the benchmarks went
	"archive delete":    {args: []string{"q", "s", "--yes-delete-history"}},
	"archive status":    {args: []string{"q", "s"}},
	"enqueue":           {args: []string{"q", "--payload", `{"a":1}`, "--mode", "sync"}},
	"id mint":           {},
	"id parse":          {args: []string{"0000000000000-0"}},
	"queue ack":         {args: []string{"q", "1-1"}},
	"queue claim":       {args: []string{"q"}},
	"queue dead":        {args: []string{"q"}},
	"queue delete-dead": {args: []string{"q", "1-1", "--yes-delete-jobs"}},
	"queue fail":        {args: []string{"q", "1-1", "--error", "boom"}},
	"queue jobs":        {args: []string{"q", "--state", "ready"}},
	"queue list":        {},
	"queue redrive":     {args: []string{"q", "--all"}},
	"queue status":      {args: []string{"q"}},
	"remote keys":       {},
	"remote reseal":     {},
	"restore":           {args: []string{"--force"}}, // into the shared data dir: it reaches the remote
	"serve":             {args: []string{"--listen", "127.0.0.1:0"}},
	"stream append":     {args: []string{"q", "s", "k=v"}},
	"stream groups":     {args: []string{"q", "s"}},
	"stream read":       {args: []string{"q", "s", "--archive-only"}},
	"stream replay":     {args: []string{"q", "s", "--into", "k"}},
	"volume checkpoint": {args: []string{"v"}},
	"volume gc":         {args: []string{"v"}},
	"volume hydrate":    {args: []string{"v"}},
	"volume info":       {args: []string{"v"}},
	"volume ls":         {},
	"volume pull":       {args: []string{"v"}},
	"volume push":       {args: []string{"v"}},
	"volume reset":      {args: []string{"v", "--to-remote"}},
}

// leaves returns the path (without "echostore ") of every runnable leaf
// command of the tree.
func leaves() []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.HasSubCommands() && c.Runnable() && c.Name() != "help" && c.Name() != "completion" {
			out = append(out, strings.TrimPrefix(c.CommandPath(), "echostore "))
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	var b bytes.Buffer
	walk(newRootCmd(&b, &b))
	return out
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// execOut runs the command line as main does and returns everything it
// printed, and its exit status.
func execOut(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := execute(ctx, args, &out, &out)
	return out.String(), code
}

// TestSecretsInNoCommandOutput: a secret planted in --redis or --remote
// (user information, a credential query parameter, an endpoint with
// credentials, URLs that do not parse), given as a flag or in
// ECHOSTORE_REDIS / ECHOSTORE_REMOTE, appears in nothing any command
// prints — its error, its logs, its output, its --help — and a bad remote
// URL exits 2.
func TestSecretsInNoCommandOutput(t *testing.T) {
	r := startRedis(t)
	data := t.TempDir()
	commitTo(t, data, "v", 1, "a")
	dead := deadAddr(t)
	goodRemote := "file://" + filepath.Join(t.TempDir(), "remote")
	remotes := []string{
		"s3://AKIA:" + planted + "@bucket?endpoint=http://" + dead + "&region=us-east-1",
		"s3://bucket?endpoint=http://" + dead + "&region=us-east-1&secret_access_key=" + planted,
		"s3://bucket?endpoint=http://ak:" + planted + "@" + dead + "&region=us-east-1",
		"s3://AKIA:" + planted + "%zz@bucket",
		"s3://AKIA:" + planted + "@[::1",
		"file:///tmp/x?token=" + planted,
		"azblob://c?sas_token=" + planted,
		"gs://b?password=" + planted,
	}
	redises := []string{
		"redis://:" + planted + "@" + dead + "/0",
		"redis://user:" + planted + "@" + r.Addr + "/0",
		"redis://:" + planted + "@[::1",
		"redis://:" + planted + "%zz@" + r.Addr + "/0",
		"redis://" + r.Addr + "/0?password=" + planted,
	}
	type combo struct{ redis, remote string }
	var combos []combo
	for _, rm := range remotes {
		combos = append(combos, combo{r.URL, rm})
	}
	for _, rd := range redises {
		combos = append(combos, combo{rd, goodRemote})
	}
	covered := map[string]bool{}
	for _, leaf := range leaves() {
		la, ok := leafArgs[leaf]
		if !ok {
			t.Errorf("command %q is not in leafArgs: add the arguments that take it to its use of --redis and --remote", leaf)
			continue
		}
		covered[leaf] = true
		if la.skip != "" {
			continue
		}
		path := strings.Fields(leaf)
		for _, c := range combos {
			args := append(append([]string{"--redis", c.redis, "--remote", c.remote, "--data", data}, path...), la.args...)
			out, code := execOut(t, args...)
			if strings.Contains(out, "PLANTED") {
				t.Errorf("%s with --redis %q --remote %q (exit %d) prints the secret:\n%s", leaf, c.redis, c.remote, code, out)
			}
		}
		// The same through the environment, and --help.
		for _, c := range combos[:2] {
			t.Setenv("ECHOSTORE_REDIS", c.redis)
			t.Setenv("ECHOSTORE_REMOTE", c.remote)
			for _, extra := range [][]string{la.args, {"--help"}} {
				out, code := execOut(t, append(append([]string{"--data", data}, path...), extra...)...)
				if strings.Contains(out, "PLANTED") {
					t.Errorf("%s %q with ECHOSTORE_REDIS %q ECHOSTORE_REMOTE %q (exit %d) prints the secret:\n%s", leaf, extra, c.redis, c.remote, code, out)
				}
			}
		}
		os.Unsetenv("ECHOSTORE_REDIS")
		os.Unsetenv("ECHOSTORE_REMOTE")
	}
	for leaf := range leafArgs {
		if !covered[leaf] {
			t.Errorf("leafArgs names %q, which is no command", leaf)
		}
	}
}

// TestBadRemoteURLExits2: serve and the commands that open the remote
// refuse a malformed remote URL with exit status 2 and the reason, and
// nothing panics.
func TestBadRemoteURLExits2(t *testing.T) {
	r := startRedis(t)
	data := t.TempDir()
	commitTo(t, data, "v", 1, "a")
	for _, u := range []string{"s3://b?endpoint=http://127.0.0.1:1&foo=bar", "gs://", "azblob://", "s3://?region=r", "s3://b?prefix=../x/", "nosuch://x"} {
		for _, args := range [][]string{
			{"serve", "--listen", "127.0.0.1:0"},
			{"volume", "push", "v"},
			{"archive", "cycle", "q", "s", "--keep", "5", "--trim-after", "remote"},
			{"enqueue", "q", "--payload", `{"a":1}`, "--mode", "sync"},
		} {
			out, code := execOut(t, append([]string{"--redis", r.URL, "--data", data, "--remote", u}, args...)...)
			if code != 2 || !strings.Contains(out, "remote") || strings.Contains(out, "panic") {
				t.Errorf("%v --remote %s: exit %d, %q; want exit 2 with the reason", args, u, code, out)
			}
		}
	}
	// mem:// is refused by serve unless --dev.
	out, code := execOut(t, "--redis", r.URL, "--data", data, "--remote", "mem://", "serve", "--listen", "127.0.0.1:0")
	if code != 2 || !strings.Contains(out, "--dev") {
		t.Errorf("serve --remote mem://: exit %d, %q; want exit 2 naming --dev", code, out)
	}
}

// TestRedisPasswordFile: --redis-password-file (or
// ECHOSTORE_REDIS_PASSWORD_FILE) adds the password to --redis, so that it
// shows in no process list; a URL that has one already is refused (exit 2).
func TestRedisPasswordFile(t *testing.T) {
	r := startRedis(t)
	const pass = "pa:ss@w/rd%" + planted
	if _, err := testserver.Do(context.Background(), r.Addr, "CONFIG", "SET", "requirepass", pass); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(file, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	// Without the password Redis refuses.
	if out, code := execOut(t, "--redis", r.URL, "--data", data, "stream", "append", "q", "s", "k=v"); code == 0 {
		t.Fatalf("no password: exit 0, %q", out)
	}
	out, code := execOut(t, "--redis", r.URL, "--redis-password-file", file, "--data", data, "stream", "append", "q", "s", "k=v")
	if code != 0 {
		t.Fatalf("--redis-password-file: exit %d, %s", code, out)
	}
	t.Setenv("ECHOSTORE_REDIS_PASSWORD_FILE", file)
	if out, code := execOut(t, "--redis", r.URL, "--data", data, "stream", "append", "q", "s", "k=v"); code != 0 {
		t.Fatalf("ECHOSTORE_REDIS_PASSWORD_FILE: exit %d, %s", code, out)
	}
	out, code = execOut(t, "--redis", "redis://:other@"+r.Addr+"/0", "--data", data, "stream", "append", "q", "s", "k=v")
	if code != 2 || !strings.Contains(out, "one place") || strings.Contains(out, "PLANTED") {
		t.Errorf("password in both: exit %d, %q", code, out)
	}
	os.Unsetenv("ECHOSTORE_REDIS_PASSWORD_FILE")
	out, code = execOut(t, "--redis", r.URL, "--redis-password-file", filepath.Join(data, "missing"), "--data", data, "queue", "status", "q")
	if code != 2 || !strings.Contains(out, "--redis-password-file") {
		t.Errorf("missing file: exit %d, %q", code, out)
	}
}
