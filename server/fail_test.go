package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
)

// TestFailRoute: a job claimed over HTTP and failed through POST
// /v1/queues/{q}/fail leaves the job stream for its next attempt (the
// answer gives retry_at); a fail repeated is harmless (failed: false); a
// fail by a consumer that does not hold the job is 404, and changes
// nothing.
func TestFailRoute(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":{"n":1}}`)
	waitJobStream(t, e, q, 1) // a sync enqueue answers once pushed; dispatch follows
	var claim echostore.ClaimResult
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=w1", ""), &claim); err != nil || len(claim.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", claim, err)
	}
	j := claim.Jobs[0]
	body := `{"entry":"` + j.EntryID + `","attempt":1,"reason":"boom"}`
	if code, b := e.do("POST", "/v1/queues/"+q+"/fail?consumer=w2", "", strings.NewReader(body)); code != 404 {
		t.Fatalf("fail by another consumer: %d %s, want 404", code, b)
	}
	var fr echostore.FailResult
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/fail?consumer=w1", body), &fr); err != nil ||
		!fr.Failed || fr.Dead || fr.Attempts != 1 || fr.RetryAt == nil {
		t.Fatalf("fail: %+v, %v", fr, err)
	}
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/fail?consumer=w1", body), &fr); err != nil || fr.Failed {
		t.Fatalf("fail repeated: %+v, %v", fr, err)
	}
	var st echostore.QueueStatus
	if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &st); err != nil || st.Delayed != 1 || st.Pending != 0 {
		t.Fatalf("queue status after the fail: %+v, %v; want the job delayed for its next attempt", st, err)
	}
}

// waitJobStream waits until queue q's job stream holds n jobs (the accept
// tier dispatches an acknowledged job in the background), failing the test
// after a minute.
func waitJobStream(t *testing.T, e *env, q string, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var st echostore.QueueStatus
		if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &st); err != nil {
			t.Fatal(err)
		}
		if st.Length >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job stream of %s holds %d jobs after a minute, want %d: %+v", q, st.Length, n, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
