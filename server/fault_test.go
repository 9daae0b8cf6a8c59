package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestFault: an armed fault makes the next cycle fold and then fail before
// its trim (the stream keeps every record live; the merge-read is whole);
// the cycle after it trims. On the beat as through the API; the route is
// behind the token.
func TestFault(t *testing.T) {
	e := start(t, Config{Token: testToken, Faults: true, Defaults: StreamConfig{Keep: 2}})
	q := queueName(t)
	path := "/v1/streams/" + q + "/s"
	code, b := e.do("POST", path+"/fault", "", nil)
	e.wantError(code, b, http.StatusUnauthorized, CodeUnauthorized)

	post := func(p string) (int, []byte) {
		return e.do("POST", p, testToken, strings.NewReader(`{"fields":{"k":"v"}}`))
	}
	for range 8 {
		if code, b := post(path); code != 200 {
			t.Fatalf("append: %d %s", code, b)
		}
	}
	_, want := e.do("GET", path, testToken, nil)
	status := func() map[string]any {
		t.Helper()
		code, b := e.do("GET", path+"/archive", testToken, nil)
		var m map[string]any
		if code != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("status: %d %s", code, b)
		}
		return m
	}

	// Through the API.
	if code, b := e.do("POST", path+"/fault", testToken, nil); code != 200 || !strings.Contains(string(b), `"armed":true`) {
		t.Fatalf("arm: %d %s", code, b)
	}
	code, b = e.do("POST", path+"/cycle?keep=2", testToken, nil)
	if code != http.StatusInternalServerError || !strings.Contains(string(b), "trim skipped") {
		t.Fatalf("faulted cycle: %d %s", code, b)
	}
	if st := status(); st["archived"] != 6.0 || st["live"] != 8.0 {
		t.Fatalf("after the faulted cycle: %v (want 6 archived, all 8 still live)", st)
	}
	if _, got := e.do("GET", path, testToken, nil); string(got) != string(want) {
		t.Fatalf("merge-read after the fault:\n%s\nwant\n%s", got, want)
	}
	if b := e.must("POST", path+"/cycle?keep=2", ""); !strings.HasPrefix(string(b), `{"folded":0,"trimmed":6,`) {
		t.Fatalf("cycle after the fault: %s", b)
	}

	// On the beat: the stream is declared (first append), the fault is
	// taken by the beat's cycle, and the next beat trims.
	for range 3 {
		post(path)
	}
	e.do("POST", path+"/fault", testToken, nil)
	e.srv.Beat(t.Context())
	if st := status(); st["archived"] != 9.0 || st["live"] != 5.0 {
		t.Fatalf("after the faulted beat: %v (want 9 archived, 5 live)", st)
	}
	e.srv.Beat(t.Context())
	if st := status(); st["archived"] != 9.0 || st["live"] != 2.0 {
		t.Fatalf("after the next beat: %v (want 9 archived, 2 live)", st)
	}
	if got := metric(t, e, `echostore_fold_errors_total{queue="`+q+`",stream="s"}`); got != "2" {
		t.Fatalf("fold errors %q, want 2", got)
	}
}

// metric returns the value of one sample of /metrics ("" if absent).
func metric(t *testing.T, e *env, sample string) string {
	t.Helper()
	_, b := e.do("GET", "/metrics", e.cfg.Token, nil)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, sample+" "); ok {
			return v
		}
	}
	return ""
}
