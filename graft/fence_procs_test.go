package graft

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/crashtest"
)

const fenceRounds = 25

// TestFenceAcrossProcesses: two processes, each with its own store, follow
// one volume on a shared file:// remote and push a commit per round from
// whatever base they have; a loser resets to the remote and goes on. Every
// remote LSN above the base is claimed by exactly one process, none twice,
// and the remote chain verifies.
//
//echostore:fault
func TestFenceAcrossProcesses(t *testing.T) {
	if arg, ok := crashtest.Child("TestFenceAcrossProcesses"); ok {
		fenceChild(t, arg)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	rs := openRemote(t, "file://"+filepath.Join(dir, "remote"))
	s, err := Open(ctx, filepath.Join(dir, "base"), Options{Remote: rs})
	if err != nil {
		t.Fatal(err)
	}
	v := mustCreate(t, s, "fence")
	commitPages(t, v, map[uint64][]byte{0: []byte("base")}, nil)
	if _, err := v.Push(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	procs := []*crashtest.Process{
		crashtest.Start(t, "TestFenceAcrossProcesses", "1|"+dir),
		crashtest.Start(t, "TestFenceAcrossProcesses", "2|"+dir),
	}
	claimed := map[uint64]int{}
	lost := 0
	for k, p := range procs {
		for {
			line, err := p.Next()
			if err != nil {
				t.Fatalf("child %d: %v", k+1, err)
			}
			if line == "done" {
				break
			}
			if line == "lost" {
				lost++
				continue
			}
			n, err := strconv.ParseUint(strings.TrimPrefix(line, "won "), 10, 64)
			if err != nil {
				t.Fatalf("child %d said %q", k+1, line)
			}
			if prev, ok := claimed[n]; ok {
				t.Fatalf("remote LSN %d won by child %d and child %d", n, prev, k+1)
			}
			claimed[n] = k + 1
		}
	}
	_, head, err := mustLog(t, rs, "fence").Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(claimed)) != head-1 || len(claimed) != 2*fenceRounds-lost {
		t.Fatalf("head %d, %d LSNs claimed, %d pushes lost", head, len(claimed), lost)
	}
	for n := uint64(2); n <= head; n++ {
		if claimed[n] == 0 {
			t.Fatalf("remote LSN %d claimed by nobody", n)
		}
	}
	t.Logf("%d LSNs won, %d pushes lost the race and reset", len(claimed), lost)
}

func fenceChild(t *testing.T, arg string) {
	id, dir, _ := strings.Cut(arg, "|")
	ctx := context.Background()
	rs, err := remote.Open(ctx, "file://"+filepath.Join(dir, "remote"), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, filepath.Join(dir, "child"+id), Options{Remote: rs})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.CreateVolume(ctx, volName("fence"))
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < fenceRounds; round++ {
		if _, err := v.Pull(ctx, nil); err != nil {
			t.Fatal(err)
		}
		commitPages(t, v, map[uint64][]byte{1: []byte(fmt.Sprint(id, round))}, nil)
		sp, err := v.Push(ctx)
		var de *DivergedError
		switch {
		case err == nil:
			crashtest.Report("won %d", sp.Remote)
		case errors.As(err, &de):
			crashtest.Report("lost")
			if _, err := v.Reset(ctx, true); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal(err)
		}
	}
	crashtest.Report("done")
}
