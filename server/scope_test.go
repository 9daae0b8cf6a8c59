package server

import (
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Tokens of the scope tests, one per scope.
const (
	readToken  = "read-token-0123456789abcdef"
	writeToken = "write-token-0123456789abcdef"
	adminToken = "admin-token-0123456789abcdef"
)

func scopedTokens() []TokenConfig {
	return []TokenConfig{
		{Name: "dash", Scopes: []string{"read"}, Value: readToken},
		{Name: "app", Scopes: []string{"read", "write"}, Value: writeToken},
		{Name: "ops", Scopes: []string{"admin"}, Value: adminToken},
	}
}

// wantScope is the scope each route needs, written out here apart from
// routeScope so that the matrix checks it.
var wantScope = map[string]Scope{
	"GET /v1/streams/{q}/{s}":                ScopeRead,
	"GET /v1/streams/{q}/{s}/archive":        ScopeRead,
	"GET /v1/keys/{k}":                       ScopeRead,
	"GET /v1/keys/{k}/archive":               ScopeRead,
	"POST /v1/keys/{k}":                      ScopeWrite,
	"POST /v1/keys/{k}/cycle":                ScopeWrite,
	"DELETE /v1/keys/{k}":                    ScopeAdmin,
	"POST /v1/keys/{k}/cycle?retain_count=5": ScopeAdmin,
	"POST /v1/keys/{k}/replay":               ScopeWrite,
	"POST /v1/keys/{k}/replay?force=true":    ScopeAdmin,
	"POST /v1/keys/{k}/export":               ScopeAdmin,
	"POST /v1/streams/{q}/{s}/export":        ScopeAdmin,
	"GET /v1/queues/{q}":                     ScopeRead,
	"GET /v1/queues/{q}/dead":                ScopeRead,
	"GET /v1/queues":                         ScopeRead,
	"GET /v1/series":                         ScopeRead,
	"GET /v1/nodes":                          ScopeRead,
	"GET /v1/streams/{q}/{s}/groups":         ScopeRead,
	"GET /v1/keys/{k}/groups":                ScopeRead,
	"GET /v1/queues/{q}/jobs":                ScopeRead,
	"DELETE /v1/queues/{q}/dead":             ScopeAdmin,
	"GET /v1/volumes":                        ScopeRead,
	"GET /v1/volumes/{vid}":                  ScopeRead,
	"GET /v1/events":                         ScopeRead,
	"POST /v1/session":                       ScopeRead,
	"GET /metrics":                           ScopeRead,
	"POST /v1/streams/{q}/{s}":               ScopeWrite,
	"POST /v1/streams/{q}/{s}/cycle":         ScopeWrite,
	"POST /v1/queues/{q}/jobs":               ScopeWrite,
	"POST /v1/queues/{q}/jobs/batch":         ScopeWrite,
	"POST /v1/queues/{q}/claim":              ScopeWrite,
	"POST /v1/queues/{q}/ack":                ScopeWrite,
	"POST /v1/queues/{q}/fail":               ScopeWrite,
	"POST /v1/queues/{q}/redrive":            ScopeWrite,
	"DELETE /v1/streams/{q}/{s}":             ScopeAdmin,
	"POST /v1/volumes/{vid}/push":            ScopeAdmin,
	"POST /v1/volumes/{vid}/pull":            ScopeAdmin,
	"POST /v1/volumes/{vid}/hydrate":         ScopeAdmin,
	"POST /v1/volumes/{vid}/reset":           ScopeAdmin,
	"POST /v1/volumes/{vid}/checkpoint":      ScopeAdmin,
	"POST /v1/volumes/{vid}/gc":              ScopeAdmin,
	"POST /v1/streams/{q}/{s}/fault":         ScopeAdmin,
	"GET /healthz":                           ScopeNone,
	"GET /{$}":                               ScopeNone,
	"POST /v1/streams/{q}/{s}/replay":        ScopeWrite,
	// A replay with force writes into echostore's namespace: admin,
	// whatever its value.
	"POST /v1/streams/{q}/{s}/replay?force=true":  ScopeAdmin,
	"POST /v1/streams/{q}/{s}/replay?force=false": ScopeWrite,
	// A cycle with a retention drops archived history: admin.
	"POST /v1/streams/{q}/{s}/cycle?retain_count=5": ScopeAdmin,
	"POST /v1/streams/{q}/{s}/cycle?retain_age=1h":  ScopeAdmin,
	"POST /v1/streams/{q}/{s}/cycle?retain_count=x": ScopeAdmin,
	// Zero retention drops nothing (what `archive cycle` sends by default).
	"POST /v1/streams/{q}/{s}/cycle?retain_count=0&retain_age=0s": ScopeWrite,
	// trim_after=local trims what no remote holds, whatever the stream's
	// configuration says (a trim_after: remote stream's failover promise):
	// admin; asking for remote (the stronger) stays write.
	"POST /v1/streams/{q}/{s}/cycle?trim_after=local":                   ScopeAdmin,
	"POST /v1/streams/{q}/{s}/cycle?trim_after=remote&trim_after=local": ScopeAdmin,
	"POST /v1/streams/{q}/{s}/cycle?trim_after=remote":                  ScopeWrite,
	// Trimming past consumer groups' entries: admin; holding them: write.
	"POST /v1/streams/{q}/{s}/cycle?stalled_groups=archive":               ScopeAdmin,
	"POST /v1/streams/{q}/{s}/cycle?stalled_groups=hold&stalled_groups=x": ScopeAdmin,
	"POST /v1/streams/{q}/{s}/cycle?stalled_groups=hold&max_live=5":       ScopeWrite,
	"POST /v1/streams/{q}/{s}/cycle?stalled_groups=":                      ScopeWrite,
}

// TestBoundaryRoutesCovered: the samples of the matrices and the scope
// table name exactly the routes the server registers, so a new route
// cannot escape them; the fault route is registered only with faults: true.
func TestBoundaryRoutesCovered(t *testing.T) {
	for _, faults := range []bool{true, false} {
		e := start(t, Config{Faults: faults})
		var got []string
		for _, rt := range e.srv.routes() {
			got = append(got, rt.pattern)
		}
		slices.Sort(got)
		want := slices.Sorted(maps.Keys(routeSamples))
		if !faults {
			want = slices.DeleteFunc(want, func(p string) bool { return strings.HasSuffix(p, "/fault") })
		}
		if !slices.Equal(got, want) {
			t.Errorf("faults %v: the server registers\n%v\nthe samples cover\n%v", faults, got, want)
		}
		for _, p := range got {
			if _, ok := wantScope[p]; !ok {
				t.Errorf("route %s has no scope in the matrix", p)
			}
		}
	}
}

// scopeCase is one request of the scope matrix.
type scopeCase struct {
	name   string // the wantScope key
	method string
	path   string
	body   string
}

func scopeCases(f *fixture) []scopeCase {
	var out []scopeCase
	for _, k := range slices.Sorted(maps.Keys(wantScope)) {
		pattern, query, _ := strings.Cut(k, "?")
		method, _, _ := strings.Cut(pattern, " ")
		smp := routeSamples[pattern]
		path := f.fill(smp.path)
		if query != "" {
			path += "&" + query
		}
		out = append(out, scopeCase{k, method, path, f.fill(smp.body)})
	}
	slices.SortStableFunc(out, func(a, b scopeCase) int {
		pa, _, _ := strings.Cut(a.name, "?")
		pb, _, _ := strings.Cut(b.name, "?")
		return routeRank(pa) - routeRank(pb)
	})
	return out
}

// TestScopeMatrix: the read, write and admin tokens × every route: a token
// with the scope the route needs gets it done (2xx), one without gets 403
// forbidden naming the scope and changes nothing; no token or a wrong one
// is 401 (the dashboard and /healthz need none).
func TestScopeMatrix(t *testing.T) {
	// Token (admin) is the fixture's own, for its set-up.
	f := newFixture(t, Config{Token: testToken, Tokens: scopedTokens(), Faults: true})
	hdr := func(tok string) map[string]string {
		h := map[string]string{"Content-Type": "application/json"}
		if tok != "" {
			h["Authorization"] = "Bearer " + tok
		}
		return h
	}
	cases := scopeCases(f)
	before := f.quiesced()
	for _, tok := range []string{"", "wrong-token-0123456789abcdef"} {
		for _, c := range cases {
			code, ecode, _ := f.raw(c.method, c.path, "", hdr(tok), c.body)
			if wantScope[c.name] == ScopeNone {
				if code != 200 {
					t.Errorf("%s without a token: %d %s", c.name, code, ecode)
				}
			} else if code != http.StatusUnauthorized || ecode != CodeUnauthorized {
				t.Errorf("%s with token %q: %d %q, want 401 unauthorized", c.name, tok, code, ecode)
			}
		}
	}
	if after := f.state(); after != before {
		t.Fatalf("requests without a valid token changed the state:\n%s\nafter\n%s", before, after)
	}
	for _, tk := range []struct {
		token string
		scope Scope
	}{{readToken, ScopeRead}, {writeToken, ScopeWrite}, {adminToken, ScopeAdmin}} {
		before := f.quiesced()
		for _, c := range cases {
			need := wantScope[c.name]
			if need <= tk.scope {
				continue
			}
			code, ecode, _ := f.raw(c.method, c.path, "", hdr(tk.token), c.body)
			if code != http.StatusForbidden || ecode != CodeForbidden {
				t.Errorf("%s with the %s token: %d %q, want 403 forbidden", c.name, tk.scope, code, ecode)
			}
		}
		if after := f.state(); after != before {
			t.Fatalf("requests refused to the %s token changed the state:\n%s\nafter\n%s", tk.scope, before, after)
		}
		for _, c := range cases {
			if need := wantScope[c.name]; need > tk.scope {
				continue
			}
			if code, ecode, _ := f.raw(c.method, c.path, "", hdr(tk.token), c.body); code/100 != 2 && !strings.Contains(c.name, "=x") {
				t.Errorf("%s with the %s token: %d %q, want it done", c.name, tk.scope, code, ecode)
			}
		}
	}
	// The message of a 403 names the scope the route needs.
	code, b := f.do("POST", "/v1/volumes/"+f.vid+"/reset?to_remote=true", readToken, nil)
	if code != 403 || !strings.Contains(string(b), "admin scope") || !strings.Contains(string(b), `dash\" has read`) {
		t.Fatalf("reset with the read token: %d %s", code, b)
	}
}

// TestScopeSessionCookieReadOnly: the session cookie that POST /v1/session
// sets for an admin token opens the event stream and nothing else; the
// fault, reset and append routes refuse it.
func TestScopeSessionCookieReadOnly(t *testing.T) {
	e := start(t, Config{Tokens: scopedTokens(), Faults: true})
	q := queueName(t)
	cookie := e.session(adminToken)
	if code := e.withCookie("GET", "/v1/events", cookie); code != 200 {
		t.Fatalf("events with the session cookie: %d", code)
	}
	for _, p := range []string{"/v1/streams/" + q + "/s", "/v1/streams/" + q + "/s/fault", "/v1/volumes/archive." + q + ".s/reset?to_remote=true"} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", e.base+p, strings.NewReader(`{"fields":{"a":"b"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s with the session cookie: %d, want 401", p, resp.StatusCode)
		}
	}
}

