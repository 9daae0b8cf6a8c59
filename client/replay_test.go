package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/mq"
)

// TestClientReplay: Replay through a real serve copies the range and
// answers as Node.Replay does; a second one copies nothing; a conflict is
// ErrConflict.
func TestClientReplay(t *testing.T) {
	srv := startServe(t)
	c := client.Unix(srv.SocketPath(), client.Options{})
	defer c.Close()
	ctx := t.Context()
	qs := ref(t, "q", "orders")
	var recs [][]echostore.Field
	for i := range 20 {
		recs = append(recs, []echostore.Field{{Name: "n", Value: strconv.Itoa(i)}})
	}
	app, err := c.Append(ctx, qs, recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cycle(ctx, qs, echostore.CycleOptions{Window: echostore.Window{Keep: 3}}); err != nil {
		t.Fatal(err)
	}
	from, _ := mq.ParseID(app.IDs[2], false)
	to, _ := mq.ParseID(app.IDs[18], true)
	var progress []int64
	opts := echostore.ReplayOptions{From: from, To: to, Into: "orders-replay", Rate: 1e5,
		Progress: func(p echostore.ReplayProgress) { progress = append(progress, p.Copied) }}
	res, err := c.Replay(ctx, qs, opts)
	if err != nil || res.Copied != 17 || !res.Done || res.ResumedAfter != nil || *res.Last != to.String() {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if fmt.Sprint(progress) != "[17]" {
		t.Fatalf("progress %v, want one call per request", progress)
	}
	res, err = c.Replay(ctx, qs, opts)
	if err != nil || res.Copied != 0 || !res.Done || *res.ResumedAfter != to.String() {
		t.Fatalf("second replay: %+v, %v", res, err)
	}
	opts.Into = "emq:{q}:stream:orders"
	if _, err := c.Replay(ctx, qs, opts); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("replay into the source: %v, want ErrConflict", err)
	}
}

// TestClientReplayRequests: a replay is sent as requests of a bounded
// number of records, each resuming the one before; the result adds them
// up, Progress follows each, and Limit bounds the whole.
func TestClientReplayRequests(t *testing.T) {
	const total = 1234
	var (
		mu     sync.Mutex
		copied int
		limits []int
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Into  string
			Rate  float64
			Limit int
		}
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/streams/q/s/replay" || json.Unmarshal(body, &b) != nil || b.Into != "k" {
			http.Error(w, "bad request "+r.URL.Path+" "+string(body), 400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		limits = append(limits, b.Limit)
		n := min(b.Limit, total-copied)
		res := echostore.ReplayResult{Into: b.Into, Copied: int64(n), Done: copied+n == total}
		if copied > 0 {
			after := fmt.Sprintf("1-%d", copied)
			res.ResumedAfter = &after
		}
		copied += n
		if n > 0 {
			last := fmt.Sprintf("1-%d", copied)
			res.Last = &last
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	}))
	defer ts.Close()
	c, err := client.New(ts.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var progress []int64
	// Rate 100: requests of 500 records (five seconds' worth).
	res, err := c.Replay(t.Context(), ref(t, "q", "s"), echostore.ReplayOptions{Into: "k", Rate: 100,
		Progress: func(p echostore.ReplayProgress) { progress = append(progress, p.Copied) }})
	if err != nil || res.Copied != total || !res.Done || res.ResumedAfter != nil || *res.Last != "1-1234" {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	sent := func() string {
		mu.Lock()
		defer mu.Unlock()
		s := fmt.Sprint(limits)
		limits = nil
		return s
	}
	if s := sent(); s != "[500 500 500]" || fmt.Sprint(progress) != "[500 1000 1234]" {
		t.Fatalf("requests of %s records, progress %v", s, progress)
	}
	// Limit 700 over a target already holding them all: one request of 500
	// copies nothing and finishes the range.
	res, err = c.Replay(t.Context(), ref(t, "q", "s"), echostore.ReplayOptions{Into: "k", Rate: 100, Limit: 700})
	if s := sent(); err != nil || res.Copied != 0 || !res.Done || *res.ResumedAfter != "1-1234" || s != "[500]" {
		t.Fatalf("replay of a done range: %+v, %v, requests %s", res, err, s)
	}
	// Limit cuts a fresh one short: 500, then the 200 left of 700.
	mu.Lock()
	copied = 0
	mu.Unlock()
	res, err = c.Replay(t.Context(), ref(t, "q", "s"), echostore.ReplayOptions{Into: "k", Rate: 100, Limit: 700})
	if s := sent(); err != nil || res.Copied != 700 || res.Done || s != "[500 200]" {
		t.Fatalf("limited replay: %+v, %v, requests %s", res, err, s)
	}
	// Rate 1: requests of 5 records, so that a slow replay reports its
	// progress every five seconds or so, not once per 500 records.
	mu.Lock()
	copied = 0
	mu.Unlock()
	res, err = c.Replay(t.Context(), ref(t, "q", "s"), echostore.ReplayOptions{Into: "k", Rate: 1, Limit: 12})
	if s := sent(); err != nil || res.Copied != 12 || s != "[5 5 2]" {
		t.Fatalf("slow replay: %+v, %v, requests %s", res, err, s)
	}
}
