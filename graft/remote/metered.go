package remote

import (
	"context"
	"errors"
	"sync/atomic"
)

// Operations a MeteredStore counts (the op label of
// echostore_remote_requests_total).
const (
	OpPutIfAbsent = "put_if_absent"
	OpPut         = "put"
	OpGet         = "get"
	OpGetRange    = "get_range"
	OpList        = "list"
	OpDelete      = "delete"
)

// Results a MeteredStore counts (the result label).
const (
	ResultOK       = "ok"
	ResultNotFound = "not_found" // ErrNotFound: an answer, not a failure
	ResultExists   = "exists"    // ErrExists: a conditional create lost
	ResultError    = "error"     // any other error (unavailable, refused, canceled)
)

// Directions of MeteredStore's byte counts (the direction label of
// echostore_remote_bytes_total).
const (
	DirectionIn  = "in"  // bodies read from the store (Get, GetRange)
	DirectionOut = "out" // bodies written to the store (Put, PutIfAbsent)
)

var (
	meteredOps     = [...]string{OpPutIfAbsent, OpPut, OpGet, OpGetRange, OpList, OpDelete}
	meteredResults = [...]string{ResultOK, ResultNotFound, ResultExists, ResultError}
)

const (
	iPutIfAbsent = iota
	iPut
	iGet
	iGetRange
	iList
	iDelete
)

// RequestCount is how many requests of one operation had one result.
type RequestCount struct {
	Op, Result string
	N          int64
}

// Meter is what a MeteredStore has counted so far.
type Meter struct {
	// Requests has one entry per operation and result, in a fixed order
	// (every pair, zero counts included).
	Requests []RequestCount
	// BytesIn and BytesOut are the object bodies read and written.
	BytesIn, BytesOut int64
}

// Total returns the requests of every operation and result.
func (m Meter) Total() int64 {
	var n int64
	for _, r := range m.Requests {
		n += r.N
	}
	return n
}

// Of returns the requests of op with any result.
func (m Meter) Of(op string) int64 {
	var n int64
	for _, r := range m.Requests {
		if r.Op == op {
			n += r.N
		}
	}
	return n
}

// MeteredStore wraps the store a driver opened and counts what crosses its
// wire: requests by operation and result, and the bytes of the object
// bodies each way. It sits directly around the driver's store, under any
// wrapper that changes the bytes (an encrypting one), so that it counts
// what the object store bills. A call refused before any request (a bad
// key, ErrBadKey) is not counted. A List without a limit, or with one
// above ListPageSize, is counted as the requests its pages take (one per
// ListPageSize objects returned, at least one). It is safe for concurrent
// use; the counts only grow.
type MeteredStore struct {
	Store
	n       [len(meteredOps)][len(meteredResults)]atomic.Int64
	in, out atomic.Int64
}

// NewMeteredStore wraps s.
func NewMeteredStore(s Store) *MeteredStore { return &MeteredStore{Store: s} }

// Meter returns the counts so far.
func (m *MeteredStore) Meter() Meter {
	out := Meter{Requests: make([]RequestCount, 0, len(meteredOps)*len(meteredResults)),
		BytesIn: m.in.Load(), BytesOut: m.out.Load()}
	for i, op := range meteredOps {
		for j, res := range meteredResults {
			out.Requests = append(out.Requests, RequestCount{Op: op, Result: res, N: m.n[i][j].Load()})
		}
	}
	return out
}

// count records n requests of op with err's result; a bad key is no
// request.
func (m *MeteredStore) count(op int, n int64, err error) bool {
	j := 0
	switch {
	case err == nil:
	case errors.Is(err, ErrBadKey):
		return false
	case errors.Is(err, ErrNotFound):
		j = 1
	case errors.Is(err, ErrExists):
		j = 2
	default:
		j = 3
	}
	m.n[op][j].Add(n)
	return true
}

// PutIfAbsent implements Store.
func (m *MeteredStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := m.Store.PutIfAbsent(ctx, key, data)
	if m.count(iPutIfAbsent, 1, err) {
		m.out.Add(int64(len(data)))
	}
	return err
}

// Put implements Store.
func (m *MeteredStore) Put(ctx context.Context, key string, data []byte) error {
	err := m.Store.Put(ctx, key, data)
	if m.count(iPut, 1, err) {
		m.out.Add(int64(len(data)))
	}
	return err
}

// Get implements Store.
func (m *MeteredStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := m.Store.Get(ctx, key)
	m.count(iGet, 1, err)
	m.in.Add(int64(len(b)))
	return b, err
}

// GetRange implements Store.
func (m *MeteredStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := m.Store.GetRange(ctx, key, off, n)
	m.count(iGetRange, 1, err)
	m.in.Add(int64(len(b)))
	return b, err
}

// List implements Store.
func (m *MeteredStore) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	objs, err := m.Store.List(ctx, prefix, limit)
	pages := int64(1)
	if err == nil && len(objs) > ListPageSize {
		pages = int64((len(objs) + ListPageSize - 1) / ListPageSize)
	}
	m.count(iList, pages, err)
	return objs, err
}

// Delete implements Store.
func (m *MeteredStore) Delete(ctx context.Context, key string) error {
	err := m.Store.Delete(ctx, key)
	m.count(iDelete, 1, err)
	return err
}
