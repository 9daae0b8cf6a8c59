package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server"
)

// childEnv names what the test binary does when run as a child process:
// "echostore" runs the command line (main), "peer" runs peerMain. The
// tests of this file run echostore as a child process this way: the
// command as built, with its own pid and uid.
const childEnv = "ECHOSTORE_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "echostore":
		main()
	case "peer":
		os.Exit(peerMain())
	}
	os.Exit(m.Run())
}

// peerMain is a client of serve's unix socket ($ECHOSTORE_TEST_SOCK), with
// the bearer token $ECHOSTORE_TEST_BEARER if set: for each of a few
// requests (a reset too with $ECHOSTORE_TEST_RESET=1) it prints "METHOD PATH STATUS CODE" (CODE is the JSON error's,
// or "-"). A socket it cannot reach exits 1 with the reason.
func peerMain() int {
	sock, bearer := os.Getenv("ECHOSTORE_TEST_SOCK"), os.Getenv("ECHOSTORE_TEST_BEARER")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	reqs := [][3]string{
		{"GET", "/healthz", ""},
		{"GET", "/v1/volumes", ""},
		{"POST", "/v1/streams/q/s", `{"fields":{"k":"v"}}`},
	}
	if os.Getenv("ECHOSTORE_TEST_RESET") == "1" {
		reqs = append(reqs, [3]string{"POST", "/v1/volumes/archive.q.s/reset?to_remote=true", ""})
	}
	for _, rq := range reqs {
		req, err := http.NewRequest(rq[0], "http://serve"+rq[1], strings.NewReader(rq[2]))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code := "-"
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			code = e.Error.Code
		}
		fmt.Printf("%s %s %d %s\n", rq[0], strings.SplitN(rq[1], "?", 2)[0], resp.StatusCode, code)
	}
	return 0
}

// childBinary returns the test binary, to run as echostore or as a peer;
// shared, it is copied into a folder every user may read and run (for a
// child of another uid).
func childBinary(t *testing.T, shared bool) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !shared {
		return exe
	}
	dir := openDir(t)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "echostore.test")
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// openDir returns a new temporary folder that every user may enter and
// read (its parents too), for children of another uid.
func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if !strings.HasPrefix(d, os.TempDir()) {
			break
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// childEnviron is the test's environment without echostore's variables
// (no token, no data dir from outside), with childEnv set to what.
func childEnviron(what string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ECHOSTORE_") {
			env = append(env, kv)
		}
	}
	return append(append(env, childEnv+"="+what), extra...)
}

// serveProc is `echostore serve` running as a child process.
type serveProc struct {
	cmd  *exec.Cmd
	addr string // its TCP address
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{} // closed when its log ends
}

var listenAddrRe = regexp.MustCompile(` addr=(\S+)`)

// startServeProc runs exe serve on data with Redis at redisURL, as cred's
// user if cred is not nil, and returns once it listens; err is its exit
// error if it ended at start, with its log in the serveProc. The test's end
// stops it.
func startServeProc(t *testing.T, exe, redisURL, data string, cred *syscall.Credential) (*serveProc, error) {
	t.Helper()
	p := &serveProc{done: make(chan struct{})}
	p.cmd = exec.Command(exe, "--redis", redisURL, "--data", data, "serve", "--listen", "127.0.0.1:0", "--beat", "1h")
	p.cmd.Env = childEnviron("echostore")
	if cred != nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for p.addr == "" && sc.Scan() {
		p.write(sc.Text())
		if strings.Contains(sc.Text(), "serve: listening") {
			if m := listenAddrRe.FindStringSubmatch(sc.Text()); m != nil {
				p.addr = m[1]
			}
		}
	}
	if p.addr == "" { // its log ended: it exited
		close(p.done)
		return p, p.cmd.Wait()
	}
	go func() {
		defer close(p.done)
		for sc.Scan() {
			p.write(sc.Text())
		}
	}()
	t.Cleanup(func() { p.stop(t) })
	return p, nil
}

func (p *serveProc) write(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log.WriteString(line + "\n")
}

// logText is what serve logged so far.
func (p *serveProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// stop ends serve as SIGTERM does and checks that it exited 0.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM to serve: %v", err)
	}
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v; its log:\n%s", err, p.logText())
	}
}

