package server

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/internal/testserver"
)

// deadEndpoint returns an http:// address on loopback nothing listens on.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// health returns GET /healthz's status, Retry-After and body.
func (e *env) health() (int, string, Health) {
	e.t.Helper()
	resp, err := http.Get(e.base + "/healthz")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var h Health
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &h); err != nil {
		e.t.Fatalf("healthz body %q: %v", b, err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), h
}

// waitHealth asks /healthz until its status is want (the answer is cached
// for HealthCacheFor), failing after a deadline.
func (e *env) waitHealth(want int) (string, Health) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, ra, h := e.health()
		if code == want {
			return ra, h
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("/healthz still %d (%+v), want %d", code, h, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNewBadRemoteURL: New refuses every malformed remote URL with an
// error wrapping remote.ErrBadURL that says what is wrong — it used to
// panic in closeAll on a nil *BlobStore inside a non-nil Store — before it
// contacts Redis or creates the data dir.
func TestNewBadRemoteURL(t *testing.T) {
	for _, u := range []string{"s3://b?endpoint=http://127.0.0.1:1&foo=bar", "gs://", "azblob://", "s3://?region=r",
		"s3://b?prefix=../x/", "s3://b?key=x", "s3:// b", "nosuch://x", "file://"} {
		data := filepath.Join(t.TempDir(), "data")
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("New with remote %q panics: %v", u, r)
				}
			}()
			_, err := Open(t.Context(), Config{Redis: "redis://127.0.0.1:1/0", Data: data, Remote: u, Listen: "127.0.0.1:0"})
			if !errors.Is(err, remote.ErrBadURL) && !errors.Is(err, remote.ErrUnknownScheme) {
				t.Errorf("New with remote %q: %v, want ErrBadURL", u, err)
			}
		}()
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remote %q: the data dir was created: %v", u, err)
		}
	}
}

// TestMemRemoteNeedsDev: a mem:// remote (sync acknowledgements against
// process memory) is refused with ErrMemRemote unless Config.Dev.
func TestMemRemoteNeedsDev(t *testing.T) {
	_, err := Open(t.Context(), Config{Redis: servers.Redis(t).URL, Data: t.TempDir(), Remote: "mem://", Listen: "127.0.0.1:0"})
	if !errors.Is(err, ErrMemRemote) {
		t.Fatalf("mem:// without Dev: %v, want ErrMemRemote", err)
	}
	e := start(t, Config{Remote: "mem://", Dev: true})
	if code, _, h := e.health(); code != 200 || h != (Health{Status: "ok", Redis: "ok", Remote: "ok"}) {
		t.Fatalf("mem:// with Dev: healthz %d %+v", code, h)
	}
}

