package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
)

// TestMaxStreams: streams new to the server beyond max_streams (configured
// ones count) are refused through the API with 403 too_many_streams, a
// message naming max_streams, and nothing written for them: no Redis key,
// no volume, nothing declared; streams already counted go on, discovery
// adopts nothing beyond the limit, and a delete frees a place.
func TestMaxStreams(t *testing.T) {
	q := queueName(t)
	on := true
	e := start(t, Config{MaxStreams: 3, Faults: true, Discover: &on, Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "configured"}}}}})
	ctx := t.Context()
	c, err := mq.Connect(ctx, mq.Options{URL: e.cfg.Redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	appendN(e, q, "a", 0, 3)
	code, b := e.do("POST", "/v1/streams/"+q+"/z/cycle?keep=x", "", nil) // refused: takes no place
	e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
	// A cycle of a stream that does not exist takes no place.
	code, b = e.do("POST", "/v1/streams/"+q+"/nothing/cycle?keep=1", "", nil)
	e.wantError(code, b, http.StatusNotFound, CodeNotFound)
	if _, err := c.AppendBatch(ctx, mustRef(t, q, "b"), [][]mq.Field{{{Name: "n", Value: "0"}}}); err != nil {
		t.Fatal(err)
	}
	e.must("POST", "/v1/streams/"+q+"/b/cycle?keep=1", "") // undeclared, but cycled: it counts

	refused := func(method, path, body string) {
		t.Helper()
		code, b := e.do(method, path, "", strings.NewReader(body))
		e.wantError(code, b, http.StatusForbidden, CodeTooManyStreams)
		if !strings.Contains(string(b), "max_streams") || !strings.Contains(string(b), "raise") {
			t.Fatalf("%s %s: %s; want a message naming max_streams and how to raise it", method, path, b)
		}
	}
	refused("POST", "/v1/streams/"+q+"/d", `{"fields":{"n":"1"}}`)
	refused("POST", "/v1/streams/"+q+"/d/fault", "")
	refused("POST", "/v1/streams/"+q+"/d/cycle?keep=1", "")
	if _, ok := e.srv.lookup(mustRef(t, q, "d")); ok {
		t.Fatal("a refused stream was declared")
	}
	if in, err := c.Info(ctx, mustRef(t, q, "d")); err != nil || in.Exists {
		t.Fatalf("a refused stream is in Redis (%v)", err)
	}
	if reg, err := archive.IsArchived(ctx, c, mustRef(t, q, "d")); err != nil || reg {
		t.Fatalf("a refused stream is registered as archived (%v)", err)
	}
	if _, err := e.srv.node.VolumeStatus(ctx, volName("archive."+q+".d")); !errors.Is(err, graft.ErrVolumeNotFound) {
		t.Fatalf("a refused stream has a volume: %v", err)
	}

	// Streams already counted go on.
	appendN(e, q, "a", 3, 1)
	appendN(e, q, "configured", 0, 1)
	e.must("POST", "/v1/streams/"+q+"/b/cycle?keep=1", "")

	// Discovery adopts nothing beyond the limit.
	if err := archive.RegisterArchived(ctx, c, mustRef(t, q, "registered")); err != nil {
		t.Fatal(err)
	}
	e.srv.Beat(ctx)
	if _, ok := e.srv.lookup(mustRef(t, q, "registered")); ok {
		t.Fatal("discovery adopted a stream beyond max_streams")
	}

	// A delete frees a place.
	e.must("DELETE", "/v1/streams/"+q+"/a?confirm="+DeleteConfirm, "")
	appendN(e, q, "d", 0, 1)
	refused("POST", "/v1/streams/"+q+"/e", `{"fields":{"n":"1"}}`)
}

// TestMaxStreamsConcurrent: first appends to new streams racing for the
// last places of max_streams: exactly as many as there are places land.
func TestMaxStreamsConcurrent(t *testing.T) {
	q := queueName(t)
	e := start(t, Config{MaxStreams: 5})
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", fmt.Sprintf("%s/v1/streams/%s/s%d", e.base, q, i),
				strings.NewReader(`{"fields":{"n":"1"}}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusForbidden:
			refused++
		}
	}
	if ok != 5 || refused != 15 {
		t.Fatalf("%d appended, %d refused (%v); want 5 and 15", ok, refused, codes)
	}
}

// TestMaxQueues: a job queue new to the server beyond max_queues is
// refused with 403 too_many_queues and a message naming max_queues, before
// anything is recorded; the queues already taken go on.
func TestMaxQueues(t *testing.T) {
	q := queueName(t)
	e := start(t, Config{MaxQueues: 2})
	e.must("POST", "/v1/queues/"+q+"a/jobs?mode=sync", `{"payload":{"n":1}}`)
	e.must("POST", "/v1/queues/"+q+"b/jobs?mode=async", `{"payload":{"n":1}}`)
	live := e.srv.outboxLen()
	code, b := e.do("POST", "/v1/queues/"+q+"c/jobs?mode=sync", "", strings.NewReader(`{"payload":{"n":1}}`))
	e.wantError(code, b, http.StatusForbidden, CodeTooManyQueues)
	if !strings.Contains(string(b), "max_queues") {
		t.Fatalf("%s; want a message naming max_queues", b)
	}
	if got := e.srv.outboxLen(); got > live {
		t.Fatalf("the refused job was recorded: %d intents live, had %d", got, live)
	}
	e.must("POST", "/v1/queues/"+q+"a/jobs?mode=sync", `{"payload":{"n":2}}`)
}