// TestScopeMetrics: /metrics needs the read scope once the server has a
// token, unless metrics_public: true.
func TestScopeMetrics(t *testing.T) {
	e := start(t, Config{Tokens: scopedTokens()})
	code, b := e.do("GET", "/metrics", "", nil)
	e.wantError(code, b, http.StatusUnauthorized, CodeUnauthorized)
	if code, b := e.do("GET", "/metrics", readToken, nil); code != 200 || !strings.Contains(string(b), "echostore_") {
		t.Fatalf("/metrics with the read token: %d", code)
	}
	pub := start(t, Config{Tokens: scopedTokens(), MetricsPublic: true})
	if code, b := pub.do("GET", "/metrics", "", nil); code != 200 || !strings.Contains(string(b), "echostore_") {
		t.Fatalf("/metrics with metrics_public: %d", code)
	}
	code, b = pub.do("GET", "/v1/volumes", "", nil)
	pub.wantError(code, b, http.StatusUnauthorized, CodeUnauthorized)
}

// TestFaultRouteOff: without faults: true the fault route does not exist,
// with or without a token (finding 7: no caller can switch trimming off).
func TestFaultRouteOff(t *testing.T) {
	for _, cfg := range []Config{{}, {Tokens: scopedTokens()}} {
		e := start(t, cfg)
		q := queueName(t)
		code, b := e.do("POST", "/v1/streams/"+q+"/s/fault", adminToken, nil)
		e.wantError(code, b, http.StatusNotFound, CodeNotFound)
		if n := len(e.srv.node.Faults()); n != 0 {
			t.Fatalf("%d faults armed", n)
		}
		if _, b := e.do("GET", "/", "", nil); strings.Contains(string(b), `name="echostore-faults" content="on"`) {
			t.Fatal("the dashboard shows the fault control")
		}
	}
	e := start(t, Config{Faults: true})
	if _, b := e.do("GET", "/", "", nil); !strings.Contains(string(b), `name="echostore-faults" content="on"`) {
		t.Fatal("with faults: true the dashboard hides the fault control")
	}
}

