package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestSeriesSample: a sample's rates are what happened since the one
// before, over the time between them; the levels are Redis's memory, the
// live-equivalent estimate and the replication lag; GET /v1/series keeps
// them, and the samples older than 15 minutes fall off.
func TestSeriesSample(t *testing.T) {
	e := start(t, Config{SampleEvery: time.Hour}) // the test samples by hand
	q := queueName(t)
	t0 := time.Now()
	appendN(e, q, "s", 0, 4)
	e.srv.sample(t.Context(), t0)
	appendN(e, q, "s", 4, 20)
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=4", "")
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":1}`)
	p := e.srv.sample(t.Context(), t0.Add(2*time.Second))
	if p.Appends != 10 || p.Folded != 10 || p.Trimmed != 10 || p.Enqueued != 0.5 || p.SyncP50 <= 0 || p.SyncP99 < p.SyncP50 {
		t.Fatalf("sample: %+v, want 10 appends, folded and trimmed/s, 0.5 enqueued/s and a sync latency", p)
	}
	// 20 archived beside 4 live: the same history would take about 6× live.
	if p.RedisUsed <= 0 || p.LiveEquivalent != int64(float64(p.RedisUsed)*24/4) {
		t.Fatalf("memory: used %d, live equivalent %d, want 6× used", p.RedisUsed, p.LiveEquivalent)
	}
	var got Series
	if err := json.Unmarshal(e.must("GET", "/v1/series", ""), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Samples) != 2 || got.Samples[1] != p || got.EveryMs != time.Hour.Milliseconds() {
		t.Fatalf("series: %+v", got)
	}
	e.srv.sample(t.Context(), t0.Add(seriesSpan+time.Second))
	if err := json.Unmarshal(e.must("GET", "/v1/series", ""), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Samples) != 2 || got.Samples[0] != p {
		t.Fatalf("series after 15 minutes: %+v, want the first sample gone", got.Samples)
	}
}

// TestSeriesEvents: serve samples by itself every sample_every and pushes
// each sample and the queues' state over the event stream.
func TestSeriesEvents(t *testing.T) {
	e := start(t, Config{SampleEvery: 20 * time.Millisecond})
	q := queueName(t)
	putJob(t, e, q)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // the deadline of the wait below
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ev := sse{bufio.NewReader(resp.Body)}
	var gotSample, gotQueue bool
	for !gotSample || !gotQueue {
		name, data, err := ev.next()
		if err != nil {
			t.Fatalf("events ended before a sample and the queue's state: %v", err)
		}
		switch name {
		case "sample":
			var s Sample
			gotSample = json.Unmarshal([]byte(data), &s) == nil && s.T > 0 && s.RedisUsed > 0
		case "queues":
			var l QueueList
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				t.Fatal(err)
			}
			for _, st := range l.Queues {
				gotQueue = gotQueue || st.Queue == q && st.Lag == 1
			}
		}
	}
}
