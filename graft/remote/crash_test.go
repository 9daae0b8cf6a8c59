package remote

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/names"
)

// crashSize is the page size of commit lsn in the crash test: every third
// commit is large enough to need a segment.
func crashSize(lsn uint64) int {
	if lsn%3 == 0 {
		return 24 << 10 // 8 pages of 24 KiB: a segment
	}
	return 512 // inline
}

// childCrash appends commits to volume "crash" in the file store at dir
// forever, reporting "<lsn> <hash>" after each, until killed.
func childCrash(dir string) error {
	ctx := context.Background()
	s, err := openFileStore(dir)
	if err != nil {
		return err
	}
	vol, err := names.ParseVolume("crash")
	if err != nil {
		return err
	}
	l, err := NewLog(s, vol)
	if err != nil {
		return err
	}
	base, err := l.HeadCommit(ctx)
	if err != nil {
		return err
	}
	for {
		d := draftOn(base, 8, crashSize(base.LSN()+1), "crash")
		d.Checkpoint = d.LSN%5 == 0
		e, err := l.Append(ctx, d)
		if err != nil {
			return err
		}
		crashtest.Report("%d %s", e.LSN(), e.Hash)
		base = e
	}
}

// TestCrashDuringAppend SIGKILLs a child appending commits to a file://
// log at a random point, several times over the same log. After each kill
// no torn object is visible at a final key, every commit the child reported
// is intact with its pages, the chain verifies, and Sweep clears the
// temporaries the kill left.
//
//echostore:fault
func TestCrashDuringAppend(t *testing.T) {
	if dir, ok := crashtest.Child("TestCrashDuringAppend"); ok {
		if err := childCrash(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		return
	}
	dir := t.TempDir()
	ctx := context.Background()
	reported := map[uint64]string{}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 5))
	for round := range 4 {
		p := crashtest.Start(t, "TestCrashDuringAppend", dir)
		for range 3 + rng.IntN(25) {
			line, err := p.Next()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			f := strings.Fields(line)
			lsn, _ := strconv.ParseUint(f[0], 10, 64)
			reported[lsn] = f[1]
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		checkCrashDir(t, dir, reported)
	}
	s, _ := openFileStore(dir)
	swept, err := s.Sweep(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary left after Sweep: %s", p)
		}
		return nil
	})
	t.Logf("%d commits reported over 4 kills; %d temporaries swept", len(reported), swept)
}

func checkCrashDir(t *testing.T, dir string, reported map[uint64]string) {
	t.Helper()
	ctx := context.Background()
	s, err := openFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Every object at a final key decodes as its kind.
	objs, err := s.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		b, err := s.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(o.Key, "segments/"):
			_, _, err = DecodeSegment(b)
		case strings.Contains(o.Key, "/checkpoints/"):
			_, _, _, err = DecodeCheckpointMarker(b)
		default:
			_, err = DecodeCommit(b)
		}
		if err != nil {
			t.Fatalf("torn or corrupt object at %s: %v", o.Key, err)
		}
	}
	l := mustLog(t, s, "crash")
	_, head, err := l.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for lsn, h := range reported {
		if lsn > head {
			t.Fatalf("reported lsn %d above head %d", lsn, head)
		}
		e, err := l.Read(ctx, lsn)
		if err != nil {
			t.Fatal(err)
		}
		if e.Hash.String() != h {
			t.Fatalf("lsn %d: hash %s, child reported %s", lsn, e.Hash, h)
		}
		want := map[uint64]uint64{}
		for _, p := range pagesAt(lsn, lsn%7, 3, 8, 1) {
			want[p.Index] = lsn
		}
		verifyPages(t, l, e, func(uint64) int { return crashSize(lsn) }, want)
	}
	if _, err := l.LatestCheckpoint(ctx); err != nil && !errors.Is(err, ErrNoCheckpoint) {
		t.Fatal(err)
	}
}
