package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/internal/faultfs"
)

// diskPage is the page commit i writes (at index i mod 64).
func diskPage(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("commit %08d;", i)), 100)
}

// TestDiskFullChild commits pages to a graft store whose filesystem fills
// up after a number of commits, reporting "L lsn i" for each acknowledged
// commit and "X …" for the first failed one; it then tries once more and
// exits. Pebble may also end the process itself.
func TestDiskFullChild(t *testing.T) {
	arg, ok := crashtest.Child("TestDiskFullChild")
	if !ok {
		t.Skip("the child of TestDiskFull")
	}
	f := strings.Split(arg, "|")
	budget, _ := strconv.ParseInt(f[1], 10, 64)
	armAfter, _ := strconv.Atoi(f[2])
	ctx := context.Background()
	fs := faultfs.New(vfs.Default)
	st, err := graft.Open(ctx, f[0], graft.Options{FS: fs, MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.CreateVolume(ctx, "disk")
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := 1; ; i++ {
		if i == armAfter {
			fs.Arm(budget)
		}
		tx := v.Begin()
		if err := tx.Put(uint64(i%64), diskPage(i)); err != nil {
			t.Fatal(err)
		}
		lsn, err := tx.Commit(ctx, graft.Synced)
		if err != nil {
			report("X enospc=%v %v", errors.Is(err, syscall.ENOSPC), err)
			if failed++; failed == 2 {
				report("Q %v", st.Close())
				os.Exit(0)
			}
			continue
		}
		crashtest.Report("L %d %d", lsn, i)
	}
}

// TestDiskFull fills the disk under a graft store (ENOSPC from a failing
// Pebble filesystem) at a random point after a random number of commits.
// The store must fail the commit with an error (or end the process): never
// acknowledge a commit it did not keep. Reopened on a disk with room, every
// acknowledged commit is there with its bytes, LSNs gap-free, and the store
// takes new commits.
func TestDiskFull(t *testing.T) {
	if _, ok := crashtest.Child("TestDiskFullChild"); ok {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	modes := map[string]int{}
	for round := range 6 {
		dir := t.TempDir()
		budget := rng.Int64N(1 << 20)
		armAfter := 1 + rng.IntN(300)
		p := crashtest.Start(t, "TestDiskFullChild", fmt.Sprintf("%s|%d|%d", dir, budget, armAfter))
		acked := map[uint64]int{}
		var mode string
		for {
			line, err := p.Next()
			if err != nil {
				if mode == "" {
					mode = "the process ended"
					if i := strings.Index(err.Error(), "panic: "); i >= 0 {
						mode = "the process panicked: " + strings.SplitN(err.Error()[i:], "\n", 2)[0]
					}
				}
				break
			}
			f := strings.Fields(line)
			switch f[0] {
			case "L":
				lsn, _ := strconv.ParseUint(f[1], 10, 64)
				i, _ := strconv.Atoi(f[2])
				acked[lsn] = i
			case "X":
				if mode == "" {
					mode = "typed error"
					if f[1] != "enospc=true" {
						mode = "error not wrapping ENOSPC"
						t.Logf("round %d: %s", round, line)
					}
				}
			}
		}
		modes[mode]++
		st, err := graft.Open(t.Context(), dir, graft.Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after the full disk: %v", round, err)
		}
		v, err := st.Volume(t.Context(), "disk")
		if err != nil {
			t.Fatal(err)
		}
		head := v.Head()
		if head < uint64(len(acked)) {
			t.Fatalf("round %d: head %d after %d acknowledged commits", round, head, len(acked))
		}
		for lsn, i := range acked {
			snap, err := v.SnapshotAt(t.Context(), lsn)
			if err != nil {
				t.Fatalf("round %d: LSN %d: %v", round, lsn, err)
			}
			b, err := snap.Get(t.Context(), uint64(i%64))
			snap.Close()
			if err != nil || !bytes.Equal(b, diskPage(i)) {
				t.Fatalf("round %d: LSN %d page %d: %.40q %v", round, lsn, i%64, b, err)
			}
		}
		tx := v.Begin()
		if err := tx.Put(1, []byte("room again")); err != nil {
			t.Fatal(err)
		}
		if lsn, err := tx.Commit(t.Context(), graft.Synced); err != nil || lsn != head+1 {
			t.Fatalf("round %d: commit after the disk has room: LSN %d (head %d): %v", round, lsn, head, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: disk full after %d commits + %d bytes: %s; %d acknowledged commits kept", round, armAfter-1, budget, mode, len(acked))
	}
	t.Logf("failure modes: %v", modes)
}
