package mq

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/echostore/echostore/names"
)

// StreamWindow is one stream and its declared window.
type StreamWindow struct {
	Ref    names.StreamRef
	Window Window
}

// Windows is a set of declared per-stream windows: what a driver (the
// trim-only retention here, the archive driver elsewhere) walks on each
// beat. It is safe for concurrent use; its zero value is empty and ready.
type Windows struct {
	mu sync.Mutex
	m  map[names.StreamRef]Window
}

// Set declares the window of stream s of queue q, replacing any before. The
// caller validates names and window first.
func (ws *Windows) Set(ref names.StreamRef, w Window) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[names.StreamRef]Window{}
	}
	ws.m[ref] = w
}

// Delete removes the window of stream s of queue q.
func (ws *Windows) Delete(ref names.StreamRef) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.m, ref)
}

// Sorted returns the declared windows in (queue, stream) order: a copy that
// later Sets and Deletes do not change.
func (ws *Windows) Sorted() []StreamWindow {
	ws.mu.Lock()
	out := make([]StreamWindow, 0, len(ws.m))
	for k, w := range ws.m {
		out = append(out, StreamWindow{Ref: k, Window: w})
	}
	ws.mu.Unlock()
	slices.SortFunc(out, func(a, b StreamWindow) int {
		return cmp.Or(strings.Compare(a.Ref.Queue().String(), b.Ref.Queue().String()), strings.Compare(a.Ref.Stream().String(), b.Ref.Stream().String()),
			strings.Compare(StreamKey(a.Ref), StreamKey(b.Ref)))
	})
	return out
}
