package remote

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestConcurrentCreates races goroutines creating the same keys: exactly
// one create of each key wins, and the key holds the winner's bytes.

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
