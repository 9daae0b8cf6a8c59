package graft

import (
	"errors"
	"strings"
	"testing"

	"github.com/echostore/echostore/names"
)

// TestSecurityBadInputBeforeAnySideEffect: volume names that could reach a
// remote key or a path, and pages or metadata over the limits, are refused
// with typed errors before anything is staged or written.
func TestSecurityBadInputBeforeAnySideEffect(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, t.TempDir(), Options{MaxPageSize: 1024, MaxMetaValueSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range []string{"", ".", "..", "../x", "a/b", "/abs", "a\x00b", "a b", "é", "\u0430", "a\u200bb",
		"x{y}", "x:y", strings.Repeat("v", names.MaxLen+1)} {
		// A bad name cannot be made into the names.Volume the store takes.
		if _, err := names.ParseVolume(n); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseVolume(%q) = %v, want names.ErrInvalid", n, err)
		}
	}
	if _, err := s.CreateVolume(ctx, names.Volume{}); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("CreateVolume(no name) = %v, want names.ErrInvalid", err)
	}
	if _, err := s.Volume(ctx, names.Volume{}); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("Volume(no name) = %v, want names.ErrInvalid", err)
	}
	if vs, err := s.Volumes(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("volumes after refused names: %v, %v", vs, err)
	}
	v, err := s.CreateVolume(ctx, volName("v"))
	if err != nil {
		t.Fatal(err)
	}
	tx := v.Begin()
	if err := tx.Put(0, make([]byte, 1025)); !errors.Is(err, ErrPageTooLarge) {
		t.Errorf("a page of 1025 bytes: %v", err)
	}
	if err := tx.Put(ArchiveBase, []byte("x")); !errors.Is(err, ErrPageRange) {
		t.Errorf("a business page at ArchiveBase: %v", err)
	}
	if err := tx.PutArchive(^uint64(0)-ArchiveBase+1, []byte("x")); !errors.Is(err, ErrPageRange) {
		t.Errorf("an archive page that wraps: %v", err)
	}
	if err := tx.SetMeta(strings.Repeat("k", MaxMetaKeyLen+1), nil); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("a metadata key of 256 bytes: %v", err)
	}
	if err := tx.SetMeta("k", make([]byte, 65)); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("a metadata value of 65 bytes: %v", err)
	}
	if _, err := tx.Commit(ctx, Synced); !errors.Is(err, ErrEmptyCommit) {
		t.Fatalf("the refused writes left something staged: %v", err)
	}
	if in := v.Info(); in.LocalLSN != 0 || in.Pages != 0 {
		t.Fatalf("volume after refused writes: %+v", in)
	}
}
