package server

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

// connectedClients is Redis's INFO connected_clients at addr.
func connectedClients(t *testing.T, addr string) int {
	t.Helper()
	info, err := testserver.Do(context.Background(), addr, "INFO", "clients")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "connected_clients:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("connected_clients %q", v)
			}
			return n
		}
	}
	t.Fatalf("INFO clients has no connected_clients: %q", info)
	return 0
}

// TestLSNEventsWithoutLaneWatchers: archived streams cost the server no
// goroutine and no Redis connection each (200 streams in use add neither),
// and the commits and pushes of their volumes still become "lsn" events,
// with their kind.
func TestLSNEventsWithoutLaneWatchers(t *testing.T) {
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	e := start(t, Config{Redis: r.URL})
	q := queueName(t)
	appendN(e, q, "s0", 0, 1) // the HTTP connection and the pools are up
	g0, c0 := runtime.NumGoroutine(), connectedClients(t, r.Addr)
	const streams = 200
	for i := 1; i <= streams; i++ {
		appendN(e, q, fmt.Sprintf("s%d", i), 0, 3)
	}
	e.srv.mu.Lock()
	watched := len(e.srv.lsn.vols)
	e.srv.mu.Unlock()
	if watched != streams+1 {
		t.Fatalf("%d volumes watched, want %d (the streams appended to are archived)", watched, streams+1)
	}
	if g, c := runtime.NumGoroutine(), connectedClients(t, r.Addr); g > g0+20 || c > c0+4 {
		t.Fatalf("%d archived streams took the server from %d to %d goroutines and Redis from %d to %d clients",
			streams, g0, g, c0, c)
	}

	events, unsub := e.srv.hub.subscribe()
	defer unsub()
	vol := "archive." + q + ".s7"
	e.must("POST", "/v1/streams/"+q+"/s7/cycle?keep=1", "")
	name, err := names.ParseVolume(vol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.node.Push(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	seen := map[string]LSNEvent{}
	for seen["commit"].Volume == "" || seen["push"].Volume == "" {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the event subscription ended")
			}
			var l LSNEvent
			if ev.Kind != "lsn" || json.Unmarshal(ev.Data, &l) != nil || l.Volume != vol {
				continue
			}
			seen[l.Kind] = l
		case <-deadline:
			t.Fatalf("no lsn events of kind commit and push of %s within 30s: %+v", vol, seen)
		}
	}
	if c, p := seen["commit"], seen["push"]; c.LocalLSN == 0 || p.RemoteLSN == 0 || p.RemoteLSN != p.LocalLSN {
		t.Fatalf("lsn events: commit %+v, push %+v", c, p)
	}
}