// TestBoundaryFrameHeaders: the dashboard and every API answer forbid
// framing (clickjacking): CSP frame-ancestors 'none' (merged into the
// dashboard's own policy) and X-Frame-Options: DENY; refusals too.
func TestBoundaryFrameHeaders(t *testing.T) {
	e := start(t, Config{Token: testToken})
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	for _, c := range []struct{ method, path, host string }{
		{"GET", "/", ""}, {"GET", "/v1/volumes", ""}, {"GET", "/healthz", ""}, {"GET", "/metrics", ""},
		{"GET", "/v1/nothing", ""}, {"POST", "/v1/volumes/x/push", ""}, {"GET", "/", "evil.example"},
	} {
		_, _, h := e.raw(c.method, c.path, c.host, auth, "")
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s %s: Content-Security-Policy %q", c.method, c.path, csp)
		}
		if x := h.Get("X-Frame-Options"); x != "DENY" {
			t.Errorf("%s %s: X-Frame-Options %q", c.method, c.path, x)
		}
	}
	_, _, h := e.raw("GET", "/", "", nil, "")
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("the dashboard's policy lost its default-src: %q", csp)
	}
}

// TestBoundaryAllowedHosts: a name in allowed_hosts is answered (with or
// without its port), others are not; a malformed entry is refused at start.
func TestBoundaryAllowedHosts(t *testing.T) {
	e := start(t, Config{AllowedHosts: []string{"echostore.internal", "Proxy.Example:8443"}})
	_, port, _ := strings.Cut(strings.TrimPrefix(e.base, "http://"), ":")
	for host, want := range map[string]int{
		"echostore.internal": 200, "echostore.internal:" + port: 200, "echostore.internal:1": 200,
		"proxy.example:8443": 200, "proxy.example": 421, "proxy.example:" + port: 421, "other.internal:" + port: 421,
	} {
		if code, ecode, _ := e.raw("GET", "/v1/volumes", host, nil, ""); code != want {
			t.Errorf("Host %s: %d %s, want %d", host, code, ecode, want)
		}
	}
	for _, bad := range []string{"", "http://x", "x/y", "*", "x:0", "x:port", "a b"} {
		_, err := Config{Data: "d", Redis: "r", AllowedHosts: []string{bad}}.withDefaults()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "allowed_hosts") {
			t.Errorf("allowed_hosts %q: %v", bad, err)
		}
	}
}

