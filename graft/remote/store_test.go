package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCheckKey(t *testing.T) {
	good := []string{"a", "segments/v/0123", "volumes/x.y_z-1/log/ffff", "a/b c/d"}
	bad := []string{"", "/abs", "a//b", "a/", "../x", "a/../b", "a/./b", ".hidden", "a/.tmp-1",
		"a\\b", "a\x00b", "a\nb", string([]byte{0xff}), strings.Repeat("a", MaxKeyLen+1)}
	for _, k := range good {
		if err := CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v", k, err)
		}
	}
	for _, k := range bad {
		if err := CheckKey(k); !errors.Is(err, ErrBadKey) {
			t.Errorf("CheckKey(%q) = %v, want ErrBadKey", k, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cases := []struct {
		url  string
		want error
	}{
		{"ftp://x/y", ErrUnknownScheme},
		{"fileblob:///tmp", ErrUnknownScheme},
		{"/just/a/path", ErrBadURL},
		{"%zz", ErrBadURL},
		{"file://", ErrBadURL},
		{"file://" + dir + "/new?x=1", ErrBadURL},
		{"s3://", ErrBadURL},
		{"s3://bucket?prefix=../x/", ErrBadURL},
		{"s3://bucket?bogus=1", ErrBadURL},
	}
	for _, c := range cases {
		s, err := Open(ctx, c.url, testDrivers...)
		if !errors.Is(err, c.want) {
			t.Errorf("Open(%q) = %v, %v; want %v", c.url, s, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rejected file URL created its folder: %v", err)
	}
	rel := t.TempDir()
	t.Chdir(rel)
	s, err := Open(ctx, "file://./sub/remote", testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(fileStoreForTest).Dir(); got != filepath.Join(rel, "sub", "remote") {
		t.Errorf("relative file URL opened %s", got)
	}
}

func TestStoreContract(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if err := s.PutIfAbsent(ctx, "a/b/one", []byte("first")); err != nil {
			t.Fatal(err)
		}
		err := s.PutIfAbsent(ctx, "a/b/one", []byte("second"))
		if !errors.Is(err, ErrExists) {
			t.Fatalf("second create: %v, want ErrExists", err)
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
		if _, err := s.Get(ctx, "a/b/two"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after Delete: %v", err)
		}
		if _, err := s.GetRange(ctx, "a/b/two", 0, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetRange after Delete: %v", err)
		}
		for _, k := range []string{"../escape", "/abs", "a//b", "a\\b"} {
			if err := s.PutIfAbsent(ctx, k, []byte("x")); !errors.Is(err, ErrBadKey) {
				t.Errorf("PutIfAbsent(%q) = %v", k, err)
			}
			if err := s.Put(ctx, k, []byte("x")); !errors.Is(err, ErrBadKey) {
				t.Errorf("Put(%q) = %v", k, err)
			}
			if _, err := s.Get(ctx, k); !errors.Is(err, ErrBadKey) {
				t.Errorf("Get(%q) = %v", k, err)
			}
			if err := s.Delete(ctx, k); !errors.Is(err, ErrBadKey) {
				t.Errorf("Delete(%q) = %v", k, err)
			}
		}
		if _, err := s.List(ctx, "../", 0); !errors.Is(err, ErrBadKey) {
			t.Errorf("List(../) = %v", err)
		}
	})
}

// TestConcurrentCreates races goroutines creating the same keys: exactly
// one create of each key wins, and the key holds the winner's bytes.
func TestConcurrentCreates(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
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
					case !errors.Is(err, ErrExists):
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
	})
}

func TestFileStoreKeepsInsideRoot(t *testing.T) {
	parent := t.TempDir()
	s, err := openFileStore(filepath.Join(parent, "root"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"../outside", "a/../../outside", "/etc/x"} {
		if err := s.Put(ctx, k, []byte("x")); !errors.Is(err, ErrBadKey) {
			t.Errorf("Put(%q) = %v", k, err)
		}
	}
	entries, _ := os.ReadDir(parent) // the root itself is made by the first write
	if len(entries) > 1 || len(entries) == 1 && entries[0].Name() != "root" {
		t.Errorf("something was written beside the root: %v", entries)
	}
	// A key whose folder is another key's file is rejected, not reported as
	// existing.
	if err := s.Put(ctx, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "f/g", []byte("x")); err == nil || errors.Is(err, ErrExists) {
		t.Errorf("PutIfAbsent under a file: %v", err)
	}
	if err := s.Put(ctx, "d/e", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "d", []byte("x")); !errors.Is(err, ErrBadKey) {
		t.Errorf("PutIfAbsent on a folder: %v", err)
	}
}

// TestOpenPrefix: a prefix parameter places the remote inside a bucket.
func TestOpenPrefix(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "mem://?prefix=team/remote/", testDrivers...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(ctx, "", 0)
	if err != nil || len(objs) != 1 || objs[0].Key != "k" {
		t.Fatalf("List = %v, %v", objs, err)
	}
	for _, bad := range []string{"mem://?prefix=team", "mem://?prefix=/abs/", "mem://?prefix=a//b/"} {
		if _, err := Open(ctx, bad, testDrivers...); !errors.Is(err, ErrBadURL) {
			t.Errorf("Open(%q) = %v", bad, err)
		}
	}
}
