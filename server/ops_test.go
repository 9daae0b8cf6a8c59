package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/archive"
)

// TestDeleteRoute: DELETE /v1/streams/{q}/{s} refuses a bad name and a
// missing or wrong confirm with nothing deleted; confirmed, it deletes the
// stream and its archive (local and remote) and serve stops cycling it: a
// beat after it creates no volume. A declared stream used again through the
// API is declared again with its configured settings.
func TestDeleteRoute(t *testing.T) {
	q := queueName(t)
	e := start(t, Config{Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "s", Keep: 2, TrimAfter: "remote"}}}}})
	appendN(e, q, "s", 0, 10)
	e.srv.Beat(t.Context())
	path := "/v1/streams/" + q + "/s"
	code, b := e.do("DELETE", "/v1/streams/"+q+"/a:b?confirm="+DeleteConfirm, "", nil)
	e.wantError(code, b, 400, CodeInvalidName)
	code, b = e.do("DELETE", "/v1/streams/"+q+"/"+strings.Repeat("x", 300)+"?confirm="+DeleteConfirm, "", nil)
	e.wantError(code, b, 400, CodeInvalidName)
	code, b = e.do("DELETE", path, "", nil)
	e.wantError(code, b, 400, CodeBadRequest)
	code, b = e.do("DELETE", path+"?confirm=yes", "", nil)
	e.wantError(code, b, 400, CodeBadRequest)
	if _, ok := e.srv.lookup(mustRef(t, q, "s")); !ok {
		t.Fatal("a refused delete stopped cycling the stream")
	}
	if n := len(lines(e.must("GET", path, ""))); n != 10 {
		t.Fatalf("after refused deletes: %d records, want 10", n)
	}

	var out DeleteOut
	if err := json.Unmarshal(e.must("DELETE", path+"?confirm="+DeleteConfirm, ""), &out); err != nil {
		t.Fatal(err)
	}
	if !out.Deleted || out.Volume != "archive."+q+".s" || !out.VolumeDropped || out.LiveEntries != 2 || out.RemoteKept || out.RemoteObjects == 0 {
		t.Fatalf("delete: %+v", out)
	}
	if _, ok := e.srv.lookup(mustRef(t, q, "s")); ok {
		t.Fatal("the deleted stream is still declared")
	}
	e.srv.Beat(t.Context())
	code, b = e.do("GET", "/v1/volumes/"+out.Volume, "", nil)
	e.wantError(code, b, 404, CodeNotFound)
	if got := string(e.must("GET", path, "")); got != "" {
		t.Fatalf("read after the delete: %q", got)
	}

	// Used again through the API: declared with its configured settings.
	appendN(e, q, "s", 0, 5)
	if st, ok := e.srv.lookup(mustRef(t, q, "s")); !ok || st.window.Keep != 2 || st.trimAfter != archive.TrimAfterRemote {
		t.Fatalf("declared again as %+v (%v), want its configured settings", st, ok)
	}
	e.srv.Beat(t.Context())
	if n := len(lines(e.must("GET", path+"?live_only=1", ""))); n != 2 {
		t.Fatalf("live after the next beat: %d, want 2", n)
	}
}

// TestEnqueueRunAt: run_at makes a job due later (in the delayed set, not
// claimed); a malformed run_at is refused.
func TestEnqueueRunAt(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, mode := range []string{"async", "sync"} {
		var rc struct{ ID, Mode string }
		if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/jobs?mode="+mode, `{"payload":{"n":1},"run_at":"`+due+`"}`), &rc); err != nil {
			t.Fatal(err)
		}
		if rc.Mode != mode || !strings.HasPrefix(rc.ID, "JOB_") {
			t.Fatalf("receipt: %+v", rc)
		}
	}
	for _, bad := range []string{`"tomorrow"`, `"1969-12-31T00:00:00Z"`, `"2030-01-02 03:04:05"`, `5`} {
		code, b := e.do("POST", "/v1/queues/"+q+"/jobs", "", strings.NewReader(`{"payload":1,"run_at":`+bad+`}`))
		e.wantError(code, b, 400, CodeBadRequest)
	}
	c := e.stopAndConnect()
	st, err := c.Status(t.Context(), mustQueue(t, q))
	if err != nil {
		t.Fatal(err)
	}
	if st.Delayed != 2 || st.Length != 0 {
		t.Fatalf("queue status: %+v, want the two jobs delayed", st)
	}
	if jobs, err := c.Claim(t.Context(), mustQueue(t, q), "t", 10); err != nil || len(jobs) != 0 {
		t.Fatalf("claim before the run-at: %v %v", jobs, err)
	}
}

