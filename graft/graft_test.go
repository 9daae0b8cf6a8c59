package graft

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/names"
)

// openMem opens a store on an in-memory filesystem.
func openMem(t testing.TB, fs vfs.FS, opts Options) *Store {
	t.Helper()
	if fs == nil {
		fs = vfs.NewMem()
	}
	opts.FS = fs
	s, err := Open(context.Background(), "graft", opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func mustCreate(t testing.TB, s *Store, name string) *Volume {
	t.Helper()
	v, err := s.CreateVolume(context.Background(), volName(name))
	if err != nil {
		t.Fatalf("CreateVolume(%q): %v", name, err)
	}
	return v
}

// commitPages commits pages (index → bytes) and meta in one transaction.
func commitPages(t testing.TB, v *Volume, pages map[uint64][]byte, meta map[string]string) uint64 {
	t.Helper()
	txn := v.Begin()
	for i, p := range pages {
		var err error
		if i >= ArchiveBase {
			err = txn.PutArchive(i-ArchiveBase, p)
		} else {
			err = txn.Put(i, p)
		}
		if err != nil {
			t.Fatalf("Put(%d): %v", i, err)
		}
	}
	for k, val := range meta {
		if err := txn.SetMeta(k, []byte(val)); err != nil {
			t.Fatalf("SetMeta(%q): %v", k, err)
		}
	}
	lsn, err := txn.Commit(context.Background(), Unsynced)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return lsn
}

func mustGet(t testing.TB, snap *Snapshot, i uint64) []byte {
	t.Helper()
	b, err := snap.Get(context.Background(), i)
	if err != nil {
		t.Fatalf("Get(%d) at %d: %v", i, snap.LSN(), err)
	}
	return b
}

func TestCommitAndRead(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{})
	v := mustCreate(t, s, "vol.a")
	if got := v.Info(); got.LocalLSN != 0 || got.Pages != 0 || got.Bytes != 0 {
		t.Fatalf("fresh Info = %+v", got)
	}
	l1 := commitPages(t, v, map[uint64][]byte{1: []byte("one"), 7: []byte("seven"), ArchiveBase + 3: []byte("arc")},
		map[string]string{"w": "10"})
	l2 := commitPages(t, v, map[uint64][]byte{1: []byte("uno!")}, map[string]string{"w": "20", "seq": "4"})
	if l1 != 1 || l2 != 2 {
		t.Fatalf("LSNs %d, %d; want 1, 2", l1, l2)
	}
	info := v.Info()
	if info.LocalLSN != 2 || info.Pages != 3 || info.Bytes != uint64(len("uno!")+len("seven")+len("arc")) {
		t.Fatalf("Info = %+v", info)
	}
	s1, err := v.SnapshotAt(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := mustGet(t, s1, 1); string(got) != "one" {
		t.Errorf("page 1 at 1 = %q", got)
	}
	if got := mustGet(t, s2, 1); string(got) != "uno!" {
		t.Errorf("page 1 at 2 = %q", got)
	}
	if got := mustGet(t, s2, ArchiveBase+3); string(got) != "arc" {
		t.Errorf("archive page = %q", got)
	}
	if _, err := s2.Get(ctx, 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("absent page: %v", err)
	}
	for _, c := range []struct {
		snap *Snapshot
		key  string
		want string
	}{{s1, "w", "10"}, {s2, "w", "20"}, {s2, "seq", "4"}} {
		got, err := c.snap.Meta(ctx, c.key)
		if err != nil || string(got) != c.want {
			t.Errorf("Meta(%q) at %d = %q, %v; want %q", c.key, c.snap.LSN(), got, err, c.want)
		}
	}
	if _, err := s1.Meta(ctx, "seq"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Meta(seq) at 1: %v", err)
	}
	if _, err := v.SnapshotAt(ctx, 3); !errors.Is(err, ErrFutureLSN) {
		t.Errorf("SnapshotAt(3): %v", err)
	}
	cs, err := v.Commits(ctx, 1, 10)
	if err != nil || len(cs) != 2 || cs[0].LSN != 1 || len(cs[0].Pages) != 3 || cs[1].Pages[0] != 1 || len(cs[1].Meta) != 2 {
		t.Fatalf("Commits = %+v, %v", cs, err)
	}
	s1.Close()
	s2.Close()

	// Reopen: everything persists, LSNs continue.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Options{})
	defer s.Close()
	v, err = s.Volume(ctx, volName("vol.a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Info(); got.LocalLSN != info.LocalLSN || got.Pages != info.Pages || got.Bytes != info.Bytes {
		t.Fatalf("Info after reopen = %+v, want %+v", got, info)
	}
	if l := commitPages(t, v, map[uint64][]byte{9: nil}, nil); l != 3 {
		t.Fatalf("LSN after reopen = %d", l)
	}
	if got := v.Info(); got.Pages != 4 {
		t.Fatalf("empty page counts as present: %+v", got)
	}
	vols, err := s.Volumes(ctx)
	if err != nil || len(vols) != 1 || vols[0].Volume.String() != "vol.a" || vols[0].LocalLSN != 3 {
		t.Fatalf("Volumes = %+v, %v", vols, err)
	}
	if _, err := s.Volume(ctx, volName("nope")); !errors.Is(err, ErrVolumeNotFound) {
		t.Errorf("Volume(nope): %v", err)
	}
	if _, err := names.ParseVolume("a:b"); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("ParseVolume(a:b): %v", err)
	}
	if _, err := s.CreateVolume(ctx, names.Volume{}); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("CreateVolume(no name): %v", err)
	}
}

func TestRejectsBeforeSideEffects(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, Options{MaxPageSize: 100, MaxMetaValueSize: 10})
	defer s.Close()
	v := mustCreate(t, s, "v")
	txn := v.Begin()
	var pr *PageRangeError
	if err := txn.Put(ArchiveBase, []byte("x")); !errors.As(err, &pr) || !errors.Is(err, ErrPageRange) || pr.Archive {
		t.Errorf("Put(ArchiveBase): %v", err)
	}
	if err := txn.Put(ArchiveBase+5, []byte("x")); !errors.Is(err, ErrPageRange) {
		t.Errorf("Put(ArchiveBase+5): %v", err)
	}
	if err := txn.PutArchive(MaxArchiveOffset+1, []byte("x")); !errors.As(err, &pr) || !pr.Archive {
		t.Errorf("PutArchive(overflow): %v", err)
	}
	var tl *PageTooLargeError
	if err := txn.Put(1, make([]byte, 101)); !errors.As(err, &tl) || tl.Max != 100 || !errors.Is(err, ErrPageTooLarge) {
		t.Errorf("Put(101 bytes): %v", err)
	}
	if err := txn.SetMeta(string(make([]byte, MaxMetaKeyLen+1)), nil); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("SetMeta(long key): %v", err)
	}
	if err := txn.SetMeta("k", make([]byte, 11)); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("SetMeta(long value): %v", err)
	}
	// Nothing was staged: the commit is empty.
	if _, err := txn.Commit(ctx, Synced); !errors.Is(err, ErrEmptyCommit) {
		t.Errorf("Commit after rejected puts: %v", err)
	}
	if _, err := txn.Commit(ctx, Synced); !errors.Is(err, ErrTxnDone) {
		t.Errorf("second Commit: %v", err)
	}
	if v.Head() != 0 {
		t.Errorf("head moved to %d", v.Head())
	}
	// Metadata alone is a commit; the edges of both ranges are writable.
	txn = v.Begin()
	if err := txn.SetMeta("", []byte("empty key")); err != nil {
		t.Fatal(err)
	}
	if lsn, err := txn.Commit(ctx, Synced); err != nil || lsn != 1 {
		t.Fatalf("meta-only commit: %d, %v", lsn, err)
	}
	lsn := commitPages(t, v, map[uint64][]byte{ArchiveBase - 1: []byte("b"), ArchiveBase: []byte("a0"), ^uint64(0): []byte("last")}, nil)
	snap, err := v.SnapshotAt(ctx, lsn)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var got []string
	it := snap.Scan(ctx, 0, ^uint64(0))
	for it.Next() {
		got = append(got, fmt.Sprintf("%d=%s", it.Index(), it.Value()))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("%d=b", ArchiveBase-1), fmt.Sprintf("%d=a0", ArchiveBase), fmt.Sprintf("%d=last", ^uint64(0))}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("scan = %v, want %v", got, want)
	}
}

