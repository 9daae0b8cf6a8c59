package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

var servers testserver.Pool

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(serveChild())
	}
	os.Exit(servers.Run(m))
}

// childEnv makes the test binary a serve process (TestSIGTERM).
const childEnv = "ECHOSTORE_TEST_SERVE_CHILD"

// serveChild runs a server as `echostore serve` does, until SIGTERM, with
// the Redis and data dir of its environment; it prints the address.
func serveChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	srv, err := Open(ctx, Config{Listen: "127.0.0.1:0", Redis: os.Getenv("ECHOSTORE_REDIS"),
		Data: os.Getenv("ECHOSTORE_DATA"), AllowEviction: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.Addr().String())
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// env is a running Server on a loopback port.
type env struct {
	t    *testing.T
	srv  *Server
	base string
	cfg  Config
	stop func() error // cancels Run and returns its error
}

// start runs a server with cfg over the pool's Redis and a fresh data dir;
// the test ends it (and checks that Run returned nil) unless it did.
func start(t *testing.T, cfg Config) *env {
	t.Helper()
	if cfg.Redis == "" {
		cfg.Redis = servers.Redis(t).URL
	}
	if cfg.Data == "" {
		cfg.Data = t.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Beat == 0 {
		cfg.Beat = time.Hour // tests cycle by hand unless they ask for a beat
	}
	cfg.AllowEviction = true
	if cfg.Discover == nil {
		// The pool's Redis is shared by the package's tests: a test's server
		// adopts no other test's archived streams unless it asks to.
		off := false
		cfg.Discover = &off
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(t.Context())
	srv, err := Open(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &env{t: t, srv: srv, base: "http://" + srv.Addr().String(), cfg: cfg, stop: stop}
}

// queueName is a queue name of its own for each test and each run (the
// pool's Redis outlives a test; a data dir does not).
func queueName(t *testing.T) string {
	return fmt.Sprintf("%s.%d", strings.NewReplacer("/", ".", " ", "_").Replace(t.Name()), time.Now().UnixNano())
}

// do sends a request and returns the status and body.
func (e *env) do(method, path, token string, body io.Reader) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if stateChanging(method) {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// session signs in with token and returns the session cookie it got.
func (e *env) session(token string) *http.Cookie {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), "POST", e.base+"/v1/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("POST /v1/session: %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			return c
		}
	}
	e.t.Fatalf("POST /v1/session set no %s cookie", SessionCookie)
	return nil
}

// withCookie sends a request carrying only cookie and returns its status.
// The body is not read beyond the headers, so an event stream's answer is
// judged by its status alone.
func (e *env) withCookie(method, path string, cookie *http.Cookie) int {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), method, e.base+path, nil)
	req.AddCookie(cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// must sends a request that must answer 200 and returns the body.
func (e *env) must(method, path string, body string) []byte {
	e.t.Helper()
	code, b := e.do(method, path, e.cfg.Token, strings.NewReader(body))
	if code != http.StatusOK {
		e.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	return b
}

// apiErr decodes an error body and checks status and code.
func (e *env) wantError(code int, body []byte, wantStatus int, wantCode string) {
	e.t.Helper()
	var eb struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &eb); err != nil {
		e.t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if code != wantStatus || eb.Error.Code != wantCode || eb.Error.Message == "" {
		e.t.Fatalf("got %d %s, want %d with code %q and a message", code, body, wantStatus, wantCode)
	}
}

// stopAndConnect stops the server (its shutdown lets the accept tier
// finish the dispatch of what it committed) and returns a client of its
// Redis, closed at the test's end.
func (e *env) stopAndConnect() *mq.Client {
	e.t.Helper()
	if err := e.stop(); err != nil {
		e.t.Fatal(err)
	}
	c, err := mq.Connect(e.t.Context(), mq.Options{URL: e.cfg.Redis, AllowEviction: true})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func appendN(e *env, q, s string, from, n int) []string {
	e.t.Helper()
	var in strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&in, `{"fields":{"n":"%d","kind":"test"}}`+"\n", i)
	}
	var out struct{ IDs []string }
	if err := json.Unmarshal(e.must("POST", "/v1/streams/"+q+"/"+s, in.String()), &out); err != nil {
		e.t.Fatal(err)
	}
	if len(out.IDs) != n {
		e.t.Fatalf("got %d ids, want %d", len(out.IDs), n)
	}
	return out.IDs
}

func lines(b []byte) []string {
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestAppendReadCycle: append, read, cycle, read again: the merge-read of
// archive and live tail is byte-identical to the read before the cycle.
func TestAppendReadCycle(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	ids := appendN(e, q, "events", 0, 20)
	// One record, pretty printed, with a Content-Type that says otherwise.
	one := e.must("POST", "/v1/streams/"+q+"/events", "{\n  \"fields\": {\"n\": \"20\"}\n}\n")
	if !bytes.Contains(one, []byte(`"ids":["EVT_`)) {
		t.Fatalf("one record: %s", one)
	}
	before := e.must("GET", "/v1/streams/"+q+"/events", "")
	if got := lines(before); len(got) != 21 || !strings.HasPrefix(got[0], `{"id":"`+ids[0]+`","fields":{"n":"0","kind":"test"}}`) {
		t.Fatalf("read before the cycle: %d lines, first %q", len(got), got[0])
	}
	var cyc struct {
		Folded, Trimmed int64
		Watermark       string
	}
	if err := json.Unmarshal(e.must("POST", "/v1/streams/"+q+"/events/cycle?keep=5", ""), &cyc); err != nil {
		t.Fatal(err)
	}
	if cyc.Folded != 16 || cyc.Trimmed != 16 || cyc.Watermark != ids[15] {
		t.Fatalf("cycle: %+v, want 16 folded and trimmed, W %s", cyc, ids[15])
	}
	after := e.must("GET", "/v1/streams/"+q+"/events", "")
	if !bytes.Equal(before, after) {
		t.Fatalf("merge-read after the cycle differs:\n%s\nwant\n%s", after, before)
	}
	live := e.must("GET", "/v1/streams/"+q+"/events?live_only=true", "")
	if want := strings.Join(lines(before)[16:], "\n") + "\n"; string(live) != want {
		t.Fatalf("live only:\n%s\nwant\n%s", live, want)
	}
	rev := lines(e.must("GET", "/v1/streams/"+q+"/events?reverse=true&limit=3&to="+ids[17], ""))
	if len(rev) != 3 || rev[0] != lines(before)[17] || rev[2] != lines(before)[15] {
		t.Fatalf("reverse read across the seam: %q", rev)
	}
	rng := lines(e.must("GET", "/v1/streams/"+q+"/events?from="+ids[14]+"&to="+ids[16], ""))
	if strings.Join(rng, "\n") != strings.Join(lines(before)[14:17], "\n") {
		t.Fatalf("range read: %q", rng)
	}
	var st struct {
		Watermark string
		Archived  uint64
		Live      int64
		Volume    string
		LSN       uint64
	}
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/events/archive", ""), &st); err != nil {
		t.Fatal(err)
	}
	if st.Watermark != ids[15] || st.Archived != 16 || st.Live != 5 || st.Volume != "archive."+q+".events" || st.LSN == 0 {
		t.Fatalf("archive status: %+v", st)
	}
	var vols struct{ Volumes []graft.Info }
	if err := json.Unmarshal(e.must("GET", "/v1/volumes", ""), &vols); err != nil {
		t.Fatal(err)
	}
	if len(vols.Volumes) != 1 || vols.Volumes[0].Volume.String() != st.Volume {
		t.Fatalf("volumes: %+v", vols)
	}
	var info graft.Info
	if err := json.Unmarshal(e.must("GET", "/v1/volumes/"+st.Volume, ""), &info); err != nil {
		t.Fatal(err)
	}
	if info.LocalLSN != st.LSN {
		t.Fatalf("volume info: %+v, want local LSN %d", info, st.LSN)
	}
	metrics := string(e.must("GET", "/metrics", ""))
	for _, want := range []string{
		`echostore_appended_records_total{queue="` + q + `",stream="events"} 21`,
		`echostore_folded_records_total{queue="` + q + `",stream="events"} 16`,
		`echostore_archive_depth_records{queue="` + q + `",stream="events"} 16`,
		`echostore_stream_live_length{queue="` + q + `",stream="events"} 5`,
		`echostore_volume_local_lsn{volume="` + st.Volume + `"}`,
		`echostore_http_request_duration_seconds_count{code="200",method="POST",route="POST /v1/streams/{q}/{s}"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestErrors: every failure is a JSON error with its status, and a bad name
// is refused before anything happens.
func TestErrors(t *testing.T) {
	q := queueName(t)
	no := false
	e := start(t, Config{MaxBody: 1024, Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "audit", Archived: &no}}}}})
	admitted := func() int {
		e.srv.mu.Lock()
		defer e.srv.mu.Unlock()
		return len(e.srv.admitted)
	}
	before := admitted()
	code, b := e.do("POST", "/v1/streams/"+q+"/a:b", "", strings.NewReader(`{"fields":{"a":"b"}}`))
	e.wantError(code, b, 400, CodeInvalidName)
	if n := admitted(); n != before {
		t.Fatalf("a refused stream name was declared: %d streams, %d before", n, before)
	}
	code, b = e.do("POST", "/v1/streams/"+q+"/s", "", strings.NewReader(`{"fields":{"a":"b","a":"c"}}`))
	e.wantError(code, b, 400, CodeInvalidInput)
	code, b = e.do("POST", "/v1/streams/"+q+"/s", "", strings.NewReader(`{"fields":{"a":"b"}}`+"\nnot json\n"))
	e.wantError(code, b, 400, CodeInvalidInput)
	if _, ok := e.srv.lookup(mustRef(t, q, "s")); ok {
		t.Fatal("a refused append declared its stream")
	}
	code, b = e.do("POST", "/v1/streams/"+q+"/s", "", strings.NewReader(""))
	e.wantError(code, b, 400, CodeBadRequest)
	big := `{"fields":{"a":"` + strings.Repeat("x", 2048) + `"}}`
	code, b = e.do("POST", "/v1/streams/"+q+"/s", "", strings.NewReader(big))
	e.wantError(code, b, 413, CodeTooLarge)
	code, b = e.do("POST", "/v1/queues/"+q+"/ack", "", strings.NewReader(`{"entries":["`+strings.Repeat("1", 2048)+`"]}`))
	e.wantError(code, b, 413, CodeTooLarge)
	code, b = e.do("GET", "/v1/streams/"+q+"/s?limit=-1", "", nil)
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("GET", "/v1/streams/"+q+"/s?from=nonsense", "", nil)
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("POST", "/v1/streams/"+q+"/s/cycle?keep=x", "", nil)
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("POST", "/v1/streams/"+q+"/audit/cycle?keep=1", "", nil)
	e.wantError(code, b, 409, CodeConflict)
	code, b = e.do("GET", "/v1/volumes/archive.nope.nope", "", nil)
	e.wantError(code, b, 404, CodeNotFound)
	code, b = e.do("GET", "/v1/nothing", "", nil)
	e.wantError(code, b, 404, CodeNotFound)
	code, b = e.do("DELETE", "/v1/volumes", "", nil)
	e.wantError(code, b, 405, CodeMethodNotAllowed)
	code, b = e.do("GET", "/nothing", "", nil)
	e.wantError(code, b, 404, CodeNotFound)
	code, b = e.do("POST", "/v1/queues/"+q+"/redrive", "", strings.NewReader(`{"all":true,"entries":["1-1"]}`))
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("POST", "/v1/queues/"+q+"/ack", "", strings.NewReader(`{"entries":["1-1"],"extra":1}`))
	e.wantError(code, b, 400, CodeBadRequest)
}

// TestToken: with a token every /v1 call needs it; /healthz does not; a
// non-loopback address is refused without one.
func TestToken(t *testing.T) {
	e := start(t, Config{Token: testToken})
	q := queueName(t)
	for _, tok := range []string{"", "wrong", testToken[:len(testToken)-1], testToken + "X"} {
		code, b := e.do("GET", "/v1/volumes", tok, nil)
		e.wantError(code, b, 401, CodeUnauthorized)
		code, b = e.do("POST", "/v1/streams/"+q+"/s", tok, strings.NewReader(`{"fields":{"a":"b"}}`))
		e.wantError(code, b, 401, CodeUnauthorized)
	}
	if code, b := e.do("GET", "/v1/volumes", testToken, nil); code != 200 {
		t.Fatalf("with the token: %d %s", code, b)
	}
	code, b := e.do("GET", "/v1/nothing", "", nil)
	e.wantError(code, b, 401, CodeUnauthorized)
	if code, _ := e.do("GET", "/healthz", "", nil); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
	// A token in the URL is not accepted (it would end up in access logs).
	if code, _ := e.do("GET", "/v1/events?access_token="+testToken, "", nil); code != 401 {
		t.Fatalf("events with the token in the URL: %d, want 401", code)
	}
	// The session cookie: set only by a signed-in POST /v1/session,
	// HttpOnly and SameSite=Strict, and accepted by GET /v1/events alone.
	if code, b := e.do("POST", "/v1/session", "", nil); code != 401 {
		t.Fatalf("session without the token: %d %s", code, b)
	}
	cookie := e.session(testToken)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value == "" || strings.Contains(cookie.Value, testToken) {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not carrying the token", cookie)
	}
	if code := e.withCookie("GET", "/v1/volumes", cookie); code != 401 {
		t.Fatalf("the session cookie opened GET /v1/volumes: %d, want 401", code)
	}
	if code := e.withCookie("GET", "/v1/events", &http.Cookie{Name: SessionCookie, Value: "forged"}); code != 401 {
		t.Fatalf("a forged session cookie opened the events: %d, want 401", code)
	}
	_, err := Open(t.Context(), Config{Listen: "0.0.0.0:0", Redis: e.cfg.Redis, Data: t.TempDir()})
	if !errors.Is(err, ErrInsecure) {
		t.Fatalf("non-loopback without a token: %v, want ErrInsecure", err)
	}
}

// TestDataLocked: a second server (or any process) on the same data dir is
// refused at once with ErrDataLocked, not left waiting.
func TestDataLocked(t *testing.T) {
	e := start(t, Config{})
	_, err := Open(t.Context(), Config{Listen: "127.0.0.1:0", Redis: e.cfg.Redis, Data: e.cfg.Data, AllowEviction: true})
	if !errors.Is(err, ErrDataLocked) {
		t.Fatalf("second server on the data dir: %v, want ErrDataLocked", err)
	}
}

// sse reads server-sent events from a response body.
type sse struct{ r *bufio.Reader }

// next returns the next event's name and data.
func (s sse) next() (string, string, error) {
	var name, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data, nil
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
}

// TestEventsCycle: a cycle produces a cycle event and an lsn event on
// /v1/events over HTTP.
func TestEventsCycle(t *testing.T) {
	e := start(t, Config{Token: testToken})
	q := queueName(t)
	// A browser signs in once and the event stream carries the cookie.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.base+"/v1/events", nil)
	req.AddCookie(e.session(testToken))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ev := sse{bufio.NewReader(resp.Body)}
	ids := appendN(e, q, "s", 0, 8)
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
	var gotCycle, gotLSN bool
	for !gotCycle || !gotLSN {
		name, data, err := ev.next()
		if err != nil {
			t.Fatalf("events ended before a cycle and an lsn event: %v", err)
		}
		switch name {
		case "cycle":
			var c CycleEvent
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			if c.Queue != q || c.Stream != "s" || c.Folded != 6 || c.Watermark != ids[5] || c.Archive != 6 || c.Live != 2 || c.Lag != 2 {
				t.Fatalf("cycle event: %s", data)
			}
			gotCycle = true
		case "lsn":
			var l LSNEvent
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				t.Fatal(err)
			}
			if l.Volume != "archive."+q+".s" || l.LocalLSN == 0 {
				t.Fatalf("lsn event: %s", data)
			}
			gotLSN = true
		}
	}
}

// TestBeatAndShutdown: producers append over HTTP while the beat folds and
// trims a declared stream; the server is stopped mid-way. Run returns nil,
// the data dir is released, and every acknowledged record is in the
// merge-read, in order, once.
func TestBeatAndShutdown(t *testing.T) {
	q := queueName(t)
	keep := int64(3)
	e := start(t, Config{Beat: 5 * time.Millisecond, Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "s", Keep: keep}}}}})
	cycled := make(chan CycleEvent, 1)
	go func() {
		// Wait (on the event stream, not a clock) for a beat that folded, or
		// one that failed.
		ch, unsub := e.srv.hub.subscribe()
		defer unsub()
		for ev := range ch {
			var c CycleEvent
			if ev.Kind == "cycle" && json.Unmarshal(ev.Data, &c) == nil && (c.Folded > 0 || c.Error != "") {
				cycled <- c
				return
			}
		}
	}()
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	stopProducers := make(chan struct{})
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stopProducers:
					return
				default:
				}
				body := fmt.Sprintf(`{"fields":{"p":"%d","i":"%d"}}`, p, i)
				resp, err := http.Post(e.base+"/v1/streams/"+q+"/s", "application/json", strings.NewReader(body))
				if err != nil {
					return // the server has stopped listening
				}
				var out struct{ IDs []string }
				derr := json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if resp.StatusCode == 200 && derr == nil {
					mu.Lock()
					acked = append(acked, out.IDs...)
					mu.Unlock()
				}
			}
		}()
	}
	c := <-cycled
	if err := e.stop(); err != nil {
		t.Fatalf("Run after shutdown: %v", err)
	}
	close(stopProducers)
	wg.Wait()
	if c.Error != "" {
		t.Fatalf("beat cycle failed: %s", c.Error)
	}

	ctx := t.Context()
	st, err := graft.Open(ctx, filepath.Join(e.cfg.Data, "graft"), graft.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("data dir after shutdown: %v", err)
	}
	defer st.Close()
	vol, err := st.Volume(ctx, volName("archive."+q+".s"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := mq.Connect(ctx, mq.Options{URL: e.cfg.Redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	seen := map[string]bool{}
	var last xid.ID
	var archived int
	state, err := archive.Frontier(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	for r, err := range archive.MergeRead(ctx, archive.Source{Ref: mustRef(t, q, "s"), Live: live, Volume: vol}, archive.All()) {
		if err != nil {
			t.Fatal(err)
		}
		if !last.Less(r.ID) {
			t.Fatalf("merge-read out of order at %s", mq.FormatID(r.ID, mq.IDBranded))
		}
		last = r.ID
		seen[mq.FormatID(r.ID, mq.IDBranded)] = true
		if state.Covers(r.ID) {
			archived++
		}
	}
	if archived == 0 {
		t.Fatal("the beat archived nothing")
	}
	for _, id := range acked {
		if !seen[id] {
			t.Fatalf("acknowledged record %s is lost (%d acknowledged, %d read)", id, len(acked), len(seen))
		}
	}
	t.Logf("%d acknowledged, %d archived by the beat", len(acked), archived)
}

// TestQueue: claim and ack jobs, list dead letters and redrive over HTTP.
func TestQueue(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	c, err := mq.Connect(t.Context(), mq.Options{URL: e.cfg.Redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Enqueue(t.Context(), mustQueue(t, q), mq.Job{Fields: []mq.Field{{Name: "task", Value: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var claim struct {
		Jobs []struct {
			ID, Entry string
			Attempt   int
			Fields    map[string]string
		}
	}
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=w1&count=5", ""), &claim); err != nil {
		t.Fatal(err)
	}
	if len(claim.Jobs) != 1 || claim.Jobs[0].ID != brand.JOB.Format(res.ID) || claim.Jobs[0].Fields["task"] != "x" {
		t.Fatalf("claim: %+v", claim)
	}
	if b := e.must("POST", "/v1/queues/"+q+"/claim", ""); string(b) != `{"jobs":[]}`+"\n" {
		t.Fatalf("claim of an empty queue: %s", b)
	}
	ack := e.must("POST", "/v1/queues/"+q+"/ack", `{"entries":["`+claim.Jobs[0].Entry+`"]}`)
	if string(ack) != `{"acked":1}`+"\n" {
		t.Fatalf("ack: %s", ack)
	}
	if b := e.must("GET", "/v1/queues/"+q+"/dead", ""); string(b) != `{"dead":[]}`+"\n" {
		t.Fatalf("dead: %s", b)
	}
	if b := e.must("POST", "/v1/queues/"+q+"/redrive", `{"all":true}`); string(b) != `{"entries":[],"redriven":0}`+"\n" {
		t.Fatalf("redrive: %s", b)
	}
	var status map[string]any
	if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &status); err != nil {
		t.Fatal(err)
	}
}

// checked is c with a data dir and a Redis URL, checked as New checks
// it (withDefaults).
func checked(c Config) (Config, error) {
	c.Data, c.Redis = "d", "r"
	return c.withDefaults()
}

// TestConfig: defaults, the merge of a stream over them, and refusals.
func TestConfig(t *testing.T) {
	no, yes := false, true
	c, err := checked(Config{
		Listen:   "127.0.0.1:9999",
		Beat:     2 * time.Second,
		Defaults: StreamConfig{Archived: &no, Keep: 50},
		Queues: []QueueConfig{{Name: "orders", Streams: []StreamConfig{
			{Name: "events", Keep: 100, MaxAge: 24 * time.Hour, Archived: &yes, TrimAfter: "remote"},
			{Name: "audit"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := c.resolve(mustRef(t, "orders", "events"), c.Queues[0].Streams[0])
	au, _ := c.resolve(mustRef(t, "orders", "audit"), c.Queues[0].Streams[1])
	if c.Beat != 2*time.Second || !ev.archived || ev.trimAfter != archive.TrimAfterRemote ||
		ev.window != (archive.Window{Keep: 100, MaxAge: 24 * time.Hour}) || au.archived || au.window.Keep != 50 {
		t.Fatalf("resolved: %+v %+v %+v", c, ev, au)
	}
	d, _ := Config{Data: "d", Redis: "r"}.withDefaults()
	if def, _ := d.resolve(mustRef(t, "q", "s"), StreamConfig{}); !def.archived || def.window.Keep != DefaultKeep || def.trimAfter != archive.TrimAfterLocal {
		t.Fatalf("defaults: %+v", def)
	}
	if d.MaxStreams != DefaultMaxStreams || d.MaxQueues != accept.DefaultMaxQueues {
		t.Fatalf("max_streams / max_queues by default: %d / %d, want %d / %d", d.MaxStreams, d.MaxQueues, DefaultMaxStreams, accept.DefaultMaxQueues)
	}
	queue := func(streams ...StreamConfig) []QueueConfig { return []QueueConfig{{Name: "a", Streams: streams}} }
	for what, bad := range map[string]Config{
		"queue a:b":          {Queues: []QueueConfig{{Name: "a:b"}}},
		"trim_after later":   {Queues: queue(StreamConfig{Name: "s", TrimAfter: "later"})},
		"declared twice":     {Queues: queue(StreamConfig{Name: "s"}, StreamConfig{Name: "s"})},
		"keep -1":            {Queues: queue(StreamConfig{Name: "s", Keep: -1})},
		"max_streams -1":     {MaxStreams: -1},
		"max_queues -1":      {MaxQueues: -1},
		"beyond max_streams": {MaxStreams: 1, Queues: queue(StreamConfig{Name: "s"}, StreamConfig{Name: "t"})},
	} {
		if _, err := checked(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", what, err)
		}
	}
}

// TestConfigSharedArchiveVolume: two archived streams whose names map to
// one archive volume (a.b/c and a/b.c: archive.a.b.c) are refused, naming
// both; one of them not archived is accepted.
func TestConfigSharedArchiveVolume(t *testing.T) {
	no := false
	_, err := checked(Config{Queues: []QueueConfig{{Name: "a.b", Streams: []StreamConfig{{Name: "c"}}}, {Name: "a", Streams: []StreamConfig{{Name: "b.c"}}}}})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "a.b/c") ||
		!strings.Contains(err.Error(), "a/b.c") || !strings.Contains(err.Error(), "archive.a.b.c") {
		t.Fatalf("shared volume: %v, want ErrConfig naming a.b/c, a/b.c and archive.a.b.c", err)
	}
	if _, err := checked(Config{Queues: []QueueConfig{{Name: "a.b", Streams: []StreamConfig{{Name: "c"}}}, {Name: "a", Streams: []StreamConfig{{Name: "b.c", Archived: &no}}}}}); err != nil {
		t.Fatalf("one of the two not archived: %v", err)
	}
}

// TestEnqueue: jobs enqueued through the accept tier over HTTP, async and
// sync, reach the job stream and are claimed there; a sync receipt names the
// remote LSN of the accept volume.
func TestEnqueue(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	var async, sync struct {
		ID, Mode, Volume string
		LSN              *uint64
	}
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/jobs", `{"payload":{"n":1}}`), &async); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":{"n":2}}`), &sync); err != nil {
		t.Fatal(err)
	}
	if async.Mode != "async" || async.LSN != nil || !strings.HasPrefix(async.ID, "JOB_") ||
		sync.Mode != "sync" || sync.LSN == nil || *sync.LSN == 0 || sync.Volume != "accept."+q+".0" {
		t.Fatalf("receipts: %+v %+v", async, sync)
	}
	code, b := e.do("POST", "/v1/queues/"+q+"/jobs?mode=later", "", strings.NewReader(`{"payload":1}`))
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("POST", "/v1/queues/"+q+"/jobs", "", strings.NewReader(`{}`))
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("POST", "/v1/queues/a:b/jobs", "", strings.NewReader(`{"payload":1}`))
	e.wantError(code, b, 400, CodeInvalidName)
	// The sync ack means the accept volume's commit is pushed.
	var info graft.Info
	if err := json.Unmarshal(e.must("GET", "/v1/volumes/"+sync.Volume, ""), &info); err != nil {
		t.Fatal(err)
	}
	if info.RemoteLSN < *sync.LSN {
		t.Fatalf("accept volume after the sync ack: %+v, want remote LSN ≥ %d", info, *sync.LSN)
	}
	if m := string(e.must("GET", "/metrics", "")); !strings.Contains(m, "echostore_accept_loss_window_records 1000") {
		t.Fatal("metrics lack the accept tier's loss window")
	}
	// Dispatch to the job stream follows the commit in the background; the
	// shutdown lets it finish, so the sync job is in the job stream then.
	c := e.stopAndConnect()
	jobs, err := c.Claim(t.Context(), mustQueue(t, q), "t", 10)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[brand.JOB.Format(j.ID)] = true
	}
	if !seen[sync.ID] {
		t.Fatalf("the sync job %s is not in the job stream after shutdown (claimed %d)", sync.ID, len(jobs))
	}
}

