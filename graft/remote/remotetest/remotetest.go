// Package remotetest holds the contract tests every remote.Store keeps: the
// drivers' stores run them (graft/remote's tests), and so does a wrapper
// around a store (graft/remote/sealed), which must keep every promise of
// the store it wraps. Each test works on keys of its own, under a prefix no
// other test of the package uses.
package remotetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/echostore/echostore/graft/remote"
)

// Contract checks s against remote.Store's contract: a create that exists
// already fails with ErrExists naming the key, Put replaces, GetRange reads
// within and past the end, List is ordered, prefixed and limited, Delete is
// idempotent and a deleted key is ErrNotFound, and a bad key is ErrBadKey
// on every method. s must be empty.
func Contract(t *testing.T, s remote.Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.PutIfAbsent(ctx, "a/b/one", []byte("first")); err != nil {
		t.Fatal(err)
	}
	err := s.PutIfAbsent(ctx, "a/b/one", []byte("second"))
	if !errors.Is(err, remote.ErrExists) {
		t.Fatalf("second create: %v, want remote.ErrExists", err)
	}
	if !strings.Contains(err.Error(), "a/b/one") {
		t.Errorf("error does not name the key: %v", err)
	}
	if got, err := s.Get(ctx, "a/b/one"); err != nil || string(got) != "first" {
		t.Fatalf("Get = %q, %v; want the first content", got, err)
	}
	if err := s.Put(ctx, "a/b/two", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "a/b/two", []byte("abcdefghij")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRange(ctx, "a/b/two", 3, 4); err != nil || string(got) != "defg" {
		t.Fatalf("GetRange = %q, %v", got, err)
	}
	if got, err := s.GetRange(ctx, "a/b/two", 8, 10); err != nil || string(got) != "ij" {
		t.Fatalf("GetRange past the end = %q, %v", got, err)
	}
	if got, err := s.GetRange(ctx, "a/b/two", 20, 10); err != nil || len(got) != 0 {
		t.Fatalf("GetRange beyond the end = %q, %v", got, err)
	}
	for _, k := range []string{"a/b-c", "a/b/three", "a/bz", "b/x", "a/b/c/deep"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	list := func(prefix string, limit int) string {
		objs, err := s.List(ctx, prefix, limit)
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range objs {
			ks = append(ks, o.Key)
		}
		return strings.Join(ks, " ")
	}
	if got, want := list("a/", 0), "a/b-c a/b/c/deep a/b/one a/b/three a/b/two a/bz"; got != want {
		t.Errorf("List(a/) = %q, want %q", got, want)
	}
	if got, want := list("a/b", 2), "a/b-c a/b/c/deep"; got != want {
		t.Errorf("List(a/b, 2) = %q, want %q", got, want)
	}
	if got, want := list("a/b/t", 0), "a/b/three a/b/two"; got != want {
		t.Errorf("List(a/b/t) = %q, want %q", got, want)
	}
	if got := list("nothing/", 0); got != "" {
		t.Errorf("List(nothing/) = %q", got)
	}
	if err := s.Delete(ctx, "a/b/two"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a/b/two"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if _, err := s.Get(ctx, "a/b/two"); !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if _, err := s.GetRange(ctx, "a/b/two", 0, 1); !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("GetRange after Delete: %v", err)
	}
	for _, k := range []string{"../escape", "/abs", "a//b", "a\\b"} {
		if err := s.PutIfAbsent(ctx, k, []byte("x")); !errors.Is(err, remote.ErrBadKey) {
			t.Errorf("PutIfAbsent(%q) = %v", k, err)
		}
		if err := s.Put(ctx, k, []byte("x")); !errors.Is(err, remote.ErrBadKey) {
			t.Errorf("Put(%q) = %v", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, remote.ErrBadKey) {
			t.Errorf("Get(%q) = %v", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, remote.ErrBadKey) {
			t.Errorf("Delete(%q) = %v", k, err)
		}
	}
	if _, err := s.List(ctx, "../", 0); !errors.Is(err, remote.ErrBadKey) {
		t.Errorf("List(../) = %v", err)
	}
}

// ConcurrentCreates races goroutines creating the same keys on s: exactly
// one create of each key wins, and the key holds the winner's bytes.
func ConcurrentCreates(t *testing.T, s remote.Store) {
	t.Helper()
	const writers, keys = 4, 100
	ctx := context.Background()
	var wg sync.WaitGroup
	won := make([][]int, writers)
	errs := make(chan error, writers)
	start := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range keys {
				err := s.PutIfAbsent(ctx, fmt.Sprintf("race/%04d", i), []byte(fmt.Sprint("writer ", w)))
				switch {
				case err == nil:
					won[w] = append(won[w], i)
				case !errors.Is(err, remote.ErrExists):
					errs <- err
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	winner := map[int]int{}
	for w, ks := range won {
		for _, i := range ks {
			if prev, ok := winner[i]; ok {
				t.Fatalf("key %d won by writers %d and %d", i, prev, w)
			}
			winner[i] = w
		}
	}
	if len(winner) != keys {
		t.Fatalf("%d keys won, want %d", len(winner), keys)
	}
	for i, w := range winner {
		got, err := s.Get(ctx, fmt.Sprintf("race/%04d", i))
		if err != nil || !bytes.Equal(got, []byte(fmt.Sprint("writer ", w))) {
			t.Fatalf("key %d holds %q (%v), its winner was writer %d", i, got, err, w)
		}
	}
}
