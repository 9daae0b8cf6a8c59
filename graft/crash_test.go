package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/internal/crashtest"
)

// The crash tests commit a deterministic schedule: commit L of a volume
// writes crashPages(seed, L) and metadata naming L and its pages, so that
// after a crash every LSN's state can be recomputed and compared.

const crashDomain = 40 // page indexes 0..39

// crashPages returns the pages commit lsn writes: 1 to 5 of them, one in
// five commits carrying a 48 KiB page so that commits span WAL blocks.
func crashPages(seed, lsn uint64) map[uint64][]byte {
	out := make(map[uint64][]byte)
	n := 1 + int(lsn%5)
	for k := 0; k < n; k++ {
		i := (lsn*7 + uint64(k)*13 + seed) % crashDomain
		size := 16 + int((lsn*31+uint64(k))%200)
		if k == 0 && lsn%5 == 0 {
			size = 48 << 10
		}
		b := make([]byte, size)
		rng := rand.New(rand.NewPCG(seed^lsn, i))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[i] = b
	}
	return out
}

// crashCommit commits the schedule's entry for the volume's next LSN.
func crashCommit(ctx context.Context, v *Volume, seed uint64, d Durability) (uint64, error) {
	txn := v.Begin()
	lsn := txn.Base() + 1
	pages := crashPages(seed, lsn)
	var list []string
	for i, p := range pages {
		if err := txn.Put(i, p); err != nil {
			return 0, err
		}
		list = append(list, strconv.FormatUint(i, 10))
	}
	if err := errors.Join(txn.SetMeta("lsn", []byte(strconv.FormatUint(lsn, 10))),
		txn.SetMeta("pages", []byte(strings.Join(list, ",")))); err != nil {
		return 0, err
	}
	got, err := txn.Commit(ctx, d)
	if err == nil && got != lsn {
		err = fmt.Errorf("committed LSN %d, expected %d", got, lsn)
	}
	return got, err
}

// verifyCrashVolume checks every LSN from 1 to the head against the
// schedule: each commit is there whole (its pages and its metadata) or, past
// the head, not at all; the commit log has no gap; Info matches.
func verifyCrashVolume(t testing.TB, v *Volume, seed uint64) {
	t.Helper()
	ctx := context.Background()
	head := v.Head()
	cs, err := v.Commits(ctx, 1, head)
	if err != nil {
		t.Fatalf("volume %s: commit log: %v", v.Name(), err)
	}
	if uint64(len(cs)) != head {
		t.Fatalf("volume %s: %d commit records for head %d", v.Name(), len(cs), head)
	}
	state := map[uint64][]byte{}
	for lsn := uint64(1); lsn <= head; lsn++ {
		for i, p := range crashPages(seed, lsn) {
			state[i] = p
		}
		if got := len(cs[lsn-1].Pages); got != len(crashPages(seed, lsn)) {
			t.Fatalf("volume %s LSN %d: commit record lists %d pages", v.Name(), lsn, got)
		}
		snap, err := v.SnapshotAt(ctx, lsn)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := snap.Meta(ctx, "lsn"); err != nil || string(m) != strconv.FormatUint(lsn, 10) {
			t.Fatalf("volume %s LSN %d: meta lsn = %q, %v", v.Name(), lsn, m, err)
		}
		for i := uint64(0); i < crashDomain; i++ {
			got, err := snap.Get(ctx, i)
			want, ok := state[i]
			if ok != (err == nil) || !bytes.Equal(got, want) {
				t.Fatalf("volume %s LSN %d page %d: got %d bytes (%v), want %d bytes (present %v)",
					v.Name(), lsn, i, len(got), err, len(want), ok)
			}
		}
		_ = snap.Close()
	}
	var size uint64
	for _, p := range state {
		size += uint64(len(p))
	}
	if info := v.Info(); info.Pages != uint64(len(state)) || info.Bytes != size {
		t.Fatalf("volume %s: Info %+v, want %d pages of %d bytes", v.Name(), info, len(state), size)
	}
}

const crashSeed = 17

