package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
)

// TestStrictBodies: a body with trailing data after its JSON value, a
// duplicate key anywhere (a second "payload", a repeated name inside the
// payload or inside "fields"), a lone surrogate escape or invalid UTF-8 in
// a string is refused with 400 on every route that takes a JSON body, and
// nothing is enqueued or appended.
func TestStrictBodies(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	refused := func(path, body, wantCode string) {
		t.Helper()
		code, b := e.do("POST", path, "", strings.NewReader(body))
		e.wantError(code, b, http.StatusBadRequest, wantCode)
	}
	jobs := "/v1/queues/" + q + "/jobs"
	for _, body := range []string{
		`{"payload":1} x`,
		`{"payload":1}{"payload":2}`,
		`{"payload":1}` + "\n" + `{"payload":2}`,
		`{"payload":1,"payload":2}`,
		`{"payload":{"a":1,"a":2}}`,
		`{"payload":"\ud800"}`,
		`{"payload":"\udc00\ud800"}`,
		"{\"payload\":\"\xff\"}",
		`{"Payload":1}`,
		`{"payload":1,"id":"JOB_0000000000001","id":"JOB_0000000000002"}`,
	} {
		refused(jobs, body, CodeBadRequest)
		refused(jobs+"?mode=sync", body, CodeBadRequest)
	}
	for _, body := range []string{
		`{"entries":["1-1"]} x`,
		`{"entries":["1-1"],"entries":["1-2"]}`,
		`{"entries":["\ud800"]}`,
	} {
		refused("/v1/queues/"+q+"/ack", body, CodeBadRequest)
	}
	for _, body := range []string{
		`{"all":true} []`,
		`{"all":true,"all":false}`,
		`{"all":true,"limit":1,"limit":2}`,
	} {
		refused("/v1/queues/"+q+"/redrive", body, CodeBadRequest)
	}
	for _, body := range []string{
		`{"fields":{"a":"b"}} x`,
		`{"fields":{"a":"b"},"fields":{"a":"c"}}`,
		`{"fields":{"a":"b","a":"c"}}`,
		`{"fields":{"a":"\ud800"}}`,
		`{"fields":{"\udfff":"b"}}`,
		"{\"fields\":{\"a\":\"\xc3\"}}",
		`{"fields":{"a":"b"}}` + "\n" + `{"fields":{"a":"b"}} {}`,
	} {
		refused("/v1/streams/"+q+"/s", body, CodeInvalidInput)
	}
	if _, ok := e.srv.lookup(mustRef(t, q, "s")); ok {
		t.Fatal("a refused append declared its stream")
	}
	if n := e.srv.outboxLen(); n != 0 {
		t.Fatalf("refused enqueues left %d intents in the outbox", n)
	}
}

// TestEnqueueIDs: an explicit id that is zero or not a JOB id is 400 (not
// replaced by a minted one); the same id with the same payload is an
// idempotent success, async or sync, while the job waits in the outbox and
// after it is dispatched; the same id with another payload is 409
// id_conflict, and only the first payload is ever claimed.
func TestEnqueueIDs(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	jobs := "/v1/queues/" + q + "/jobs"
	for _, id := range []string{"JOB_0000000000000", "JOB_", "EVT_0000000000001", "0", "JOB_zzzzzzzzzzzzz", "JOB_00000000000001"} {
		code, b := e.do("POST", jobs, "", strings.NewReader(`{"payload":1,"id":"`+id+`"}`))
		e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
	}
	var first struct{ ID string }
	if err := json.Unmarshal(e.must("POST", jobs, `{"payload":{"n":1}}`), &first); err != nil {
		t.Fatal(err)
	}
	same := `{"payload":{"n":1},"id":"` + first.ID + `"}`
	other := `{"payload":{"n":2},"id":"` + first.ID + `"}`
	// Pending in the outbox (async: not committed yet, or committed and not
	// yet dispatched): a retry is a success, another payload a conflict.
	var again struct{ ID string }
	if err := json.Unmarshal(e.must("POST", jobs, same), &again); err != nil || again.ID != first.ID {
		t.Fatalf("retry with the same payload: %+v (%v)", again, err)
	}
	code, b := e.do("POST", jobs, "", strings.NewReader(other))
	e.wantError(code, b, http.StatusConflict, CodeIDConflict)
	code, b = e.do("POST", "/v1/queues/"+q+"x/jobs", "", strings.NewReader(same))
	e.wantError(code, b, http.StatusConflict, CodeIDConflict)
	e.must("POST", jobs+"?mode=sync", same)
	// Dispatched: the job stream remembers the id and its payload.
	if err := e.srv.node.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := e.stopAndConnect()
	ds, err := c.Claim(t.Context(), mustQueue(t, q), "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Fields[0].Value != `{"n":1}` {
		t.Fatalf("claimed %+v, want the one job with the first payload", ds)
	}
	e2 := start(t, Config{Redis: e.cfg.Redis, Data: e.cfg.Data})
	code, b = e2.do("POST", jobs+"?mode=sync", "", strings.NewReader(other))
	e2.wantError(code, b, http.StatusConflict, CodeIDConflict)
	code, b = e2.do("POST", jobs, "", strings.NewReader(other))
	e2.wantError(code, b, http.StatusConflict, CodeIDConflict)
	e2.must("POST", jobs+"?mode=sync", same)
	e2.must("POST", jobs, same)
	c = e2.stopAndConnect()
	if ds, err := c.Claim(t.Context(), mustQueue(t, q), "w", 10); err != nil || len(ds) != 0 {
		t.Fatalf("after the retries: claimed %+v (%v), want nothing new", ds, err)
	}
}