// TestTokenConfig: a token shorter than MinTokenLen, a token file missing,
// empty or readable by every user, a scope unknown or missing, two tokens
// of one name or value: each is refused at start with an error that says
// what to do and never shows a token; a non-loopback listen needs a token.
// A token file's trailing newline is trimmed.
func TestTokenConfig(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", adminToken+"\n", 0o600)
	base := Config{Data: "d", Redis: "r"}
	for _, c := range []struct {
		name string
		cfg  func(Config) Config
		want string
	}{
		{"short token", func(c Config) Config { c.Token = "tok"; return c }, "at least 16"},
		{"15 bytes", func(c Config) Config { c.Token = "0123456789abcde"; return c }, "at least 16"},
		{"short value", func(c Config) Config {
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}, Value: "short"}}
			return c
		}, "at least 16"},
		{"short file", func(c Config) Config {
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}, File: file("short", "abc\n", 0o600)}}
			return c
		}, "at least 16"},
		{"missing file", func(c Config) Config {
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}, File: filepath.Join(dir, "none")}}
			return c
		}, "no such file"},
		{"empty file", func(c Config) Config {
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}, File: file("empty", "\n", 0o600)}}
			return c
		}, "is empty"},
		{"world-readable file", func(c Config) Config {
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}, File: file("open", adminToken, 0o644)}}
			return c
		}, "chmod o-r"},
		{"no file", func(c Config) Config { c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}}}; return c }, "file: PATH"},
		{"no scopes", func(c Config) Config { c.Tokens = []TokenConfig{{Name: "a", File: good}}; return c }, "scopes"},
		{"bad scope", func(c Config) Config {
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"root"}, File: good}}
			return c
		}, `"root"`},
		{"no name", func(c Config) Config { c.Tokens = []TokenConfig{{Scopes: []string{"read"}, File: good}}; return c }, "name"},
		{"same name", func(c Config) Config {
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}, File: good}, {Name: "a", Scopes: []string{"read"}, Value: readToken}}
			return c
		}, "have this name"},
		{"same value", func(c Config) Config {
			c.Token = adminToken
			c.Tokens = []TokenConfig{{Name: "a", Scopes: []string{"read"}, File: good}}
			return c
		}, "same value"},
		{"space", func(c Config) Config { c.Token = "0123456789 abcdef"; return c }, "printable ASCII"},
	} {
		_, err := c.cfg(base).withDefaults()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrConfig saying %q", c.name, err, c.want)
			continue
		}
		for _, secret := range []string{adminToken, readToken, "0123456789abcde"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows the token: %v", c.name, err)
			}
		}
	}
	if _, err := (Config{Data: "d", Redis: "r", Listen: "0.0.0.0:7070"}).withDefaults(); !errors.Is(err, ErrInsecure) {
		t.Errorf("non-loopback without a token: %v, want ErrInsecure", err)
	}
	if _, err := (Config{Data: "d", Redis: "r", Listen: "0.0.0.0:7070", Token: "0123456789"}).withDefaults(); !errors.Is(err, ErrConfig) {
		t.Errorf("non-loopback with a short token: %v, want ErrConfig", err)
	}
	if _, err := (Config{Data: "d", Redis: "r", Listen: "0.0.0.0:7070", Tokens: []TokenConfig{{Name: "ops", Scopes: []string{"admin"}, File: good}}}).withDefaults(); err != nil {
		t.Errorf("non-loopback with a token file: %v", err)
	}
	// The file's token works, its newline trimmed.
	e := start(t, Config{Tokens: []TokenConfig{{Name: "ops", Scopes: []string{"admin"}, File: good}}})
	if code, b := e.do("GET", "/v1/volumes", adminToken, nil); code != 200 {
		t.Fatalf("with the file's token: %d %s", code, b)
	}
}

// quiesced returns the state once the jobs enqueued so far are committed,
// pushed and dispatched: the accept tier does that in the background, an
// async job after up to accept.DefaultAsyncInterval, so a state taken at
// once could change under the requests that follow.
func (f *fixture) quiesced() string {
	f.t.Helper()
	if err := f.srv.node.Drain(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); f.srv.outboxLen() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatal("the jobs enqueued were not dispatched within 30s")
		}
	}
	return f.settled()
}
