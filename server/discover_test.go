package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
)

// TestDiscover: serve cycles an archived stream registered in Redis that it
// neither declared nor met through the API, with the defaults' window; one
// whose seam cache says it is folded elsewhere (no volume here) is left
// alone.
func TestDiscover(t *testing.T) {
	on := true
	e := start(t, Config{Discover: &on, Defaults: StreamConfig{Keep: 2}})
	q := queueName(t)
	c, err := mq.Connect(t.Context(), mq.Options{URL: e.cfg.Redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	batch := make([][]mq.Field, 7)
	for i := range batch {
		batch[i] = []mq.Field{{Name: "n", Value: "x"}}
	}
	if _, err := c.AppendBatch(t.Context(), mustRef(t, q, "found"), batch); err != nil {
		t.Fatal(err)
	}
	if err := archive.RegisterArchived(t.Context(), c, mustRef(t, q, "found")); err != nil {
		t.Fatal(err)
	}
	ids, err := c.AppendBatch(t.Context(), mustRef(t, q, "elsewhere"), batch)
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.PutArchived(t.Context(), c, mustRef(t, q, "elsewhere"), archive.Seam{W: ids[0].XID(), LSN: 1}); err != nil {
		t.Fatal(err)
	}

	e.srv.Beat(t.Context())
	var st struct {
		Archived int64 `json:"archived"`
		Live     int64 `json:"live"`
	}
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/found/archive", ""), &st); err != nil {
		t.Fatal(err)
	}
	if st.Archived != 5 || st.Live != 2 {
		t.Fatalf("discovered stream after a beat: %+v, want 5 archived, 2 live", st)
	}
	if _, known := e.srv.lookup(mustRef(t, q, "elsewhere")); known {
		t.Fatal("a stream folded by another data dir was adopted")
	}
	if n, err := c.Len(t.Context(), mustRef(t, q, "elsewhere")); err != nil || n != 7 {
		t.Fatalf("the other node's stream: %d entries (%v), want 7 untouched", n, err)
	}
}

// TestCheckpointMetric: an async job is not durable until serve's
// checkpointer runs; each checkpoint is one sample of
// echostore_accept_checkpoint_seconds.
func TestCheckpointMetric(t *testing.T) {
	e := start(t, Config{CheckpointEvery: time.Hour}) // the test checkpoints by hand
	q := queueName(t)
	if got := metric(t, e, "echostore_accept_checkpoint_seconds_count"); got != "0" {
		t.Fatalf("checkpoints before any job: %q", got)
	}
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=async", `{"payload":{"n":1}}`)
	if st, _ := e.srv.node.OutboxStats(); st.Appended == st.Durable {
		t.Fatalf("the async job is durable before serve's checkpoint: %+v", st)
	}
	e.srv.checkpoint(t.Context())
	if got := metric(t, e, "echostore_accept_checkpoint_seconds_count"); got != "1" {
		t.Fatalf("checkpoints after one: %q", got)
	}
}
