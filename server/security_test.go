package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/xid"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged is start with the server's logs (debug level) kept in a
// buffer.
func startLogged(t *testing.T, cfg Config) (*env, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg.Listen, cfg.Beat, cfg.AllowEviction = "127.0.0.1:0", time.Hour, true
	if cfg.Data == "" {
		cfg.Data = t.TempDir()
	}
	off := false
	cfg.Discover = &off
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(t.Context())
	srv, err := Open(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { stop() })
	return &env{t: t, srv: srv, base: "http://" + srv.Addr().String(), cfg: cfg, stop: stop}, logs
}

// TestSecurityHTTPNames: names that could leave the data dir, break a Redis
// hashtag or collide with another key are refused on every route that takes
// one (400 invalid_name, or a 4xx from the router for a path that cleans to
// another route), and leave no file outside the data dir and no key.
func TestSecurityHTTPNames(t *testing.T) {
	parent := t.TempDir()
	data := filepath.Join(parent, "data")
	e := start(t, Config{Data: data, Faults: true})
	good := queueName(t)
	bad := []string{"..%2F..%2Fescape", "%2Fabs", "a%00b", "x%7D", "%7Bx", "x:archived", "%C3%A9", "%D0%B0dmin",
		"a%E2%80%8Bb", "a%20b", "a%0Ab", "a%5Cb", strings.Repeat("n", 129), "..", "."}
	for _, n := range bad {
		routes := []struct{ method, path, body string }{
			{"POST", "/v1/streams/" + n + "/s", `{"fields":{"a":"b"}}`},
			{"POST", "/v1/streams/" + good + "/" + n, `{"fields":{"a":"b"}}`},
			{"GET", "/v1/streams/" + good + "/" + n, ""},
			{"POST", "/v1/streams/" + good + "/" + n + "/cycle?keep=0", ""},
			{"GET", "/v1/streams/" + n + "/s/archive", ""},
			{"POST", "/v1/streams/" + good + "/" + n + "/fault", ""},
			{"GET", "/v1/queues/" + n, ""},
			{"POST", "/v1/queues/" + n + "/jobs", `{"payload":{"a":1}}`},
			{"POST", "/v1/queues/" + n + "/claim", `{}`},
			{"GET", "/v1/queues/" + n + "/dead", ""},
			{"GET", "/v1/volumes/" + n, ""},
			{"POST", "/v1/volumes/" + n + "/push", ""},
			{"POST", "/v1/volumes/" + n + "/pull", ""},
			{"POST", "/v1/volumes/" + n + "/hydrate", ""},
			{"POST", "/v1/volumes/" + n + "/reset?to_remote=true", ""},
		}
		for _, r := range routes {
			code, b := e.do(r.method, r.path, "", strings.NewReader(r.body))
			if n == "." || n == ".." {
				// The router cleans the path first: the request is
				// redirected to, or served as, another route; a name "."
				// or ".." never reaches a handler.
				if code >= 500 {
					t.Errorf("%s %s: %d %s", r.method, r.path, code, b)
				}
				continue
			}
			if code < 400 || code >= 500 {
				t.Errorf("%s %s: %d %s, want a 4xx", r.method, r.path, code, b)
			}
			if !bytes.Contains(b, []byte(CodeInvalidName)) {
				t.Errorf("%s %s: %d %s, want %s", r.method, r.path, code, b, CodeInvalidName)
			}
		}
	}
	ents, err := os.ReadDir(parent)
	if err != nil || len(ents) != 1 || ents[0].Name() != "data" {
		t.Fatalf("the data dir's parent holds %v, %v", ents, err)
	}
	out, err := testserver.Do(t.Context(), strings.TrimSuffix(strings.TrimPrefix(e.cfg.Redis, "redis://"), "/0"), "KEYS", "emq:{"+good+"}*")
	if err != nil || strings.Contains(out, "emq:") {
		t.Fatalf("keys of %s after refused names: %v, %v", good, out, err)
	}
}