// get sends GET path to serve's TCP address with token (if not "") and
// returns the status.
func (p *serveProc) get(t *testing.T, path, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+p.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeDataDirToken: serve started with no token gives its TCP
// address one all the same: a request without it is 401 (any other user of
// the machine can reach 127.0.0.1), a request with the admin token of
// <data>/serve.token 200. The file is made on first start with mode 0600,
// is reused by the next start, and is refused at start once it has group
// or other permissions; the log names the file, never the token.
func TestServeDataDirToken(t *testing.T) {
	r := startRedis(t)
	exe := childBinary(t, false)
	data := filepath.Join(t.TempDir(), "data")
	p, err := startServeProc(t, exe, r.URL, data, nil)
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, p.logText())
	}
	if code := p.get(t, "/v1/volumes", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/volumes without a token on a serve started without one: %d, want 401", code)
	}
	path := filepath.Join(data, serveTokenName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no token file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) != 2*serveTokenBytes {
		t.Fatalf("the token is %d characters, want %d (hex of %d random bytes)", len(token), 2*serveTokenBytes, serveTokenBytes)
	}
	if code := p.get(t, "/v1/volumes", token); code != http.StatusOK {
		t.Fatalf("GET /v1/volumes with the token of serve.token: %d, want 200", code)
	}
	if code := p.get(t, "/v1/volumes", token[:len(token)-1]+"x"); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/volumes with a wrong token: %d, want 401", code)
	}
	if log := p.logText(); strings.Contains(log, token) || !strings.Contains(log, path) {
		t.Fatalf("serve's log must name %s and never hold the token:\n%s", path, log)
	}
	p.stop(t)
	ents, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+serveTokenName) {
			t.Errorf("a temporary token file is left: %s", e.Name())
		}
	}

	// The next start uses the same token.
	p, err = startServeProc(t, exe, r.URL, data, nil)
	if err != nil {
		t.Fatalf("serve again: %v\n%s", err, p.logText())
	}
	if again, _ := os.ReadFile(path); string(again) != string(b) {
		t.Fatal("the second start replaced serve.token")
	}
	if code := p.get(t, "/v1/volumes", token); code != http.StatusOK {
		t.Fatalf("GET /v1/volumes with the first start's token after a restart: %d, want 200", code)
	}
	p.stop(t)

	// A token file other users may reach is refused, naming the fix.
	for _, mode := range []os.FileMode{0o644, 0o640, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		p, err = startServeProc(t, exe, r.URL, data, nil)
		log := p.logText()
		if err == nil {
			t.Fatalf("serve started with serve.token of mode %v", mode)
		}
		if !strings.Contains(log, path) || !strings.Contains(log, "chmod 600") || strings.Contains(log, token) {
			t.Fatalf("serve with serve.token of mode %v: its error must name the file and chmod 600, never the token:\n%s", mode, log)
		}
	}
}

// TestCLIThroughSocketNoToken: the CLI run by serve's own user reaches
// the serve that holds the data dir through its socket without any token,
// with the admin scope (a push); a wrong token given is judged as a token,
// and refused with advice.
func TestCLIThroughSocketNoToken(t *testing.T) {
	r := startRedis(t)
	data := filepath.Join(t.TempDir(), "data")
	if p, err := startServeProc(t, childBinary(t, false), r.URL, data, nil); err != nil {
		t.Fatalf("serve: %v\n%s", err, p.logText())
	}
	t.Setenv("ECHOSTORE_TOKEN", "")
	t.Setenv("ECHOSTORE_TOKEN_FILE", "")
	cli := mustRun(t, []string{"--redis", r.URL, "--data", data})
	for i := range 3 {
		cli("stream", "append", "q", "s", fmt.Sprintf("n=%d", i))
	}
	if out := cli("archive", "cycle", "q", "s", "--keep", "1"); !strings.HasPrefix(out, `{"folded":2,"trimmed":2,`) {
		t.Fatalf("cycle through the socket: %s", out)
	}
	if out := cli("volume", "push", "archive.q.s"); !strings.Contains(out, `"remote_lsn":`) {
		t.Fatalf("push (admin) through the socket: %s", out)
	}
	if out := cli("stream", "read", "q", "s"); strings.Count(out, "\n") != 3 {
		t.Fatalf("read through the socket: %q", out)
	}
	t.Setenv("ECHOSTORE_TOKEN", "wrong-token-0123456789abcdef")
	_, _, err := run(t, "", "--redis", r.URL, "--data", data, "volume", "ls")
	if err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Fatalf("a wrong token through the socket: %v, want a 401 with advice naming --token-file", err)
	}
}

