package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveCmd runs `echostore serve` (the cobra command) with args after the
// globals g until the test ends, and returns once it listens, or the error
// it ended with at start and its log.
func serveCmd(t *testing.T, g []string, args ...string) (error, string) {
	t.Helper()
	logs, logw := io.Pipe()
	root := newRootCmd(io.Discard, logw)
	root.SetArgs(append(append(append([]string{}, g...), "serve", "--listen", "127.0.0.1:0", "--beat", "1h"), args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		logw.Close()
		done <- err
	}()
	var log strings.Builder
	sc := bufio.NewScanner(logs)
	for !strings.Contains(sc.Text(), "serve: listening") {
		if !sc.Scan() {
			cancel()
			return <-done, log.String()
		}
		log.WriteString(sc.Text() + "\n")
	}
	go io.Copy(io.Discard, logs)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return nil, log.String()
}

// TestServeTokenFile: serve takes its admin token from --token-file, and
// the CLI beside it sends the token of --token-file (or
// ECHOSTORE_TOKEN_FILE, or ECHOSTORE_TOKEN) with Content-Type set, so its
// cycle through the socket passes the browser boundary; with a wrong token
// it is told how to give the right one. A short token, a missing or world-readable
// file are refused at start, naming the fix, without showing the token.
func TestServeTokenFile(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	const token = "file-token-0123456789abcdef"
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ECHOSTORE_TOKEN", "")
	t.Setenv("ECHOSTORE_TOKEN_FILE", "")

	for _, c := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"short", "short\n", 0o600, "at least 16"},
		{"open", token, 0o644, "chmod o-r"},
		{"missing", "", 0, "no such file"},
	} {
		p := filepath.Join(dir, c.name)
		if c.mode != 0 {
			if err := os.WriteFile(p, []byte(c.content), c.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, c.mode)
		}
		err, _ := serveCmd(t, []string{"--redis", r.URL, "--data", filepath.Join(dir, "d-"+c.name), "--token-file", p})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), token) {
			t.Errorf("--token-file %s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	t.Setenv("ECHOSTORE_TOKEN", "0123456789")
	if err, _ := serveCmd(t, []string{"--redis", r.URL, "--data", filepath.Join(dir, "d-env")}); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short ECHOSTORE_TOKEN: %v", err)
	}
	t.Setenv("ECHOSTORE_TOKEN", "")

	data := filepath.Join(dir, "data")
	g := []string{"--redis", r.URL, "--data", data}
	if err, log := serveCmd(t, append(append([]string{}, g...), "--token-file", file)); err != nil {
		t.Fatalf("serve --token-file: %v\n%s", err, log)
	}
	cli := mustRun(t, append(append([]string{}, g...), "--token-file", file))
	for i := range 3 {
		cli("stream", "append", "q", "s", "n="+string(rune('0'+i)))
	}
	if out := cli("archive", "cycle", "q", "s", "--keep", "1"); !strings.HasPrefix(out, `{"folded":2,"trimmed":2,`) {
		t.Fatalf("cycle through serve with --token-file: %s", out)
	}
	t.Setenv("ECHOSTORE_TOKEN_FILE", file)
	if out, stderr, err := run(t, "", append(append([]string{}, g...), "archive", "status", "q", "s")...); err != nil || !strings.Contains(out, `"live":1`) {
		t.Fatalf("status with ECHOSTORE_TOKEN_FILE: %q %v %s", out, err, stderr)
	}
	t.Setenv("ECHOSTORE_TOKEN_FILE", "")
	t.Setenv("ECHOSTORE_TOKEN", token)
	if out, stderr, err := run(t, "", append(append([]string{}, g...), "archive", "status", "q", "s")...); err != nil || !strings.Contains(out, `"live":1`) {
		t.Fatalf("status with ECHOSTORE_TOKEN: %q %v %s", out, err, stderr)
	}
	// A wrong token is judged as a token, on the socket too (serve's own
	// user needs none: TestCLIThroughSocketNoToken).
	t.Setenv("ECHOSTORE_TOKEN", "not-the-token-0123456789abcdef")
	_, _, err := run(t, "", append(append([]string{}, g...), "archive", "status", "q", "s")...)
	if err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Fatalf("with a wrong token: %v, want advice naming --token-file", err)
	}
}

// TestServeTokenFlagDeprecated: --token still works, with a warning that
// its value shows in ps.
func TestServeTokenFlagDeprecated(t *testing.T) {
	r := startRedis(t)
	t.Setenv("ECHOSTORE_TOKEN", "")
	t.Setenv("ECHOSTORE_TOKEN_FILE", "")
	err, log := serveCmd(t, []string{"--redis", r.URL, "--data", filepath.Join(t.TempDir(), "data")}, "--token", "flag-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "--token is deprecated") || !strings.Contains(log, "ps") {
		t.Fatalf("no deprecation warning in the log:\n%s", log)
	}
}
