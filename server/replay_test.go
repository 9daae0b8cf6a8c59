package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
)

// redisAddr is the host:port of the env's Redis.
func (e *env) redisAddr() string {
	u, err := url.Parse(e.cfg.Redis)
	if err != nil {
		e.t.Fatal(err)
	}
	return u.Host
}

// TestReplayRoute: POST /v1/streams/{q}/{s}/replay copies an archived
// range under its Redis ids, a second one copies nothing, limit cuts one
// short; a foreign entry in the range and a refused target are 409, a bad
// body 400, and neither writes anything.
func TestReplayRoute(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	ids := appendN(e, q, "orders", 0, 30)
	e.must("POST", "/v1/streams/"+q+"/orders/cycle?keep=5", "")
	into := q + ".replay"
	body := func(from, to int, extra string) string {
		return `{"from":"` + ids[from] + `","to":"` + ids[to] + `","into":"` + into + `","rate":100000` + extra + `}`
	}
	var res ReplayOut
	decode := func(b []byte) {
		t.Helper()
		res = ReplayOut{}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
	}
	redisID := func(i int) string {
		id, err := brand.EVT.Parse(ids[i])
		if err != nil {
			t.Fatal(err)
		}
		return id.RedisID()
	}
	path := "/v1/streams/" + q + "/orders/replay"
	decode(e.must("POST", path, body(5, 27, `,"limit":10`)))
	if res.Copied != 10 || res.Done || res.Into != into || *res.Last != redisID(14) {
		t.Fatalf("limited replay: %+v", res)
	}
	decode(e.must("POST", path, body(5, 27, "")))
	if res.Copied != 13 || !res.Done || *res.ResumedAfter != redisID(14) || *res.Last != redisID(27) {
		t.Fatalf("resumed replay: %+v", res)
	}
	decode(e.must("POST", path, body(5, 27, "")))
	if res.Copied != 0 || !res.Done || res.Last != nil {
		t.Fatalf("repeated replay: %+v", res)
	}
	got, err := testserver.Do(t.Context(), e.redisAddr(), "XRANGE", into, "-", "+")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(got, "\nn\n"); n != 23 || !strings.HasPrefix(got, redisID(5)+"\nn\n5\nkind\ntest\n") {
		t.Fatalf("target holds %d records:\n%s", n, got)
	}

	// Refusals: 409 conflict, 400 bad_request; nothing written.
	if _, err := testserver.Do(t.Context(), e.redisAddr(), "XADD", q+".foreign", redisID(20), "x", "y"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"foreign entry", path, strings.Replace(body(5, 27, ""), into, q+".foreign", 1), 409, CodeConflict},
		{"the source", path, `{"into":"emq:{` + q + `}:stream:orders"}`, 409, CodeConflict},
		{"namespace", path, `{"into":"emq:` + q + `"}`, 409, CodeConflict},
		{"no into", path, `{}`, 400, CodeBadRequest},
		{"bad from", path, `{"into":"x","from":"yesterday"}`, 400, CodeBadRequest},
		{"from above to", path, `{"into":"x","from":"` + ids[3] + `","to":"` + ids[2] + `"}`, 400, CodeBadRequest},
		{"negative rate", path, `{"into":"x","rate":-1}`, 400, CodeBadRequest},
		{"negative limit", path, `{"into":"x","limit":-1}`, 400, CodeBadRequest},
		{"unknown member", path, `{"into":"x","speed":1}`, 400, CodeBadRequest},
		{"bad force", path + "?force=maybe", `{"into":"x"}`, 400, CodeBadRequest},
		{"bad name", "/v1/streams/" + q + "/a:b/replay", `{"into":"x"}`, 400, CodeInvalidName},
	} {
		code, b := e.do("POST", tc.path, "", strings.NewReader(tc.body))
		if code != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, b, tc.status, tc.code)
		}
	}
	if n, _ := testserver.Do(t.Context(), e.redisAddr(), "XLEN", q+".foreign"); n != "1" {
		t.Errorf("the conflicting target holds %s entries, want its 1", n)
	}
	if n, _ := testserver.Do(t.Context(), e.redisAddr(), "EXISTS", "x"); n != "0" {
		t.Errorf("a refused replay created its target")
	}
	// Forced, a stream of a queue in echostore's namespace.
	decode(e.must("POST", path+"?force=true", `{"into":"emq:{`+q+`}:stream:copy","limit":3}`))
	if res.Copied != 3 {
		t.Fatalf("forced replay: %+v", res)
	}
}

