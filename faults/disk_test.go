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
// commit and "X …" for each failed one. After two failures it frees the
// disk and commits until the store takes commits again (it must do so by
// itself, within a deadline), reports "R" and a few more commits, then
// closes the store and reports "Q <close error>". With guard "ballast" the
// store keeps no free-space reserve, so that Pebble itself meets ENOSPC and
// the ballast must save it.
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
	opts := graft.Options{FS: fs, MemTableSize: 256 << 10}
	if f[3] == "ballast" {
		opts.DiskReserve = -1
	}
	st, err := graft.Open(ctx, f[0], opts)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.CreateVolume(ctx, volName("disk"))
	if err != nil {
		t.Fatal(err)
	}
	failed, recovered := 0, 0
	var deadline time.Time
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
			if failed++; failed <= 2 {
				report("X enospc=%v diskfull=%v %v", errors.Is(err, syscall.ENOSPC), errors.Is(err, graft.ErrDiskFull), err)
			}
			if failed == 2 {
				fs.Disarm()
				deadline = time.Now().Add(30 * time.Second)
			}
			if failed > 2 {
				if time.Now().After(deadline) {
					report("N no commit taken 30s after the disk has room: %v", err)
					os.Exit(0)
				}
				time.Sleep(time.Millisecond)
			}
			continue
		}
		crashtest.Report("L %d %d", lsn, i)
		if failed >= 2 {
			if recovered++; recovered == 1 {
				report("R")
			}
			if recovered == 20 {
				report("Q %v", st.Close())
				os.Exit(0)
			}
		}
	}
}

// TestDiskFull fills the disk under a graft store (ENOSPC from a failing
// Pebble filesystem) at a random point after a random number of commits,
// with the store's free-space reserve (the commit is refused before Pebble
// writes) and without it (Pebble meets ENOSPC; the ballast must let it
// finish). The store must refuse the commit with an error wrapping
// ErrDiskFull (and ENOSPC), never end the process, never acknowledge a
// commit it did not keep, and take commits again by itself once the disk
// has room. Reopened, every acknowledged commit is there with its bytes,
// LSNs gap-free, and the store takes new commits.
func TestDiskFull(t *testing.T) {
	if _, ok := crashtest.Child("TestDiskFullChild"); ok {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	for round := range 8 {
		dir := t.TempDir()
		budget := rng.Int64N(1 << 20)
		armAfter := 1 + rng.IntN(300)
		guard := []string{"reserve", "ballast"}[round%2]
		p := crashtest.Start(t, "TestDiskFullChild", fmt.Sprintf("%s|%d|%d|%s", dir, budget, armAfter, guard))
		acked := map[uint64]int{}
		var refusals []string
		recovered, closed := false, false
		for {
			line, err := p.Next()
			if err != nil {
				mode := "the process ended"
				if i := strings.Index(err.Error(), "panic: "); i >= 0 {
					mode = "the process panicked: " + strings.SplitN(err.Error()[i:], "\n", 2)[0]
				}
				t.Fatalf("round %d (%s, full after %d commits + %d bytes): %s; refusals %q; %v", round, guard, armAfter-1, budget, mode, refusals, err)
			}
			f := strings.Fields(line)
			switch f[0] {
			case "L":
				lsn, _ := strconv.ParseUint(f[1], 10, 64)
				i, _ := strconv.Atoi(f[2])
				acked[lsn] = i
			case "X":
				refusals = append(refusals, line)
				if f[1] != "enospc=true" || f[2] != "diskfull=true" {
					t.Fatalf("round %d (%s): a commit on the full disk failed with an error not wrapping ErrDiskFull and ENOSPC: %s", round, guard, line)
				}
			case "N":
				t.Fatalf("round %d (%s): the store did not recover: %s", round, guard, line)
			case "R":
				recovered = true
			case "Q":
				if line != "Q <nil>" {
					t.Fatalf("round %d (%s): close after the full disk: %s", round, guard, line)
				}
				closed = true
			}
			if closed {
				break
			}
		}
		if len(refusals) != 2 || !recovered {
			t.Fatalf("round %d (%s): refusals %q, recovered %v", round, guard, refusals, recovered)
		}
		st, err := graft.Open(t.Context(), dir, graft.Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after the full disk: %v", round, err)
		}
		v, err := st.Volume(t.Context(), volName("disk"))
		if err != nil {
			t.Fatal(err)
		}
		head := v.Head()
		if head != uint64(len(acked)) {
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
		t.Logf("round %d (%s): disk full after %d commits + %d bytes: %s; recovered by itself; %d acknowledged commits kept", round, guard, armAfter-1, budget, refusals[0], len(acked))
	}
}
