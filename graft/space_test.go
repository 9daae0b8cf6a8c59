package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSpaceBounded rewrites the same pages many times. Without GC the
// store keeps every version; after GC and a compaction its size is back near
// the live data, while a snapshot retained before GC still reads its bytes
// and a read below the horizon fails typed.
func TestSpaceBounded(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, Options{MemTableSize: 1 << 20})
	defer s.Close()
	v := mustCreate(t, s, "space")
	const pages, rounds, size = 64, 200, 1024
	page := func(r, i int) []byte { // incompressible, so sizes are honest
		b := make([]byte, size)
		var seed [32]byte
		seed[0], seed[1], seed[2] = byte(r), byte(r>>8), byte(i)
		_, _ = rand.NewChaCha8(seed).Read(b)
		return b
	}
	var retained *Snapshot
	for r := 0; r < rounds; r++ {
		txn := v.Begin()
		for i := 0; i < pages; i++ {
			if err := txn.Put(uint64(i), page(r, i)); err != nil {
				t.Fatal(err)
			}
		}
		_ = txn.SetMeta("round", []byte(fmt.Sprint(r)))
		if _, err := txn.Commit(ctx, Unsynced); err != nil {
			t.Fatal(err)
		}
		if r == rounds/2 {
			var err error
			if retained, err = v.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	live := uint64(pages * size)
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	before := tableBytes(s)
	if before < 50*live {
		t.Fatalf("before GC the store holds %d bytes, expected every version (≥ %d)", before, 50*live)
	}
	st, err := v.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Horizon != retained.LSN() {
		t.Fatalf("GC horizon %d, want the retained snapshot's LSN %d", st.Horizon, retained.LSN())
	}
	for i := 0; i < pages; i++ { // the retained snapshot reads what it read before GC
		if got := mustGet(t, retained, uint64(i)); !bytes.Equal(got, page(rounds/2, i)) {
			t.Fatalf("retained snapshot page %d changed after GC", i)
		}
	}
	if _, err := v.SnapshotAt(ctx, retained.LSN()-1); !errors.Is(err, ErrSnapshotGone) {
		t.Fatalf("read below the horizon: %v", err)
	}
	_ = retained.Close()
	if st, err = v.GC(ctx); err != nil || st.Horizon != rounds {
		t.Fatalf("second GC: %+v, %v", st, err)
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	after := tableBytes(s)
	// Pebble deletes the obsolete tables in the background, paced: wait for
	// the whole store to shrink, up to a deadline.
	total := s.DiskUsage()
	for deadline := time.Now().Add(20 * time.Second); total > after+4<<20 && time.Now().Before(deadline); total = s.DiskUsage() {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("live %d bytes; tables %d bytes before GC, %d after GC and compaction (%d with WAL and manifest); %+v",
		live, before, after, total, st)
	if after > 2*live+64<<10 {
		t.Fatalf("after GC and compaction the tables hold %d bytes for %d live", after, live)
	}
	if total > after+4<<20 { // plus about one memtable's WAL and the manifest
		t.Fatalf("after GC and compaction the store holds %d bytes for %d live", total, live)
	}
	snap, err := v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for i := 0; i < pages; i++ {
		if got := mustGet(t, snap, uint64(i)); !bytes.Equal(got, page(rounds-1, i)) {
			t.Fatalf("head page %d wrong after GC", i)
		}
	}
	if info := v.Info(); info.Pages != pages || info.Bytes != live || info.Horizon != rounds {
		t.Fatalf("Info after GC = %+v", info)
	}
}

// tableBytes is what the store's live sstables occupy.
func tableBytes(s *Store) uint64 { return s.db.Metrics().Table.Local.LiveSize }