// TestClaimRedriveCreateNothing: a claim, a stalled claim and a redrive on
// a queue that has no jobs answer empty and create no key (they do not get
// around max_queues); consumer names are bounded (length, UTF-8, control
// characters) with 400 before anything is sent.
func TestClaimRedriveCreateNothing(t *testing.T) {
	e := start(t, Config{MaxQueues: 1})
	for i := range 5 {
		q := fmt.Sprintf("%s%d", queueName(t), i)
		if b := e.must("POST", "/v1/queues/"+q+"/claim?consumer=w", ""); string(b) != `{"jobs":[]}`+"\n" {
			t.Fatalf("claim on an unknown queue: %s", b)
		}
		e.must("POST", "/v1/queues/"+q+"/claim?stalled=1ms", "")
		if b := e.must("POST", "/v1/queues/"+q+"/redrive", `{"all":true}`); string(b) != `{"entries":[],"redriven":0}`+"\n" {
			t.Fatalf("redrive on an unknown queue: %s", b)
		}
		e.must("POST", "/v1/queues/"+q+"/redrive", `{"entries":["1-1"]}`)
		e.must("POST", "/v1/queues/"+q+"/ack", `{"entries":["1-1"]}`)
		e.must("GET", "/v1/queues/"+q+"/dead", "")
		e.must("GET", "/v1/queues/"+q, "")
		for _, key := range []string{mq.JobsKey(mustQueue(t, q)), mq.DeadKey(mustQueue(t, q)), mq.DelayedKey(mustQueue(t, q)), mq.JobIDsKey(mustQueue(t, q))} {
			if keyExists(t, e.cfg.Redis, key) {
				t.Fatalf("%s exists after reads of an unknown queue", key)
			}
		}
	}
	q := queueName(t)
	for _, consumer := range []string{strings.Repeat("w", 129), "\xff", "a\x00b", "a\nb", " ", "a b\x7f"} {
		code, b := e.do("POST", "/v1/queues/"+q+"/claim?consumer="+url.QueryEscape(consumer), "", nil)
		e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
	}
	e.must("POST", "/v1/queues/"+q+"/claim?consumer="+strings.Repeat("w", 128), "")
	e.must("POST", "/v1/queues/"+q+"/claim?consumer="+url.QueryEscape("worker-1.host:42/é"), "")
}

// TestBadEntryIDs: ack, redrive and dead with an entry id that is not a
// stream id answer 400 naming it, never 500, and the body carries no script
// SHA or Redis error text.
func TestBadEntryIDs(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":1}`)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/queues/" + q + "/ack", `{"entries":["nope"]}`},
		{"POST", "/v1/queues/" + q + "/ack", `{"entries":["1-1","1-x"]}`},
		{"POST", "/v1/queues/" + q + "/ack", `{"entries":[""]}`},
		{"POST", "/v1/queues/" + q + "/ack", `{"entries":["-1"]}`},
		{"POST", "/v1/queues/" + q + "/ack", `{"entries":["99999999999999999999-1"]}`},
		{"POST", "/v1/queues/" + q + "/redrive", `{"entries":["nope"]}`},
		{"POST", "/v1/queues/" + q + "/redrive", `{"entries":["+"]}`},
		{"GET", "/v1/queues/" + q + "/dead?after=nope", ""},
		{"GET", "/v1/queues/" + q + "/dead?after=1-1-1", ""},
	} {
		code, b := e.do(tc.method, tc.path, "", strings.NewReader(tc.body))
		e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
		for _, leak := range []string{"ERR", "f_", "script", "Invalid stream ID"} {
			if strings.Contains(string(b), leak) {
				t.Fatalf("%s %s %s: %s leaks %q", tc.method, tc.path, tc.body, b, leak)
			}
		}
	}
}

// TestSlowBody: a body that does not arrive within body_timeout is answered
// 408 timeout, not 500; one cut short is 400. The client sends half its body and then nothing:
// the server's read deadline ends the wait, so the test waits for the
// answer (bounded by a generous deadline of its own), not for a clock.
func TestSlowBody(t *testing.T) {
	e := start(t, Config{BodyTimeout: 200 * time.Millisecond})
	q := queueName(t)
	for _, path := range []string{"/v1/queues/" + q + "/jobs", "/v1/streams/" + q + "/s", "/v1/queues/" + q + "/ack"} {
		conn, err := net.Dial("tcp", e.srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"pay", path, e.srv.Addr())
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var eb struct {
			Error struct{ Code, Message string }
		}
		err = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusRequestTimeout || eb.Error.Code != CodeTimeout {
			t.Fatalf("%s: %d %+v (%v), want 408 %s", path, resp.StatusCode, eb, err, CodeTimeout)
		}
	}
	// A body cut short (the client closes its side) is the client's
	// mistake too: 400, not a 503 of an EOF taken for Redis's.
	conn, err := net.Dial("tcp", e.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /v1/queues/%s/jobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"pay", q, e.srv.Addr())
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a body cut short: %d, want 400", resp.StatusCode)
	}
	if n := e.srv.outboxLen(); n != 0 {
		t.Fatalf("a cut-off body left %d intents", n)
	}
}