// TestRemoteUnavailable: serve on a MinIO remote reports {"status":"ok",
// "redis":"ok","remote":"ok"}; with MinIO killed /healthz answers 503
// degraded with the reason and Retry-After, and a sync enqueue answers 503
// "unavailable" with Retry-After (it answered 500); once MinIO is back
// both recover by themselves.
func TestRemoteUnavailable(t *testing.T) {
	if _, err := testserver.MinIOBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	m, err := testserver.StartMinIO(t.Context())
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { m.Stop() })
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if err := m.CreateBucket(t.Context(), "health"); err != nil {
		t.Fatal(err)
	}
	e, _ := startLogged(t, Config{Redis: servers.Redis(t).URL, Remote: m.URL("health")})
	q := queueName(t)
	if code, _, h := e.health(); code != 200 || h != (Health{Status: "ok", Redis: "ok", Remote: "ok"}) {
		t.Fatalf("healthz with MinIO up: %d %+v", code, h)
	}
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":{"n":1}}`)

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	ra, h := e.waitHealth(http.StatusServiceUnavailable)
	if ra == "" || h.Status != "degraded" || h.Redis != "ok" || !strings.HasPrefix(h.Remote, "unavailable: ") {
		t.Errorf("healthz with MinIO down: Retry-After %q, %+v", ra, h)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", e.base+"/v1/queues/"+q+"/jobs?mode=sync", strings.NewReader(`{"payload":{"n":2}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"code":"unavailable"`) {
		t.Errorf("sync enqueue with MinIO down: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}

	if err := m.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, h := e.waitHealth(http.StatusOK); h != (Health{Status: "ok", Redis: "ok", Remote: "ok"}) {
		t.Errorf("healthz after MinIO is back: %+v", h)
	}
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":{"n":3}}`)
}

// TestStartsWithRemoteDown: serve starts when its remote is unreachable
// (a restart during an outage must not loop), logs an error naming the
// remote, and /healthz answers 503 degraded.
func TestStartsWithRemoteDown(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	e, logs := startLogged(t, Config{Redis: servers.Redis(t).URL, Remote: "s3://bucket?endpoint=" + deadEndpoint(t) + "&region=us-east-1&use_path_style=true&disable_https=true"})
	if !strings.Contains(logs.String(), "the remote is unavailable") {
		t.Errorf("no error logged at start:\n%s", logs)
	}
	code, ra, h := e.health()
	if code != http.StatusServiceUnavailable || ra == "" || h.Status != "degraded" || h.Redis != "ok" || !strings.HasPrefix(h.Remote, "unavailable: ") {
		t.Errorf("healthz: %d %q %+v", code, ra, h)
	}
}

// TestServeSecretNowhere: a Redis password planted in the Redis URL
// appears in none of serve's logs, /healthz, /metrics or error bodies, with
// the remote down and up; a secret planted in the remote URL appears in
// none of New's errors.
func TestServeSecretNowhere(t *testing.T) {
	const secret = "PLANTEDs3cr"
	r, err := testserver.StartRedis(t.Context(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	if _, err := testserver.Do(t.Context(), r.Addr, "CONFIG", "SET", "requirepass", secret); err != nil {
		t.Fatal(err)
	}
	redisURL := "redis://:" + secret + "@" + r.Addr + "/0"
	for _, u := range []string{"s3://AKIA:" + secret + "@b?endpoint=http://127.0.0.1:1", "s3://b?secret_key=" + secret,
		"s3://AKIA:" + secret + "%zz@b", "gs://b?token=" + secret, "s3://b?endpoint=http://a:" + secret + "@127.0.0.1:1"} {
		_, err := Open(t.Context(), Config{Redis: redisURL, Data: t.TempDir(), Remote: u, Listen: "127.0.0.1:0"})
		if err == nil || strings.Contains(err.Error(), "PLANTED") {
			t.Errorf("New with remote %q: %v", u, err)
		}
	}
	for _, bad := range []string{"redis://:" + secret + "@127.0.0.1:1/0", "redis://:" + secret + "@[::1", "redis://:x" + secret + "@" + r.Addr + "/0"} {
		_, err := Open(t.Context(), Config{Redis: bad, Data: t.TempDir(), Listen: "127.0.0.1:0", AllowEviction: true})
		if err == nil || strings.Contains(err.Error(), "PLANTED") {
			t.Errorf("New with redis %q: %v", bad, err)
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	e, logs := startLogged(t, Config{Redis: redisURL,
		Remote: "s3://bucket?endpoint=" + deadEndpoint(t) + "&region=us-east-1&use_path_style=true&disable_https=true"})
	q := queueName(t)
	var seen []string
	get := func(method, path, body string) {
		req, _ := http.NewRequestWithContext(t.Context(), method, e.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen = append(seen, method+" "+path+": "+string(b))
	}
	get("GET", "/healthz", "")
	get("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":1}`)
	get("POST", "/v1/streams/"+q+"/s", `{"fields":{"k":"v"}}`)
	get("POST", "/v1/streams/"+q+"/s/cycle?trim_after=remote", "")
	get("GET", "/v1/streams/"+q+"/s?archive_only=true", "")
	get("GET", "/metrics", "")
	e.srv.Beat(t.Context())
	if err := e.stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	seen = append(seen, "logs: "+logs.String())
	for _, s := range seen {
		if strings.Contains(s, "PLANTED") {
			t.Errorf("the planted secret shows in %s", s)
		}
	}
}

// TestHealthRedisDown: /healthz answers 503 degraded with the reason while
// Redis is down, and 200 again once it is back.
func TestHealthRedisDown(t *testing.T) {
	r, err := testserver.StartRedis(t.Context(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	e, _ := startLogged(t, Config{Redis: r.URL})
	if code, _, h := e.health(); code != 200 || h != (Health{Status: "ok", Redis: "ok", Remote: "ok"}) {
		t.Fatalf("healthz: %d %+v", code, h)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	ra, h := e.waitHealth(http.StatusServiceUnavailable)
	if ra == "" || h.Status != "degraded" || !strings.HasPrefix(h.Redis, "unavailable: ") || h.Remote != "ok" {
		t.Errorf("healthz with Redis down: Retry-After %q, %+v", ra, h)
	}
	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, h := e.waitHealth(http.StatusOK); h != (Health{Status: "ok", Redis: "ok", Remote: "ok"}) {
		t.Errorf("healthz after Redis is back: %+v", h)
	}
}

// TestHealthCached: /healthz asked many times checks the remote at most
// once per HealthCacheFor (each check one GET, retried by the SDK at most
// three times), so it cannot be used to hammer the remote.
func TestHealthCached(t *testing.T) {
	var reqs atomic.Int64
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reqs.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(s3.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	e, _ := startLogged(t, Config{Redis: servers.Redis(t).URL,
		Remote: "s3://bucket?endpoint=" + s3.URL + "&region=us-east-1&use_path_style=true&disable_https=true"})
	began := time.Now()
	before := reqs.Load() // the check at start
	for range 50 {
		if code, _, _ := e.health(); code != http.StatusServiceUnavailable {
			t.Fatalf("healthz: %d", code)
		}
	}
	checks := 1 + int64(time.Since(began)/HealthCacheFor)
	if n := reqs.Load() - before; n > 3*checks {
		t.Errorf("50 /healthz made %d requests to the remote; want at most %d (%d checks)", n, 3*checks, checks)
	}
}