// TestCycleRetention: the cycle route applies retain_count/retain_age to
// that cycle ("dropped"); a stream declared with retain_count is held to it
// by every beat; bad values are refused.
func TestCycleRetention(t *testing.T) {
	q := queueName(t)
	e := start(t, Config{Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "r", Keep: 2, RetainCount: 4}}}}})
	appendN(e, q, "s", 0, 10)
	var out map[string]any
	if err := json.Unmarshal(e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2&retain_count=5", ""), &out); err != nil {
		t.Fatal(err)
	}
	if out["folded"] != 8.0 || out["dropped"] != 3.0 {
		t.Fatalf("cycle with retain_count=5: %v", out)
	}
	appendN(e, q, "s", 10, 2)
	out = nil
	if err := json.Unmarshal(e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", ""), &out); err != nil {
		t.Fatal(err)
	}
	if out["folded"] != 2.0 || out["dropped"] != nil {
		t.Fatalf("cycle without retention: %v", out)
	}
	for _, bad := range []string{"retain_count=-1", "retain_count=x", "retain_age=-1h", "retain_age=soon"} {
		code, b := e.do("POST", "/v1/streams/"+q+"/s/cycle?keep=2&"+bad, "", nil)
		e.wantError(code, b, 400, CodeBadRequest)
	}

	appendN(e, q, "r", 0, 10)
	e.srv.Beat(t.Context())
	appendN(e, q, "r", 10, 3)
	e.srv.Beat(t.Context())
	var st struct{ Archived, Low, Retained uint64 }
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/r/archive", ""), &st); err != nil {
		t.Fatal(err)
	}
	if st.Archived != 11 || st.Retained != 4 || st.Low != 7 {
		t.Fatalf("status after two beats with retain_count 4: %+v", st)
	}
	if n := len(lines(e.must("GET", "/v1/streams/"+q+"/r", ""))); n != 6 {
		t.Fatalf("merge-read: %d records, want 4 archived + 2 live", n)
	}
}

// TestConfigRetention: RetainCount and RetainAge per stream and in the
// defaults; refused on a stream that is not archived, or negative.
func TestConfigRetention(t *testing.T) {
	no := false
	c, err := checked(Config{
		Defaults: StreamConfig{RetainAge: 720 * time.Hour},
		Queues: []QueueConfig{{Name: "q", Streams: []StreamConfig{
			{Name: "a", RetainCount: 100},
			{Name: "b"},
			{Name: "c", Archived: &no},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.declared(mustRef(t, "q", "a"))
	b, _ := c.declared(mustRef(t, "q", "b"))
	cs, _ := c.declared(mustRef(t, "q", "c"))
	if a.retain != (archive.Retention{Count: 100}) || b.retain != (archive.Retention{MaxAge: 720 * time.Hour}) || !cs.retain.IsZero() {
		t.Fatalf("resolved: %+v %+v %+v", a.retain, b.retain, cs.retain)
	}
	for _, bad := range []StreamConfig{
		{Name: "s", Archived: &no, RetainCount: 3},
		{Name: "s", RetainAge: -time.Hour},
	} {
		_, err := checked(Config{Queues: []QueueConfig{{Name: "a", Streams: []StreamConfig{bad}}}})
		if err == nil || !strings.Contains(err.Error(), "retain") {
			t.Errorf("%+v: %v, want a refusal about retention", bad, err)
		}
	}
}