// TestRedisUnavailable: with Redis down (connection refused) or loading its
// data (LOADING), every route that needs it answers 503 unavailable with
// Retry-After, not 500.
func TestRedisUnavailable(t *testing.T) {
	rd, err := testserver.StartRedis(t.Context(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { rd.Stop() })
	proxy := testserver.StartScriptProxy(t, rd.Addr)
	e := start(t, Config{Redis: "redis://" + proxy.Addr})
	q := queueName(t)
	appendN(e, q, "s", 0, 3)
	want503 := func(method, path, body string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, e.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb struct {
			Error struct{ Code, Message string }
		}
		json.NewDecoder(resp.Body).Decode(&eb)
		if resp.StatusCode != http.StatusServiceUnavailable || eb.Error.Code != CodeUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: %d %+v Retry-After %q, want 503 %s with Retry-After", method, path, resp.StatusCode, eb, resp.Header.Get("Retry-After"), CodeUnavailable)
		}
	}
	// LOADING answers to script calls (append retries them, then gives up).
	proxy.AnswerLoading(1000)
	want503("POST", "/v1/streams/"+q+"/s", `{"fields":{"a":"b"}}`)
	want503("POST", "/v1/queues/"+q+"/claim", "")
	want503("POST", "/v1/queues/"+q+"/ack", `{"entries":["1-1"]}`)
	want503("POST", "/v1/queues/"+q+"/redrive", `{"all":true}`)
	proxy.AnswerLoading(0)
	// Redis down.
	if err := rd.Kill(); err != nil {
		t.Fatal(err)
	}
	want503("POST", "/v1/streams/"+q+"/s", `{"fields":{"a":"b"}}`)
	want503("GET", "/v1/streams/"+q+"/s?live_only=true", "")
	want503("GET", "/v1/streams/"+q+"/s/archive", "")
	want503("POST", "/v1/streams/"+q+"/s/cycle?keep=1", "")
	want503("GET", "/v1/queues/"+q, "")
	want503("POST", "/v1/queues/"+q+"/claim", "")
	want503("POST", "/v1/queues/"+q+"/ack", `{"entries":["1-1"]}`)
	want503("GET", "/v1/queues/"+q+"/dead", "")
	want503("POST", "/v1/queues/"+q+"/redrive", `{"all":true}`)
	want503("POST", "/v1/queues/"+q+"/jobs", `{"payload":2,"id":"JOB_0000000000001"}`)
}

// TestCycleKeepBelowOne: keep=0 (which would fold and trim nothing) and a
// negative keep are 400, not a cycle that does nothing.
func TestCycleKeepBelowOne(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	appendN(e, q, "s", 0, 3)
	for _, keep := range []string{"0", "-1", "00", "+0"} {
		code, b := e.do("POST", "/v1/streams/"+q+"/s/cycle?keep="+keep, "", nil)
		e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
		if !strings.Contains(string(b), "1 or more") {
			t.Fatalf("keep=%s: %s; want the reason", keep, b)
		}
	}
	e.must("POST", "/v1/streams/"+q+"/s/cycle?max_age=1h", "")
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=1", "")
}

// TestCycleRefusesBody: a cycle takes its parameters in the query; a JSON
// body ({"keep":5}) is refused with 400 before anything is done, instead
// of running the cycle with the defaults.
func TestCycleRefusesBody(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	appendN(e, q, "s", 0, 8)
	code, b := e.do("POST", "/v1/streams/"+q+"/s/cycle", "", strings.NewReader(`{"keep":5}`))
	e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
	if !strings.Contains(string(b), "query") {
		t.Fatalf("cycle with a body: %s; want the reason", b)
	}
	if keyExists(t, e.cfg.Redis, "emq:{"+q+"}:stream:s:archived") {
		t.Fatal("a refused cycle wrote the seam cache")
	}
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=5", "")
}

// keyExists reports whether key exists in the Redis at redisURL.
func keyExists(t *testing.T, redisURL, key string) bool {
	t.Helper()
	return redisDo(t, redisURL, "EXISTS", key) == ":1"
}

// redisDo sends one command to the Redis at redisURL over a connection of
// its own and returns the first line of the reply.
func redisDo(t *testing.T, redisURL string, args ...string) string {
	t.Helper()
	conn := redisConn(t, redisURL, args...)
	defer conn.Close()
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimRight(line, "\r\n")
}

// redisConn dials the Redis at redisURL and sends one command.
func redisConn(t *testing.T, redisURL string, args ...string) net.Conn {
	t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(conn, "$%d\r\n%s\r\n", len(a), a)
	}
	return conn
}