// TestKeyReplayRoute: POST /v1/keys/{k}/replay copies the archive and
// live tail of the stream at an application's key under its own Redis ids
// (from and to as Redis ids); the key itself and another archived key
// stream as the target are 409, and nothing is written.
func TestKeyReplayRoute(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	key, other, into := q+".orders", q+".other", q+".replay"
	var ids []string
	for i := range 12 {
		id, err := testserver.Do(t.Context(), e.redisAddr(), "XADD", key, "*", "n", strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i := range 2 {
		if _, err := testserver.Do(t.Context(), e.redisAddr(), "XADD", other, "*", "n", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	e.must("POST", "/v1/keys/"+url.PathEscape(key)+"/cycle?keep=3", "")
	e.must("POST", "/v1/keys/"+url.PathEscape(other)+"/cycle?keep=1", "")
	path := "/v1/keys/" + url.PathEscape(key) + "/replay"
	var res ReplayOut
	b := e.must("POST", path, `{"from":"`+ids[2]+`","to":"`+ids[10]+`","into":"`+into+`"}`)
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	if res.Copied != 9 || !res.Done || res.Last == nil || *res.Last != ids[10] {
		t.Fatalf("replay: %s, want 9 copied, the last %s", b, ids[10])
	}
	got, err := testserver.Do(t.Context(), e.redisAddr(), "XRANGE", into, "-", "+")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, ids[2]+"\nn\n2\n") || strings.Count(got, "\nn\n") != 9 {
		t.Fatalf("target holds:\n%s", got)
	}
	for _, tc := range []struct{ name, into string }{{"the source key", key}, {"an archived key stream", other}} {
		code, b := e.do("POST", path+"?force=true", "", strings.NewReader(`{"into":"`+tc.into+`"}`))
		if code != 409 || !strings.Contains(string(b), `"code":"`+CodeConflict+`"`) {
			t.Errorf("%s: %d %s, want 409 %s", tc.name, code, b, CodeConflict)
		}
	}
	for k, want := range map[string]string{key: "3", other: "1"} {
		if n, _ := testserver.Do(t.Context(), e.redisAddr(), "XLEN", k); n != want {
			t.Errorf("%s holds %s entries, want its %s live", k, n, want)
		}
	}
}

// FuzzReplayBody: any body either decodes to options the route may run
// (a target, from ≤ to, a rate and a limit not negative) or is a 400;
// nothing panics.
func FuzzReplayBody(f *testing.F) {
	for _, s := range []string{`{"into":"k"}`, `{"from":"0-1","to":"EVT_0000000000000","into":"k","rate":1.5,"limit":3}`,
		`{"into":""}`, `{"rate":-1}`, `{"from":"1-1","to":"0-1","into":"k"}`, `[]`, `{"into":"k","rate":1e999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b ReplayBody
		if err := jsonv2.Unmarshal(body, &b, jsonv2.RejectUnknownMembers(true)); err != nil {
			return
		}
		opts, err := replayOptions(b)
		if err != nil {
			if status, _ := classify(err); status != 400 {
				t.Fatalf("%q: %v is %d, want 400", body, err, status)
			}
			return
		}
		if opts.Into == "" || opts.From.Compare(opts.To) > 0 || opts.Rate < 0 || opts.Limit < 0 {
			t.Fatalf("%q: accepted %+v", body, opts)
		}
	})
}

// TestReplayStopsAtShutdown: serve's shutdown stops a replay in flight at
// its next batch (503, the records copied stay) instead of waiting for it,
// and Run returns cleanly.
func TestReplayStopsAtShutdown(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	appendN(e, q, "orders", 0, 500)
	e.must("POST", "/v1/streams/"+q+"/orders/cycle?keep=5", "")
	into := q + ".replay"
	type answer struct {
		code int
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		// 50 records a second: ten seconds for the range.
		req, _ := http.NewRequest("POST", e.base+"/v1/streams/"+q+"/orders/replay", strings.NewReader(`{"into":"`+into+`","rate":50}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{0, []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, b}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := testserver.Do(t.Context(), e.redisAddr(), "XLEN", into)
		if err != nil {
			t.Fatal(err)
		}
		if n != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replay wrote nothing in 30s")
		}
	}
	if err := e.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	a := <-done
	if a.code != http.StatusServiceUnavailable || !strings.Contains(string(a.body), `"code":"unavailable"`) || !strings.Contains(string(a.body), "run it again") {
		t.Fatalf("the replay stopped by the shutdown answered %d %s", a.code, a.body)
	}
}