func TestConflictRule(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, Options{})
	defer s.Close()
	v := mustCreate(t, s, "v")
	w := mustCreate(t, s, "w")
	a, b := v.Begin(), v.Begin()
	other := w.Begin()
	_ = a.Put(1, []byte("a"))
	_ = b.Put(2, []byte("b")) // a different page: still a conflict
	_ = other.Put(1, []byte("w"))
	if _, err := a.Commit(ctx, Synced); err != nil {
		t.Fatal(err)
	}
	_, err := b.Commit(ctx, Synced)
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || ce.Base != 0 || ce.Head != 1 || ce.Volume != "v" {
		t.Fatalf("b.Commit: %v", err)
	}
	// Commits on another volume never conflict.
	if lsn, err := other.Commit(ctx, Synced); err != nil || lsn != 1 {
		t.Fatalf("other volume: %d, %v", lsn, err)
	}
	snap, _ := v.Snapshot(ctx)
	defer snap.Close()
	if _, err := snap.Get(ctx, 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("loser's page visible: %v", err)
	}
	// A Txn begun after the winner commits on top of it.
	c := v.Begin()
	_ = c.Put(2, []byte("c"))
	if lsn, err := c.Commit(ctx, Synced); err != nil || lsn != 2 {
		t.Fatalf("c.Commit: %d, %v", lsn, err)
	}
}

func TestReadOnlyAndLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Open(ctx, dir+"/none", Options{ReadOnly: true}); !errors.Is(err, ErrNoStore) {
		t.Fatalf("read-only open of nothing: %v", err)
	}
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := mustCreate(t, s, "ro")
	commitPages(t, v, map[uint64][]byte{4: []byte("four")}, map[string]string{"k": "v"})
	if _, err := Open(ctx, dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open of a held dir: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(ctx, dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	v, err = ro.Volume(ctx, volName("ro"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, snap, 4); string(got) != "four" {
		t.Fatalf("read-only Get = %q", got)
	}
	_ = snap.Close()
	txn := v.Begin()
	if err := txn.Put(5, []byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put on a read-only store: %v", err)
	}
	if err := txn.SetMeta("k", nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SetMeta on a read-only store: %v", err)
	}
	if _, err := txn.Commit(ctx, Synced); !errors.Is(err, ErrReadOnly) && !errors.Is(err, ErrEmptyCommit) {
		t.Errorf("Commit on a read-only store: %v", err)
	}
	if _, err := v.GC(ctx); !errors.Is(err, ErrReadOnly) {
		t.Errorf("GC on a read-only store: %v", err)
	}
	if err := v.SetKeepFrom(ctx, 1); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SetKeepFrom on a read-only store: %v", err)
	}
	if _, err := ro.CreateVolume(ctx, volName("new")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("CreateVolume on a read-only store: %v", err)
	}
	if _, err := ro.CreateVolume(ctx, volName("ro")); err != nil { // exists: just opened
		t.Errorf("CreateVolume of an existing volume, read-only: %v", err)
	}
}
