package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"
)

const fenceKeys = 3000

func fenceKey(i int) string { return fmt.Sprintf("fence/%04d/k", i) }

// childFence creates fenceKeys keys if absent in the store at
// FENCE_DIR, with FENCE_DRIVER "ours" (graft/remote/file) or "fileblob"
// (gocloud's fileblob, for BenchmarkFileblobFence), after the parent says go. It prints
// the indexes it won.
func childFence() error {
	ctx := context.Background()
	dir, id := os.Getenv("FENCE_DIR"), os.Getenv("FENCE_ID")
	var create func(key string, data []byte) error
	switch os.Getenv("FENCE_DRIVER") {
	case "ours":
		s, err := openFileStore(dir)
		if err != nil {
			return err
		}
		create = func(k string, d []byte) error { return s.PutIfAbsent(ctx, k, d) }
	case "fileblob":
		b, err := fileblob.OpenBucket(dir, nil)
		if err != nil {
			return err
		}
		defer b.Close()
		create = func(k string, d []byte) error {
			err := b.WriteAll(ctx, k, d, &blob.WriterOptions{IfNotExist: true})
			if gcerrors.Code(err) == gcerrors.FailedPrecondition {
				return fmt.Errorf("put %s: %w (%v)", k, ErrExists, err)
			}
			return err
		}
	default:
		return fmt.Errorf("FENCE_DRIVER %q", os.Getenv("FENCE_DRIVER"))
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	var won []string
	for i := range fenceKeys {
		err := create(fenceKey(i), []byte(id))
		switch {
		case err == nil:
			won = append(won, strconv.Itoa(i))
		case !errors.Is(err, ErrExists):
			return err
		}
	}
	fmt.Println("won " + strings.Join(won, ","))
	return nil
}

// raceFence runs two fence children on dir with driver and returns, per
// child, the indexes it reports it won.
func raceFence(t testing.TB, dir, driver string) [2][]int {
	t.Helper()
	var cmds [2]*struct {
		in  io.WriteCloser
		out *bufio.Reader
		err error
	}
	var procs []func() error
	for c := range 2 {
		cmd := child(t, "fence", "FENCE_DIR="+dir, "FENCE_DRIVER="+driver, fmt.Sprint("FENCE_ID=child ", c))
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		cmds[c] = &struct {
			in  io.WriteCloser
			out *bufio.Reader
			err error
		}{in: in, out: bufio.NewReader(out)}
		procs = append(procs, cmd.Wait)
	}
	for _, c := range cmds {
		if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("child said %q, %v", line, err)
		}
	}
	for _, c := range cmds { // both start at once
		if _, err := io.WriteString(c.in, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var won [2][]int
	for c, p := range cmds {
		line, err := p.out.ReadString('\n')
		if err != nil {
			t.Fatalf("child %d: %v", c, err)
		}
		list, ok := strings.CutPrefix(strings.TrimSpace(line), "won ")
		if !ok && strings.TrimSpace(line) != "won" {
			t.Fatalf("child %d said %q", c, line)
		}
		for _, f := range strings.Split(list, ",") {
			if f == "" {
				continue
			}
			i, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			won[c] = append(won[c], i)
		}
	}
	for c, wait := range procs {
		if err := wait(); err != nil {
			t.Fatalf("child %d: %v", c, err)
		}
	}
	return won
}

// TestFenceAcrossProcesses: two processes race conditional creates of the
// same 3,000 keys on one file:// store. Exactly 3,000 creates win in total,
// and every key holds its winner's bytes (invariant 6 on file://).
//
//echostore:fault
func TestFenceAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	won := raceFence(t, dir, "ours")
	if total := len(won[0]) + len(won[1]); total != fenceKeys {
		t.Fatalf("%d + %d = %d wins, want exactly %d", len(won[0]), len(won[1]), total, fenceKeys)
	}
	s, err := openFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for c, ks := range won {
		for _, i := range ks {
			if seen[i] {
				t.Fatalf("key %d won twice", i)
			}
			seen[i] = true
			got, err := s.Get(context.Background(), fenceKey(i))
			if err != nil || string(got) != fmt.Sprint("child ", c) {
				t.Fatalf("key %d holds %q (%v), winner was child %d", i, got, err, c)
			}
		}
	}
	t.Logf("child 0 won %d, child 1 won %d", len(won[0]), len(won[1]))
}

// BenchmarkFileblobFence observes, and asserts nothing about, how gocloud's
// fileblob does in the race of TestFenceAcrossProcesses, beside this
// module's file:// store: fileblob is not atomic across processes (it
// checks for the key, then renames over it), which is why file:// has a
// driver of its own. Each iteration races two processes over fenceKeys
// keys and the benchmark reports the creates that won per key: a fence
// gives exactly 1 (the file sub-benchmark), fileblob more. It is a
// benchmark, not a test, because it can never fail: run it with
//
//	go test -run '^$' -bench BenchmarkFileblobFence ./graft/remote/
func BenchmarkFileblobFence(b *testing.B) {
	for _, driver := range []struct{ name, env string }{{"file", "ours"}, {"fileblob", "fileblob"}} {
		b.Run(driver.name, func(b *testing.B) {
			wins, races := 0, 0
			for b.Loop() {
				won := raceFence(b, b.TempDir(), driver.env)
				wins += len(won[0]) + len(won[1])
				races++
			}
			b.ReportMetric(float64(wins)/float64(races*fenceKeys), "wins/key")
		})
	}
}
