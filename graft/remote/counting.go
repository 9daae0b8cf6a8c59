package remote

import (
	"context"
	"sync/atomic"
)

// Counts are the requests a CountingStore has passed on, by kind.
type Counts struct {
	PutIfAbsent, Put, Get, GetRange, List, Delete int64
}

// Total returns the sum of all counts.
func (c Counts) Total() int64 {
	return c.PutIfAbsent + c.Put + c.Get + c.GetRange + c.List + c.Delete
}

// CountingStore wraps a Store and counts the calls of each kind: for
// metrics, and for tests and benchmarks that prove request costs.
type CountingStore struct {
	Store
	putIfAbsent, put, get, getRange, list, del atomic.Int64
}

// NewCountingStore wraps s.
func NewCountingStore(s Store) *CountingStore { return &CountingStore{Store: s} }

// Counts returns the counts so far.
func (c *CountingStore) Counts() Counts {
	return Counts{PutIfAbsent: c.putIfAbsent.Load(), Put: c.put.Load(), Get: c.get.Load(),
		GetRange: c.getRange.Load(), List: c.list.Load(), Delete: c.del.Load()}
}

// Reset sets every count to zero.
func (c *CountingStore) Reset() {
	for _, v := range []*atomic.Int64{&c.putIfAbsent, &c.put, &c.get, &c.getRange, &c.list, &c.del} {
		v.Store(0)
	}
}

// PutIfAbsent implements Store.
func (c *CountingStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	c.putIfAbsent.Add(1)
	return c.Store.PutIfAbsent(ctx, key, data)
}

// Put implements Store.
func (c *CountingStore) Put(ctx context.Context, key string, data []byte) error {
	c.put.Add(1)
	return c.Store.Put(ctx, key, data)
}

// Get implements Store.
func (c *CountingStore) Get(ctx context.Context, key string) ([]byte, error) {
	c.get.Add(1)
	return c.Store.Get(ctx, key)
}

// GetRange implements Store.
func (c *CountingStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.getRange.Add(1)
	return c.Store.GetRange(ctx, key, off, n)
}

// List implements Store.
func (c *CountingStore) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	c.list.Add(1)
	return c.Store.List(ctx, prefix, limit)
}

// Delete implements Store.
func (c *CountingStore) Delete(ctx context.Context, key string) error {
	c.del.Add(1)
	return c.Store.Delete(ctx, key)
}