// TestRetentionBeat: a stream declared archived: false is trimmed to its
// window by the beat and nothing of it is folded; an archived one on the same
// beat is folded first.
func TestRetentionBeat(t *testing.T) {
	q := queueName(t)
	no := false
	e := start(t, Config{Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{
		{Name: "audit", Keep: 3, Archived: &no},
		{Name: "events", Keep: 4},
	}}}})
	appendN(e, q, "audit", 0, 10)
	appendN(e, q, "events", 0, 10)
	e.srv.Beat(t.Context())
	if n := len(lines(e.must("GET", "/v1/streams/"+q+"/audit", ""))); n != 3 {
		t.Fatalf("audit after the beat: %d records, want the 3 its window keeps", n)
	}
	if n := len(lines(e.must("GET", "/v1/streams/"+q+"/events", ""))); n != 10 {
		t.Fatalf("events after the beat: %d records in the merge-read, want 10", n)
	}
	if n := len(lines(e.must("GET", "/v1/streams/"+q+"/events?live_only=1", ""))); n != 4 {
		t.Fatalf("events after the beat: %d live, want 4", n)
	}
	code, b := e.do("GET", "/v1/volumes/archive."+q+".audit", "", nil)
	e.wantError(code, b, 404, CodeNotFound)
	m := string(e.must("GET", "/metrics", ""))
	for _, want := range []string{
		`echostore_trimmed_entries_total{kind="retention",queue="` + q + `",stream="audit"} 7`,
		`echostore_trimmed_entries_total{kind="archive",queue="` + q + `",stream="events"} 6`,
		`echostore_cycles_total{kind="retention",queue="` + q + `",result="ok",stream="audit"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestSIGTERM: a serve process that gets SIGTERM exits 0, releases the data
// dir, and what it acknowledged is all there.
func TestSIGTERM(t *testing.T) {
	q := queueName(t)
	data := t.TempDir()
	redis := servers.Redis(t).URL
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "ECHOSTORE_REDIS="+redis, "ECHOSTORE_DATA="+data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("child: %v; stderr:\n%s", err, stderr.String())
	}
	e := &env{t: t, base: "http://" + strings.TrimSpace(addr)}
	ids := appendN(e, q, "s", 0, 30)
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=10", "")
	ids = append(ids, appendN(e, q, "s", 30, 5)...)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v; stderr:\n%s", err, stderr.String())
	}
	ctx := t.Context()
	st, err := graft.Open(ctx, filepath.Join(data, "graft"), graft.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("data dir after SIGTERM: %v", err)
	}
	defer st.Close()
	vol, err := st.Volume(ctx, volName("archive."+q+".s"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := mq.Connect(ctx, mq.Options{URL: redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var got []string
	for r, err := range archive.MergeRead(ctx, archive.Source{Ref: mustRef(t, q, "s"), Live: live, Volume: vol}, archive.All()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, mq.FormatID(r.ID, mq.IDBranded))
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("after SIGTERM the merge-read has %d records, want the %d acknowledged", len(got), len(ids))
	}
}

// TestUnixSocket: the API answers on <data>/serve.sock too, owner-only, and
// the socket is gone after shutdown.
func TestUnixSocket(t *testing.T) {
	e := start(t, Config{Token: testToken})
	q := queueName(t)
	path := e.srv.SocketPath()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: mode %v, want a socket with 0600", path, fi.Mode())
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	req := func(method, target, body string) (int, string) {
		r, _ := http.NewRequestWithContext(t.Context(), method, "http://serve"+target, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(r)
		if err != nil {
			t.Fatalf("%s %s over the socket: %v", method, target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := req("POST", "/v1/streams/"+q+"/s", `{"fields":{"a":"1"}}`); code != 200 {
		t.Fatalf("append over the socket: %d %s", code, b)
	}
	if code, b := req("GET", "/v1/streams/"+q+"/s", ""); code != 200 || !strings.Contains(b, `"fields":{"a":"1"}`) {
		t.Fatalf("read over the socket: %d %s", code, b)
	}
	client.CloseIdleConnections()
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after shutdown: %v, want it gone", err)
	}
}

// mustRef returns the StreamRef of stream s of queue q, failing the test if
// the names are not valid.
func mustRef(t testing.TB, q, s string) names.StreamRef {
	t.Helper()
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		t.Fatalf("stream %s/%s: %v", q, s, err)
	}
	return ref
}

// mustQueue returns queue name q checked, failing the test if it is not
// valid.
func mustQueue(t testing.TB, q string) names.Queue {
	t.Helper()
	qq, err := names.ParseQueue(q)
	if err != nil {
		t.Fatalf("queue %s: %v", q, err)
	}
	return qq
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
