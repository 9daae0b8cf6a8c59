package mq

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"sync"
)

// errNegativeWindow is wrapped by Window.Validate.
var errNegativeWindow = errors.New("negative window limit")

// Validate reports whether w's limits are usable (neither is negative).
func (w Window) Validate() error {
	if w.Keep < 0 || w.MaxAge < 0 {
		return errNegativeWindow
	}
	return nil
}

// StreamWindow is one stream and its declared window.
type StreamWindow struct {
	Queue, Stream string
	Window        Window
}

// Windows is a set of declared per-stream windows: what a driver (the
// trim-only retention here, the archive driver elsewhere) walks on each
// beat. It is safe for concurrent use; its zero value is empty and ready.
type Windows struct {
	mu sync.Mutex
	m  map[[2]string]Window
}

// Set declares the window of stream s of queue q, replacing any before. The
// caller validates names and window first.
func (ws *Windows) Set(q, s string, w Window) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[[2]string]Window{}
	}
	ws.m[[2]string{q, s}] = w
}

// Delete removes the window of stream s of queue q.
func (ws *Windows) Delete(q, s string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.m, [2]string{q, s})
}

// Sorted returns the declared windows in (queue, stream) order: a copy that
// later Sets and Deletes do not change.
func (ws *Windows) Sorted() []StreamWindow {
	ws.mu.Lock()
	out := make([]StreamWindow, 0, len(ws.m))
	for k, w := range ws.m {
		out = append(out, StreamWindow{Queue: k[0], Stream: k[1], Window: w})
	}
	ws.mu.Unlock()
	slices.SortFunc(out, func(a, b StreamWindow) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Stream, b.Stream))
	})
	return out
}