// TestSocketRefusesOtherUser: the unix socket authenticates its peer by
// uid (SO_PEERCRED). serve runs as uid 65534; root and 65534 itself (the
// CLI too) are answered without a token, and uid 65533 is refused (403
// peer_refused) on every route, even with serve's admin token, once the
// test has opened the socket and the data dir to every user: the uid check
// itself refuses it, not only the file's mode (which refuses it first).
func TestSocketRefusesOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: running clients as other users needs root; the socket's uid check is not tested")
	}
	const owner, other = 65534, 65533
	r := startRedis(t)
	exe := childBinary(t, true)
	data := filepath.Join(openDir(t), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, owner, owner); err != nil {
		t.Fatal(err)
	}
	p, err := startServeProc(t, exe, r.URL, data, &syscall.Credential{Uid: owner, Gid: owner})
	if err != nil {
		t.Fatalf("serve as uid %d: %v\n%s", owner, err, p.logText())
	}
	sock := filepath.Join(data, server.SocketName)
	peer := func(uid uint32, bearer string) (string, error) {
		t.Helper()
		c := exec.Command(exe)
		reset := "0"
		if uid == other {
			reset = "1"
		}
		c.Env = childEnviron("peer", "ECHOSTORE_TEST_SOCK="+sock, "ECHOSTORE_TEST_BEARER="+bearer, "ECHOSTORE_TEST_RESET="+reset)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		var stderr strings.Builder
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			return string(out), fmt.Errorf("%w: %s", err, stderr.String())
		}
		return string(out), nil
	}
	answered := "GET /healthz 200 -\nGET /v1/volumes 200 -\nPOST /v1/streams/q/s 200 -\n"
	for _, uid := range []uint32{0, owner} {
		out, err := peer(uid, "")
		if err != nil || out != answered {
			t.Fatalf("uid %d over the socket without a token:\n%s%v\nwant it answered:\n%s", uid, out, err, answered)
		}
	}
	// The CLI of serve's user goes through the socket without a token.
	cli := exec.Command(exe, "--redis", r.URL, "--data", data, "stream", "read", "q", "s")
	cli.Env = childEnviron("echostore")
	cli.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: owner, Gid: owner}}
	if out, err := cli.CombinedOutput(); err != nil || strings.Count(string(out), `"fields":{"k":"v"}`) != 2 {
		t.Fatalf("the CLI as uid %d through the socket: %v\n%s", owner, err, out)
	}

	// Another user meets the file's mode first.
	if out, err := peer(other, ""); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("uid %d before the chmod: %q %v, want permission denied", other, out, err)
	}
	// With the socket opened to every user, the uid check refuses it,
	// with or without the admin token.
	if err := os.Chmod(data, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(data, serveTokenName))
	if err != nil {
		t.Fatal(err)
	}
	refused := "GET /healthz 403 peer_refused\nGET /v1/volumes 403 peer_refused\nPOST /v1/streams/q/s 403 peer_refused\nPOST /v1/volumes/archive.q.s/reset 403 peer_refused\n"
	for _, bearer := range []string{"", strings.TrimSpace(string(b))} {
		out, err := peer(other, bearer)
		if err != nil || out != refused {
			t.Fatalf("uid %d over the opened socket (token given: %t):\n%s%v\nwant:\n%s", other, bearer != "", out, err, refused)
		}
	}
	if !strings.Contains(p.logText(), fmt.Sprintf("not uid %d", other)) {
		t.Errorf("serve's log does not say it refused uid %d:\n%s", other, p.logText())
	}
}

// volName returns volume name s checked; it panics if s is not a valid
// volume name (test names are made valid).
func volName(s string) names.Volume {
	v, err := names.ParseVolume(s)
	if err != nil {
		panic(err)
	}
	return v
}
