package graft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/remote"
)

// storeKeys returns every key of the store with its value, as hex-free
// strings, split into the keys of volume vid (kinds 0x02..0x06 and its
// volume record) and the others.
func storeKeys(t testing.TB, s *Store, vid uint64, name string) (of []string, others map[string]string) {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	others = map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		mine := bytes.Equal(k, volumeKey(name)) ||
			(len(k) >= 9 && k[0] >= kindPage && k[0] <= kindPending && binary.BigEndian.Uint64(k[1:9]) == vid)
		if mine {
			of = append(of, fmt.Sprintf("%x", k))
		} else {
			others[string(k)] = string(it.Value())
		}
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return of, others
}

// TestDropVolume: the drop deletes every key of the volume (all kinds, the
// volume record) and not one byte of another volume's, durably; the old
// handle then fails with ErrVolumeDropped on every entry point; the name
// can be created again, empty, with a new id. Open snapshots and a pending
// remote commit refuse the drop and change nothing.
func TestDropVolume(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{})
	vols := map[string]*Volume{}
	for i, name := range []string{"a", "b", "c"} {
		v := mustCreate(t, s, name)
		vols[name] = v
		for round := 0; round < 3+i; round++ {
			commitPages(t, v, map[uint64][]byte{
				uint64(round): []byte(name + "page"), ArchiveBase + uint64(round): []byte(name + "arc"),
			}, map[string]string{"archive.seq": fmt.Sprint(round)})
		}
	}
	b := vols["b"]
	if _, err := b.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.SetKeepFrom(ctx, b.Head()); err != nil {
		t.Fatal(err)
	}
	ofB, before := storeKeys(t, s, b.id, "b")
	if len(ofB) < 10 {
		t.Fatalf("volume b has only %d keys before the drop", len(ofB))
	}

	// Refusals: an open snapshot, then a pending remote commit.
	snap, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DropVolume(ctx, volName("b")); !errors.Is(err, ErrVolumeInUse) {
		t.Fatalf("drop with a snapshot open: %v, want ErrVolumeInUse", err)
	}
	snap.Close()
	// A push that died between recording its commit and publishing it.
	if err := s.db.Set(pendingKey(b.id), []byte{recordV1, 'x'}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.noPending.Store(false)
	if err := s.DropVolume(ctx, volName("b")); !errors.Is(err, ErrPushPending) {
		t.Fatalf("drop with a pending push: %v, want ErrPushPending", err)
	}
	var refused *DropRefusedError
	if err := s.DropVolume(ctx, volName("b")); !errors.As(err, &refused) || !refused.Pending {
		t.Fatalf("drop with a pending push: %v, want *DropRefusedError{Pending}", err)
	}
	if sn, err := b.Snapshot(ctx); err != nil {
		t.Fatalf("the volume is unusable after a refused drop: %v", err)
	} else {
		sn.Close()
	}
	// Clear the pending commit the way a finished push does (a sync point).
	if err := b.SetSyncPoint(ctx, remoteSyncPoint(b)); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Pending(ctx); err != nil || p != nil {
		t.Fatalf("pending after the sync point: %q, %v", p, err)
	}
	ofB, before = storeKeys(t, s, b.id, "b")

	if err := s.DropVolume(ctx, volName("b")); err != nil {
		t.Fatalf("DropVolume: %v", err)
	}
	check := func(s *Store) {
		t.Helper()
		of, after := storeKeys(t, s, b.id, "b")
		if len(of) != 0 {
			t.Fatalf("keys of b left after the drop: %v", of)
		}
		if len(after) != len(before) {
			t.Fatalf("%d other keys after the drop, %d before", len(after), len(before))
		}
		for k, v := range before {
			if after[k] != v {
				t.Fatalf("key %x of another volume changed by the drop", k)
			}
		}
		if _, err := s.Volume(ctx, volName("b")); !errors.Is(err, ErrVolumeNotFound) {
			t.Fatalf("Volume(b) after the drop: %v, want ErrVolumeNotFound", err)
		}
		if err := s.DropVolume(ctx, volName("b")); !errors.Is(err, ErrVolumeNotFound) {
			t.Fatalf("second drop: %v, want ErrVolumeNotFound", err)
		}
	}
	check(s)

	// The old handle is dead at every entry point.
	txn := b.Begin()
	if err := txn.Put(9, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"commit":     func() error { _, err := txn.Commit(ctx, Synced); return err }(),
		"snapshot":   func() error { _, err := b.Snapshot(ctx); return err }(),
		"keep-from":  b.SetKeepFrom(ctx, 3),
		"gc":         func() error { _, err := b.GC(ctx); return err }(),
		"sync point": b.SetSyncPoint(ctx, remoteSyncPoint(b)),
	} {
		if !errors.Is(err, ErrVolumeDropped) {
			t.Errorf("%s on a dropped handle: %v, want ErrVolumeDropped", what, err)
		}
	}
	check(s)

	// Durable: the same after a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Options{})
	defer s.Close()
	check(s)

	// The name again: a new, empty volume with a new id.
	nb := mustCreate(t, s, "b")
	if nb.id == b.id || nb.Head() != 0 || nb.Info().Pages != 0 {
		t.Fatalf("re-created b: id %d (old %d), head %d, pages %d", nb.id, b.id, nb.Head(), nb.Info().Pages)
	}
	snap, err = nb.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.Get(ctx, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("page 0 of the re-created volume: %v, want ErrNotFound", err)
	}
	snap.Close()
}

// remoteSyncPoint is the sync point the volume holds now.
func remoteSyncPoint(v *Volume) (sp remote.SyncPoint) {
	st := v.state.Load()
	return remote.SyncPoint{Remote: st.RemoteLSN, Hash: st.RemoteHash, Local: st.SyncLocal}
}

// TestDropVolumeRacesWriters: commits and snapshots running beside the drop
// either complete before it or fail with ErrVolumeDropped (or, for the
// drop, ErrVolumeInUse while a snapshot is open: then it is retried); no key
// of the volume survives the drop.
func TestDropVolumeRacesWriters(t *testing.T) {
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		s := openMem(t, nil, Options{})
		v := mustCreate(t, s, "v")
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					txn := v.Begin()
					if err := txn.Put(uint64(w*1000+i), []byte("p")); err != nil {
						errs <- err
						return
					}
					_, err := txn.Commit(ctx, Unsynced)
					if errors.Is(err, ErrVolumeDropped) {
						return
					}
					var ce *ConflictError
					if err != nil && !errors.As(err, &ce) {
						errs <- err
						return
					}
					sn, err := v.Snapshot(ctx)
					if errors.Is(err, ErrVolumeDropped) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					sn.Close()
				}
			}()
		}
		for deadline := time.Now().Add(time.Minute); ; {
			err := s.DropVolume(ctx, volName("v"))
			if err == nil {
				break
			}
			if !errors.Is(err, ErrVolumeInUse) {
				t.Fatalf("round %d: DropVolume: %v", round, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: DropVolume still refused after a minute: %v", round, err)
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: writer: %v", round, err)
		}
		if of, _ := storeKeys(t, s, v.id, "v"); len(of) != 0 {
			t.Fatalf("round %d: %d keys of the dropped volume left", round, len(of))
		}
		s.Close()
	}
}
