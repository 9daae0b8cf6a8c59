package mq

import (
	"context"
	"sync"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// A Client sends at most one append chunk per stream at a time: each stream
// key has a send slot. Ids are minted by whoever holds the slot, so a
// client's chunks reach the server in mint order and never collide with one
// another (re-mints happen only against other clients). Concurrent single
// Appends queue their records; whoever takes the slot sends everything
// queued (up to a chunk) in one script call, so they share round trips.

// streamSlot is the send slot and queue of one stream key. A client keeps
// the slot of every stream it appended to (a few dozen bytes each).
type streamSlot struct {
	sem   chan struct{} // holds a token while a chunk of this key is in flight
	mu    sync.Mutex
	queue []*appendReq // single appends waiting for a chunk, in arrival order
}

// appendReq is one single Append waiting in a queue.
type appendReq struct {
	fields []Field
	id     brand.ID
	err    error
	done   chan struct{} // closed once id or err is set
}

// slot returns the send slot of key.
func (c *Client) slot(key string) *streamSlot {
	if s, ok := c.slots.Load(key); ok {
		return s.(*streamSlot)
	}
	s, _ := c.slots.LoadOrStore(key, &streamSlot{sem: make(chan struct{}, 1)})
	return s.(*streamSlot)
}

// acquire takes the slot, or fails when ctx ends first.
func (s *streamSlot) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *streamSlot) release() { <-s.sem }

// appendOne appends one checked record through the queue of ref's key.
func (c *Client) appendOne(ctx context.Context, ref names.StreamRef, fields []Field) (brand.ID, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := c.slot(StreamKey(ref))
	req := &appendReq{fields: fields, done: make(chan struct{})}
	s.mu.Lock()
	s.queue = append(s.queue, req)
	s.mu.Unlock()
	// cancelled withdraws req if it has not been sent, or else waits for
	// the outcome of the chunk it is in.
	cancelled := func() (brand.ID, error) {
		s.mu.Lock()
		for i, r := range s.queue {
			if r == req {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				s.mu.Unlock()
				return 0, ctx.Err()
			}
		}
		s.mu.Unlock()
		<-req.done
		return req.id, req.err
	}
	for {
		select {
		case <-req.done:
			return req.id, req.err
		case s.sem <- struct{}{}:
			if ctx.Err() != nil { // select picks at random among ready cases
				s.release()
				return cancelled()
			}
			c.sendQueued(ctx, ref, s)
			s.release()
		case <-ctx.Done():
			return cancelled()
		}
	}
}

// sendQueued sends up to one chunk of the queue of ref's key; the caller holds the
// slot. The chunk carries other callers' records, so one caller's
// cancellation does not cancel it.
func (c *Client) sendQueued(ctx context.Context, ref names.StreamRef, s *streamSlot) {
	s.mu.Lock()
	n, bytes := 0, 0
	for n < len(s.queue) && n < c.opts.ChunkRecords {
		b := api.FieldsSize(s.queue[n].fields) + 16*len(s.queue[n].fields)
		if n > 0 && bytes+b > c.opts.ChunkBytes {
			break
		}
		bytes += b
		n++
	}
	take := append([]*appendReq(nil), s.queue[:n]...)
	s.queue = append(s.queue[:0], s.queue[n:]...)
	s.mu.Unlock()
	if n == 0 {
		return
	}
	recs := make([][]Field, n)
	for i, r := range take {
		recs[i] = r.fields
	}
	ids, err := c.appendChunk(context.WithoutCancel(ctx), ref, recs)
	for i, r := range take {
		if err != nil {
			r.err = err
		} else {
			r.id = ids[i]
		}
		close(r.done)
	}
}
