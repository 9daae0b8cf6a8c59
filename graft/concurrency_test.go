package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestConflictConcurrent: N committers begin at the same base and commit at
// once, Synced, on a real disk; exactly one wins each round and the others
// get a *ConflictError naming that base.
func TestConflictConcurrent(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := mustCreate(t, s, "race")
	const n, rounds = 8, 25
	for r := 0; r < rounds; r++ {
		base := v.Head()
		txns := make([]*Txn, n)
		for k := range txns {
			txns[k] = v.Begin()
			if err := txns[k].Put(uint64(k), []byte(fmt.Sprintf("r%d-k%d", r, k))); err != nil {
				t.Fatal(err)
			}
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			winners []int
		)
		for k, txn := range txns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				lsn, err := txn.Commit(ctx, Synced)
				var ce *ConflictError
				switch {
				case err == nil:
					if lsn != base+1 {
						t.Errorf("winner got LSN %d, want %d", lsn, base+1)
					}
					mu.Lock()
					winners = append(winners, k)
					mu.Unlock()
				case errors.As(err, &ce):
					if ce.Base != base || ce.Head <= base {
						t.Errorf("conflict %+v with base %d", ce, base)
					}
				default:
					t.Errorf("commit: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", r, len(winners))
		}
		if v.Head() != base+1 {
			t.Fatalf("round %d: head %d, want %d", r, v.Head(), base+1)
		}
		snap, err := v.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range txns { // only the winner's page of this round is there
			got, err := snap.Get(ctx, uint64(k))
			if k == winners[0] {
				if want := fmt.Sprintf("r%d-k%d", r, k); string(got) != want {
					t.Fatalf("winner's page = %q, %v; want %q", got, err, want)
				}
			} else if err == nil && bytes.HasPrefix(got, []byte(fmt.Sprintf("r%d-", r))) {
				t.Fatalf("loser %d's page is visible: %q", k, got)
			}
		}
		_ = snap.Close()
	}
}

// TestReadersDuringWrites: snapshots taken while writers and GC run keep
// returning the bytes they returned first (run under -race).
func TestReadersDuringWrites(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, Options{})
	defer s.Close()
	const vols, pages = 3, 16
	vs := make([]*Volume, vols)
	for k := range vs {
		vs[k] = mustCreate(t, s, fmt.Sprintf("v%d", k))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k, v := range vs {
		wg.Add(1)
		go func() { // writer: rewrites every page, GCs now and then
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				txn := v.Begin()
				for i := uint64(0); i < pages; i++ {
					_ = txn.Put(i, []byte(fmt.Sprintf("v%d-n%d-p%d", k, n, i)))
				}
				_ = txn.SetMeta("n", []byte(fmt.Sprint(n)))
				if _, err := txn.Commit(ctx, Unsynced); err != nil {
					t.Error(err)
					return
				}
				if n%7 == 0 {
					if _, err := v.GC(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() { // reader: a snapshot must read one consistent commit, twice
			defer readers.Done()
			for n := 0; n < 150; n++ {
				v := vs[n%vols]
				snap, err := v.Snapshot(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				first := readAll(t, snap, pages)
				meta, merr := snap.Meta(ctx, "n")
				for i, p := range first {
					if snap.LSN() > 0 && (merr != nil || !bytes.Contains(p, []byte(fmt.Sprintf("-n%s-p%d", meta, i)))) {
						t.Errorf("LSN %d: page %d = %q, meta n = %q (%v): torn commit", snap.LSN(), i, p, meta, merr)
					}
				}
				if again := readAll(t, snap, pages); fmt.Sprint(again) != fmt.Sprint(first) {
					t.Errorf("snapshot %d changed", snap.LSN())
				}
				_ = snap.Close()
			}
		}()
	}
	readers.Wait()
	close(stop)
	wg.Wait()
}

func readAll(t *testing.T, snap *Snapshot, pages uint64) [][]byte {
	var out [][]byte
	it := snap.Scan(context.Background(), 0, pages-1)
	for it.Next() {
		out = append(out, bytes.Clone(it.Value()))
	}
	if err := it.Close(); err != nil {
		t.Error(err)
	}
	return out
}
