package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/mq"
)

// metricValue returns the value of the sample series (name{labels}) in a
// scrape, and whether it is there.
func metricValue(scrape, series string) (float64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(scrape)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// TestJobMetrics: enqueues by mode, claims, retries, dead letters, acks,
// redrives and the queue's state gauges reach /metrics, each counted once.
func TestJobMetrics(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	want := func(series string, v float64) {
		t.Helper()
		got, ok := metricValue(string(e.must("GET", "/metrics", "")), series)
		if !ok || got != v {
			t.Fatalf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	e.must("POST", "/v1/queues/"+q+"/jobs", `{"payload":{"n":1}}`)
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":{"n":2}}`)
	want(fmt.Sprintf(`echostore_jobs_enqueued_total{mode="async",queue=%q}`, q), 1)
	want(fmt.Sprintf(`echostore_jobs_enqueued_total{mode="sync",queue=%q}`, q), 1)
	want(`echostore_job_enqueue_seconds_count{mode="sync"}`, 1)
	want(fmt.Sprintf(`echostore_jobs_claimed_total{queue=%q}`, q), 0) // present at zero from the first operation

	// A job put on the job stream directly, claimed once and never acked,
	// then recovered by stalled claims until its attempts are used up.
	putJob(t, e, q)
	// Dispatch of the two enqueued jobs follows their acknowledgement:
	// wait (with a deadline) until the job stream holds all three.
	for deadline := time.Now().Add(20 * time.Second); ; {
		var st struct{ Length int64 }
		if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &st); err != nil {
			t.Fatal(err)
		}
		if st.Length == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job stream holds %d jobs, want 3", st.Length)
		}
		time.Sleep(5 * time.Millisecond)
	}
	type claim struct {
		Jobs []struct {
			Entry   string
			Attempt int
		}
		Dead int64
	}
	var first claim
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=w1", ""), &first); err != nil {
		t.Fatal(err)
	}
	if len(first.Jobs) != 1 || first.Jobs[0].Attempt != 1 {
		t.Fatalf("first claim: %+v", first)
	}
	claims, retries := 1, 0
	deadline := time.Now().Add(30 * time.Second)
	for dead := int64(0); dead == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter after %d claims", claims)
		}
		var r claim
		if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=w2&stalled=1ms", ""), &r); err != nil {
			t.Fatal(err)
		}
		for _, j := range r.Jobs {
			claims++
			if j.Attempt > 1 {
				retries++
			}
		}
		dead = r.Dead
	}
	want(fmt.Sprintf(`echostore_jobs_claimed_total{queue=%q}`, q), float64(claims))
	want(fmt.Sprintf(`echostore_jobs_retried_total{queue=%q}`, q), float64(retries))
	want(fmt.Sprintf(`echostore_jobs_dead_total{queue=%q}`, q), 1)
	want(fmt.Sprintf(`echostore_queue_jobs{queue=%q,state="dead"}`, q), 1)
	if retries == 0 {
		t.Fatal("no retried delivery counted")
	}

	// Redrive it, claim it and ack it: acked and the dispatch-to-ack latency.
	e.must("POST", "/v1/queues/"+q+"/redrive", `{"all":true}`)
	want(fmt.Sprintf(`echostore_jobs_redriven_total{queue=%q}`, q), 1)
	want(fmt.Sprintf(`echostore_queue_jobs{queue=%q,state="dead"}`, q), 0)
	var again claim
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=w3&count=10", ""), &again); err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, j := range again.Jobs {
		entries = append(entries, `"`+j.Entry+`"`)
	}
	if len(entries) == 0 {
		t.Fatal("nothing to claim after the redrive")
	}
	body := `{"entries":[` + entries[0]
	for _, en := range entries[1:] {
		body += "," + en
	}
	e.must("POST", "/v1/queues/"+q+"/ack", body+`]}`)
	want(fmt.Sprintf(`echostore_jobs_acked_total{queue=%q}`, q), float64(len(entries)))
	want(fmt.Sprintf(`echostore_job_latency_seconds_count{queue=%q}`, q), float64(len(entries)))
	var st struct{ Pending, Lag int64 }
	if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &st); err != nil {
		t.Fatal(err)
	}
	want(fmt.Sprintf(`echostore_queue_jobs{queue=%q,state="pending"}`, q), float64(st.Pending))
	want(fmt.Sprintf(`echostore_queue_jobs{queue=%q,state="ready"}`, q), float64(st.Lag))
}