// TestCrashKill9 kills a committing child process with SIGKILL after a
// random number of reported Synced commits, several times over the same
// data dir: every reported commit survives with its exact bytes, no commit
// is partly visible, and the LSNs go on from the head without a gap.
//
//echostore:fault
func TestCrashKill9(t *testing.T) {
	if dir, ok := crashtest.Child("TestCrashKill9"); ok {
		crashChild(t, dir)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(crashSeed), 1))
	var reported uint64
	for round := 0; round < 4; round++ {
		p := crashtest.Start(t, "TestCrashKill9", dir)
		kills := 1 + rng.IntN(30)
		for n := 0; n < kills; n++ {
			line, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			lsn, err := strconv.ParseUint(line, 10, 64)
			if err != nil || lsn != reported+1 {
				t.Fatalf("child reported %q after LSN %d", line, reported)
			}
			reported = lsn
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		for _, line := range p.Rest() { // reported before it died, not yet read
			lsn, err := strconv.ParseUint(line, 10, 64)
			if err != nil || lsn != reported+1 {
				t.Fatalf("child reported %q after LSN %d", line, reported)
			}
			reported = lsn
		}
		s, err := Open(ctx, dir, Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		v, err := s.Volume(ctx, volName("crash"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Head() < reported {
			t.Fatalf("round %d: head %d, but LSN %d was reported committed", round, v.Head(), reported)
		}
		verifyCrashVolume(t, v, crashSeed)
		// The next commit is head+1.
		head := v.Head()
		if lsn, err := crashCommit(ctx, v, crashSeed, Synced); err != nil || lsn != head+1 {
			t.Fatalf("round %d: commit after recovery: %d, %v (head %d)", round, lsn, err, head)
		}
		reported = head + 1
		t.Logf("round %d: killed after reading %d reports (%d more in the pipe); head %d", round, kills, len(p.Rest()), head)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// crashChild commits Synced in a loop, reporting each LSN once Commit has
// returned, until it is killed (or, as a safety net, after 2,000 commits).
func crashChild(t *testing.T, dir string) {
	ctx := context.Background()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.CreateVolume(ctx, volName("crash"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 2000; n++ {
		lsn, err := crashCommit(ctx, v, crashSeed, Synced)
		if err != nil {
			t.Fatal(err)
		}
		crashtest.Report("%d", lsn)
	}
	t.Fatal("crash child was never killed")
}

// TestCrashStrictFS runs committers on four volumes, mixing Synced and
// Unsynced commits, on Pebble's crashable in-memory filesystem, and takes
// a crash clone (only synced data, plus a random share of unsynced blocks)
// while they run: in the clone every Synced commit that returned before the
// crash is there, Unsynced ones may be gone but never in part, every head
// is consistent with its commit log, and commits go on at head+1.
//
//echostore:fault
func TestCrashStrictFS(t *testing.T) {
	ctx := context.Background()
	iters := 6
	if raceEnabled {
		iters = 3
	}
	for iter := 0; iter < iters; iter++ {
		rng := rand.New(rand.NewPCG(uint64(iter), 99))
		fs := vfs.NewCrashableMem()
		s := openMem(t, fs, Options{MemTableSize: 256 << 10}) // small memtables: flushes happen too
		const vols = 4
		vs := make([]*Volume, vols)
		for k := range vs {
			vs[k] = mustCreate(t, s, fmt.Sprintf("vol%d", k))
		}
		var (
			synced    [vols]atomic.Uint64 // highest Synced LSN whose Commit returned
			returned  [vols]atomic.Uint64 // highest LSN whose Commit returned
			commits   atomic.Int64
			crashAt   = int64(20 + rng.IntN(200))
			crashed   = make(chan struct{})
			crashOnce sync.Once
			stop      atomic.Bool
			wg        sync.WaitGroup
		)
		for k, v := range vs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(iter), uint64(k)))
				for !stop.Load() {
					d := Unsynced
					if r.IntN(3) == 0 {
						d = Synced
					}
					lsn, err := crashCommit(ctx, v, uint64(k), d)
					if err != nil {
						t.Error(err)
						return
					}
					returned[k].Store(lsn)
					if d == Synced {
						synced[k].Store(lsn)
					}
					if commits.Add(1) == crashAt {
						crashOnce.Do(func() { close(crashed) })
					}
				}
			}()
		}
		workersGone := make(chan struct{})
		go func() { wg.Wait(); close(workersGone) }()
		select {
		case <-crashed:
		case <-workersGone: // every worker failed (t.Error) before the crash point
			t.FailNow()
		}
		var mustHave, before [vols]uint64
		for k := range mustHave {
			mustHave[k] = synced[k].Load()
		}
		pct := []int{0, 50, 100}[rng.IntN(3)]
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(iter), 7))})
		for k := range before {
			before[k] = returned[k].Load() // at least what had returned at the crash
		}
		stop.Store(true)
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s2 := openMem(t, clone, Options{})
		for k := range vs {
			v, err := s2.Volume(ctx, volName(fmt.Sprintf("vol%d", k)))
			if err != nil {
				t.Fatal(err)
			}
			if v.Head() < mustHave[k] {
				t.Fatalf("iter %d (%d%% unsynced kept): volume %d head %d lost Synced LSN %d",
					iter, pct, k, v.Head(), mustHave[k])
			}
			verifyCrashVolume(t, v, uint64(k))
			head := v.Head()
			if lsn, err := crashCommit(ctx, v, uint64(k), Synced); err != nil || lsn != head+1 {
				t.Fatalf("commit after crash: %d, %v (head %d)", lsn, err, head)
			}
			t.Logf("iter %d (%d%% unsynced kept): volume %d: Synced up to %d, committed ≥ %d, recovered head %d",
				iter, pct, k, mustHave[k], before[k], head)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
