package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
)

// Event is one server-sent event of /v1/events.
type Event struct {
	// Kind is the SSE event name: "cycle", "lsn" or "stalled".
	Kind string
	// Data is its JSON payload.
	Data json.RawMessage
}

// CycleEvent is the payload of a "cycle" event: one stream's cycle.
type CycleEvent struct {
	Queue     string `json:"queue"`
	Stream    string `json:"stream"`
	Archived  bool   `json:"archived"`
	Folded    int64  `json:"folded"`
	Trimmed   int64  `json:"trimmed"`
	Watermark any    `json:"watermark"` // "EVT_…" or null
	Archive   uint64 `json:"archive"`   // records in the archive
	Live      int64  `json:"live"`      // entries in the live stream (-1: unknown)
	Lag       int64  `json:"lag"`       // entries above W still live (-1: unknown)
	Volume    string `json:"volume,omitempty"`
	LSN       uint64 `json:"lsn"`
	// Path is the stream's API path: /v1/streams/{q}/{s}, or /v1/keys/{k}
	// with the key path-escaped.
	Path  string `json:"path"`
	Error string `json:"error,omitempty"`
	// Stalled counts the consumer groups the cycle found stalled (a
	// "stalled" event lists them).
	Stalled int `json:"stalled,omitempty"`
	// AppTrimmed: the cycle found entries above W removed by another
	// client before they were folded (archive.AppTrim).
	AppTrimmed *archive.AppTrim `json:"app_trimmed,omitempty"`
	// TooLarge names the entry the cycle could not archive because it is
	// larger than archive.MaxRecordBytes: the trim held below it.
	TooLarge []*archive.TooLargeError `json:"too_large,omitempty"`
}

// StalledEvent is the payload of a "stalled" event: the consumer groups
// that hold back a stream's trim past its max_live or max_hold, published
// by every archive cycle that finds one, and once with no groups by the
// first cycle after that finds none (the alarm clears).
type StalledEvent struct {
	Queue  string                 `json:"queue"`
	Stream string                 `json:"stream"`
	Policy string                 `json:"policy"` // stalled_groups: hold or archive
	Groups []archive.StalledGroup `json:"groups"`
}

// LSNEvent is the payload of an "lsn" event: a volume's LSNs and its
// replication lag.
type LSNEvent struct {
	Volume    string                   `json:"volume"`
	LocalLSN  uint64                   `json:"local_lsn"`
	RemoteLSN uint64                   `json:"remote_lsn"`
	Lag       echostore.ReplicationLag `json:"replication_lag"`
	Kind      string                   `json:"kind,omitempty"` // commit, push, or "" (the server's own reading)
}

// hub fans events out to subscribers. A subscriber that does not keep up
// loses its subscription (its channel is closed) rather than slow the
// publisher.
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]struct{}
	last map[string]Event // the newest event per key, replayed to a new subscriber
}

func newHub() *hub {
	return &hub{subs: map[chan Event]struct{}{}, last: map[string]Event{}}
}

// publish sends the event to every subscriber; key names what it is the
// newest state of ("" keeps none).
func (h *hub) publish(key, kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	e := Event{Kind: kind, Data: b}
	h.mu.Lock()
	defer h.mu.Unlock()
	if key != "" {
		h.last[key] = e
	}
	for ch := range h.subs {
		select {
		case ch <- e:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// publishChanged publishes the event unless it is the newest event of key
// already.
func (h *hub) publishChanged(key, kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	h.mu.Lock()
	last, ok := h.last[key]
	h.mu.Unlock()
	if ok && bytes.Equal(last.Data, b) {
		return
	}
	h.publish(key, kind, v)
}

// has reports whether key has a newest event.
func (h *hub) has(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.last[key]
	return ok
}

// subscribe returns a channel of the events from now on, preceded by the
// newest event of every key, and what ends the subscription.
func (h *hub) subscribe() (<-chan Event, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan Event, 256+len(h.last))
	for _, e := range h.last {
		ch <- e
	}
	h.subs[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// forget drops the newest event of key: a new subscriber is not told of
// it (a deleted stream).
func (h *hub) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.last, key)
}

// closeAll ends every subscription (shutdown).
func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

// handleEvents streams server-sent events: "cycle" and "lsn", each first
// the newest of every stream and volume, then as they happen.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) error {
	rc := http.NewResponseController(w)
	ch, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": echostore events\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return nil
		case <-keepalive.C:
			io.WriteString(w, ": keepalive\n\n")
		case e, ok := <-ch:
			if !ok {
				return nil // shut down, or too slow: the client reconnects
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Kind, strings.TrimSpace(string(e.Data)))
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
