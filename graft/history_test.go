package graft

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/echostore/echostore/names"
)

// TestLSNAt: of commits made one after another, LSNAt of any time returns
// the newest made at or before it, as a scan of every commit record finds
// it: 0 before the first, the head after the last.
func TestLSNAt(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, Options{})
	defer s.Close()
	v := mustCreate(t, s, "hist")
	if got, err := v.LSNAt(ctx, time.Now()); err != nil || got != 0 {
		t.Fatalf("LSNAt of an empty volume = %d, %v; want 0", got, err)
	}
	for i := range 37 {
		commitPages(t, v, map[uint64][]byte{uint64(i % 5): {byte(i)}}, nil)
	}
	cs, err := v.Commits(ctx, 1, v.Head())
	if err != nil || len(cs) != 37 {
		t.Fatalf("commits: %d, %v", len(cs), err)
	}
	want := func(at time.Time) uint64 { // the scan
		var lsn uint64
		for _, c := range cs {
			if !c.Time.After(at) {
				lsn = c.LSN
			}
		}
		return lsn
	}
	probes := []time.Time{cs[0].Time.Add(-time.Nanosecond), cs[36].Time.Add(time.Hour)}
	for _, c := range cs {
		probes = append(probes, c.Time, c.Time.Add(-time.Nanosecond), c.Time.Add(time.Nanosecond))
	}
	for _, at := range probes {
		if got, err := v.LSNAt(ctx, at); err != nil || got != want(at) {
			t.Fatalf("LSNAt(%v) = %d, %v; want %d", at, got, err, want(at))
		}
	}
}

// TestGCKeepsHistory: with Options.History, GC keeps the horizon at the
// newest commit older than the history, so every younger state can still
// be opened; without one it moves the horizon to the head, and a time
// before the kept commits fails with ErrSnapshotGone.
func TestGCKeepsHistory(t *testing.T) {
	ctx := context.Background()
	var history time.Duration
	var now time.Time // the clock the history is measured on
	s := openMem(t, nil, Options{History: func(names.Volume) time.Duration { return history }, Now: func() time.Time { return now }})
	defer s.Close()
	v := mustCreate(t, s, "hist")
	for i := range 10 {
		commitPages(t, v, map[uint64][]byte{0: {byte(i)}}, nil)
	}
	now, history = time.Now(), time.Hour
	if st, err := v.GC(ctx); err != nil || st.Horizon > 1 {
		t.Fatalf("GC with an hour of history: horizon %d, %v; want every state kept", st.Horizon, err)
	}
	snap, err := v.SnapshotAt(ctx, 1)
	if err != nil {
		t.Fatalf("the first state after GC: %v", err)
	}
	if b, err := snap.Get(ctx, 0); err != nil || len(b) != 1 || b[0] != 0 {
		t.Fatalf("page 0 as of LSN 1 = %v, %v; want [0]", b, err)
	}
	snap.Close()
	cs, err := v.Commits(ctx, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	now, history = cs[4].Time.Add(time.Hour), time.Hour // commit 5 is the newest an hour old
	if st, err := v.GC(ctx); err != nil || st.Horizon != 5 {
		t.Fatalf("GC with the history up to commit 5: horizon %d, %v; want 5", st.Horizon, err)
	}
	now, history = time.Now(), 0
	if st, err := v.GC(ctx); err != nil || st.Horizon != 10 {
		t.Fatalf("GC with no history: horizon %d, %v; want the head", st.Horizon, err)
	}
	if _, err := v.LSNAt(ctx, cs[0].Time); !errors.Is(err, ErrSnapshotGone) {
		t.Fatalf("LSNAt of a commit GC passed: %v, want ErrSnapshotGone", err)
	}
	if got, err := v.LSNAt(ctx, time.Now()); err != nil || got != 10 {
		t.Fatalf("LSNAt(now) = %d, %v; want 10", got, err)
	}
}