// putJob puts one job on queue q's job stream directly, past the accept
// tier, so that it is there to claim at once.
func putJob(t *testing.T, e *env, q string) {
	t.Helper()
	c, err := mq.Connect(t.Context(), mq.Options{URL: e.cfg.Redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Enqueue(t.Context(), mustQueue(t, q), mq.Job{Fields: []mq.Field{{Name: "task", Value: "x"}}}); err != nil {
		t.Fatal(err)
	}
}

// TestQueueRoutes: the console's queue routes list the queues with their
// state and the outbox against K, list jobs by state, and delete dead
// letters only when confirmed.
func TestQueueRoutes(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	putJob(t, e, q)
	putJob(t, e, q)
	var claimed struct{ Jobs []struct{ Entry string } }
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=w1", ""), &claimed); err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	var list QueueList
	if err := json.Unmarshal(e.must("GET", "/v1/queues", ""), &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, st := range list.Queues {
		if st.Queue == q {
			found = st.Pending == 1 && st.Lag == 1
		}
	}
	if !found || list.Accept.K != 1000 {
		t.Fatalf("queues: %+v", list)
	}
	// Sync enqueues through the accept tier: the queue's row gains the
	// tier's side (its commits, nothing left pending, the sync latency).
	tq := queueName(t) + "-tier"
	for i := range 3 {
		if code, body := e.do("POST", "/v1/queues/"+tq+"/jobs?mode=sync", "", strings.NewReader(fmt.Sprintf(`{"payload":%d}`, i))); code != 200 {
			t.Fatalf("sync enqueue: %d %s", code, body)
		}
	}
	list = QueueList{}
	if err := json.Unmarshal(e.must("GET", "/v1/queues", ""), &list); err != nil {
		t.Fatal(err)
	}
	var row *QueueRow
	for i := range list.Queues {
		if list.Queues[i].Queue == tq {
			row = &list.Queues[i]
		}
	}
	if row == nil || row.Accept == nil {
		t.Fatalf("queue %s after 3 sync enqueues: no accept row in %+v", tq, list)
	}
	if row.Accept.Commits < 1 || row.Accept.Pending != 0 || row.Accept.SyncN != 3 ||
		row.Accept.SyncP50Ms <= 0 || row.Accept.SyncP99Ms < row.Accept.SyncP50Ms || sum(row.Accept.Batches) != 3 {
		t.Fatalf("queue %s after 3 sync enqueues: %+v", tq, row)
	}
	var pending struct {
		Jobs []struct {
			State, Entry, Consumer string
			IdleMs                 *int64 `json:"idle_ms"`
		}
	}
	if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q+"/jobs?state=pending", ""), &pending); err != nil {
		t.Fatal(err)
	}
	if len(pending.Jobs) != 1 || pending.Jobs[0].Entry != claimed.Jobs[0].Entry || pending.Jobs[0].Consumer != "w1" || pending.Jobs[0].IdleMs == nil {
		t.Fatalf("pending jobs: %+v", pending)
	}
	if b := e.must("GET", "/v1/queues/"+q+"/jobs?state=ready&limit=5", ""); !json.Valid(b) || !regexp.MustCompile(`"state":"ready"`).Match(b) {
		t.Fatalf("ready jobs: %s", b)
	}
	for _, bad := range []string{"?state=running", "", "?state=ready&limit=0", "?state=ready&limit=1001"} {
		code, b := e.do("GET", "/v1/queues/"+q+"/jobs"+bad, "", nil)
		e.wantError(code, b, 400, CodeBadRequest)
	}
	code, b := e.do("DELETE", "/v1/queues/"+q+"/dead", "", strings.NewReader(`{"entries":["0-1"]}`))
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("DELETE", "/v1/queues/"+q+"/dead?confirm="+DeleteDeadConfirm, "", strings.NewReader(`{"entries":["nope"]}`))
	e.wantError(code, b, 400, CodeBadRequest)
	if b := e.must("DELETE", "/v1/queues/"+q+"/dead?confirm="+DeleteDeadConfirm, `{"entries":["0-1"]}`); string(b) != `{"deleted":0}`+"\n" {
		t.Fatalf("delete of no dead letter: %s", b)
	}
}

// sum adds up ns.
func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}

// TestJobOutcomesServe: with job_outcomes, an ack through the API is a
// record of the queue's outcome stream, which serve reads and exports as
// any stream; a name that is not a stream name is refused at start.
func TestJobOutcomesServe(t *testing.T) {
	if _, err := checked(Config{JobOutcomes: "a/b"}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "job_outcomes") {
		t.Fatalf("job_outcomes a/b: %v, want ErrConfig naming job_outcomes", err)
	}
	e := start(t, Config{JobOutcomes: "outcomes"})
	q := queueName(t)
	putJob(t, e, q)
	var claimed struct{ Jobs []struct{ Entry string } }
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=w1", ""), &claimed); err != nil {
		t.Fatal(err)
	}
	if len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %+v", claimed)
	}
	e.must("POST", "/v1/queues/"+q+"/ack", `{"entries":["`+claimed.Jobs[0].Entry+`"]}`)
	read := string(e.must("GET", "/v1/streams/"+q+"/outcomes", ""))
	for _, want := range []string{`"outcome":"done"`, `"consumer":"w1"`, `"task":"x"`} {
		if !strings.Contains(read, want) {
			t.Fatalf("the outcome stream reads %s; want %s in it", read, want)
		}
	}
	var ex struct{ Rows int64 }
	if err := json.Unmarshal(e.must("POST", "/v1/streams/"+q+"/outcomes/export", ""), &ex); err != nil || ex.Rows != 1 {
		t.Fatalf("export of the outcome stream: %+v, %v", ex, err)
	}
}