// TestSecurityMetricsLabelsBounded: a client, without a token, sending
// requests with made-up methods must not grow /metrics by one series each
// (an unbounded label is a memory leak anyone can drive).
func TestSecurityMetricsLabelsBounded(t *testing.T) {
	e := start(t, Config{Token: "t0ken-for-metrics"})
	for i := range 50 {
		e.do(fmt.Sprintf("M%03d", i), "/v1/nothing", "", nil)
		e.do(fmt.Sprintf("X%03d", i), "/healthz", "", nil)
	}
	code, b := e.do("GET", "/metrics", e.cfg.Token, nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	if bytes.Contains(b, []byte(`"M007"`)) || bytes.Contains(b, []byte(`"X007"`)) {
		t.Fatalf("/metrics has a series per made-up method:\n%s", grepLines(b, "M007", "X007"))
	}
}

func grepLines(b []byte, subs ...string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestSecurityNoSecretsInLogsOrMetrics: a server with a bearer token and a
// Redis password, driven through successes and failures (wrong token, bad
// input, a refused cycle, a lost Redis connection at shutdown), never writes
// either secret to its logs, its error bodies or /metrics.
func TestSecurityNoSecretsInLogsOrMetrics(t *testing.T) {
	const token, password = "tok-9f8e7d6c5b4a", "pw-1a2b3c4d5e6f"
	r := servers.Redis(t)
	if _, err := testserver.Do(t.Context(), r.Addr, "ACL", "SETUSER", "echosec", "on", ">"+password, "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	q := queueName(t)
	no := false
	e, logs := startLogged(t, Config{Token: token, Redis: "redis://echosec:" + password + "@" + r.Addr + "/0",
		Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "live", Archived: &no}}}}})
	var bodies []string
	keep := func(code int, b []byte) { bodies = append(bodies, string(b)) }
	keep(e.do("GET", "/v1/volumes", "wrong-"+token[4:], nil))
	keep(e.do("POST", "/v1/streams/"+q+"/s", token, strings.NewReader(`{"fields":{"a":"b"}}`)))
	keep(e.do("POST", "/v1/streams/"+q+"/s", token, strings.NewReader(`not json`)))
	keep(e.do("POST", "/v1/streams/"+q+"/live/cycle?keep=0", token, nil))
	keep(e.do("POST", "/v1/session", token, nil))
	keep(e.do("GET", "/metrics", token, nil))
	keep(e.do("GET", "/healthz", "", nil))
	if err := e.stop(); err != nil {
		t.Logf("Run: %v", err)
	}
	all := logs.String() + strings.Join(bodies, "\n")
	for _, secret := range []string{token, token[4:], password} {
		if strings.Contains(all, secret) {
			t.Errorf("%q appears in logs, bodies or metrics:\n%s", secret, grepLines([]byte(all), secret))
		}
	}
	if !strings.Contains(logs.String(), "serve: listening") {
		t.Fatalf("no logs were captured:\n%s", logs.String())
	}
}

// TestSecurityTrickledBodyCutOff: a client that sends a request's headers
// and then trickles (here: withholds) its body does not hold the handler: the
// request ends once Config.BodyTimeout has passed, with an error and nothing
// appended. The event stream, which reads no body, is not cut (the deadline
// is per request with a body, not the server's ReadTimeout).
func TestSecurityTrickledBodyCutOff(t *testing.T) {
	q := queueName(t)
	e := start(t, Config{BodyTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Guard only: the test fails, rather than hangs, if the server never
	// ends the request.
	conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "POST /v1/streams/%s/s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"fields\":",
		q, strings.TrimPrefix(e.base, "http://"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server still waits for the withheld body")
		}
		// The server closed the connection: cut off, as wanted.
	} else {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("a withheld body got %s", resp.Status)
		}
	}
	n := 0
	for _, err := range e.srv.live(t).Read(t.Context(), mustRef(t, q, "s"), xid.Min, xid.Max, 0, false) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 0 {
		t.Fatalf("%d records appended from a withheld body", n)
	}
}

// TestSecurityDataDirPrivate: a data dir serve creates, and what graft and
// the accept outbox create in it, are its owner's only (0700 directories,
// 0600 outbox files): records and job payloads are not for other users.
func TestSecurityDataDirPrivate(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	e := start(t, Config{Data: data})
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{data, filepath.Join(data, "graft"), filepath.Join(data, "accept"), filepath.Join(data, "accept", "outbox")} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("%s has mode %v: readable by others", dir, m)
		}
	}
	ents, err := os.ReadDir(filepath.Join(data, "accept", "outbox"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) == 0 {
		t.Fatal("the outbox dir is empty")
	}
	for _, de := range ents {
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("outbox file %s has mode %v: readable by others", de.Name(), m)
		}
	}
}

// TestSecurityUncleanPathNotRedirected: a path the router would clean
// ("//host/…", "/./", "/../") answers 404 not_found, never a redirect: the
// mux's 301/307 reached the client as a JSON error with a redirect status
// and no Location, and a 307 keeps the method for whoever follows it.
func TestSecurityUncleanPathNotRedirected(t *testing.T) {
	e := start(t, Config{})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, r := range []struct{ method, path string }{
		{"GET", "//evil.example/v1/volumes"},
		{"POST", "//x/v1/streams/q/s"},
		{"GET", "/v1/streams/q/./s"},
		{"POST", "/v1/volumes/../volumes/v/reset?to_remote=true"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), r.method, e.base+r.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" || !bytes.Contains(b, []byte(CodeNotFound)) {
			t.Errorf("%s %s: %d (Location %q) %s, want 404 %s", r.method, r.path, resp.StatusCode, resp.Header.Get("Location"), b, CodeNotFound)
		}
	}
}
