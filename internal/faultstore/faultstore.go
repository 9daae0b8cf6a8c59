// Package faultstore wraps a remote.Store so that tests can make the object
// store fail, as a full bucket, an outage or a slow network would: every call
// first asks the current Fault, which may return an error (the call then
// never reaches the store) or block until the test lets it go on.
//
//	fs := faultstore.New(st)
//	fs.Set(faultstore.Writes(faultstore.ErrNoSpace)) // puts fail, reads work
//	…
//	fs.Set(nil) // healthy again
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/echostore/echostore/graft/remote"
)

// Op names a Store method.
type Op string

// The operations of a remote.Store.
const (
	PutIfAbsent Op = "PutIfAbsent"
	Put         Op = "Put"
	Get         Op = "Get"
	GetRange    Op = "GetRange"
	List        Op = "List"
	Delete      Op = "Delete"
)

// IsWrite reports whether op creates or removes an object.
func (op Op) IsWrite() bool { return op == PutIfAbsent || op == Put || op == Delete }

// Errors a Fault commonly returns.
var (
	// ErrNoSpace is a write refused by a full store; it wraps ENOSPC.
	ErrNoSpace = fmt.Errorf("faultstore: object store full: %w", syscall.ENOSPC)
	// ErrOutage is a call to a store that cannot be reached.
	ErrOutage = errors.New("faultstore: object store unreachable")
)

// Fault decides the fate of one call before it reaches the store: a non-nil
// error fails the call with that error. It may block (a slow store).
type Fault func(ctx context.Context, op Op, key string) error

// Writes fails every write (PutIfAbsent, Put, Delete) with err.
func Writes(err error) Fault {
	return func(_ context.Context, op Op, _ string) error {
		if op.IsWrite() {
			return err
		}
		return nil
	}
}

// All fails every call with err.
func All(err error) Fault {
	return func(context.Context, Op, string) error { return err }
}

// After lets the first n calls that f would fail through, then fails as f
// does: a store that breaks in the middle of a push.
func After(n int64, f Fault) Fault {
	var seen atomic.Int64
	return func(ctx context.Context, op Op, key string) error {
		if err := f(ctx, op, key); err != nil && seen.Add(1) > n {
			return err
		}
		return nil
	}
}

// Store is a remote.Store whose calls pass through the current Fault.
type Store struct {
	remote.Store
	fault  atomic.Pointer[Fault]
	failed atomic.Int64
}

// New wraps st; it is healthy until Set is given a Fault.
func New(st remote.Store) *Store { return &Store{Store: st} }

// Set makes f the fault of every later call; nil heals the store.
func (s *Store) Set(f Fault) {
	if f == nil {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&f)
}

// Failed returns how many calls a fault has failed so far.
func (s *Store) Failed() int64 { return s.failed.Load() }

func (s *Store) check(ctx context.Context, op Op, key string) error {
	f := s.fault.Load()
	if f == nil {
		return nil
	}
	if err := (*f)(ctx, op, key); err != nil {
		s.failed.Add(1)
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	return nil
}

// PutIfAbsent implements remote.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.check(ctx, PutIfAbsent, key); err != nil {
		return err
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

// Put implements remote.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := s.check(ctx, Put, key); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, data)
}

// Get implements remote.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.check(ctx, Get, key); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

// GetRange implements remote.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := s.check(ctx, GetRange, key); err != nil {
		return nil, err
	}
	return s.Store.GetRange(ctx, key, off, n)
}

// List implements remote.Store.
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]remote.ObjectInfo, error) {
	if err := s.check(ctx, List, prefix); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix, limit)
}

// Delete implements remote.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx, Delete, key); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}
