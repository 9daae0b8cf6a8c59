package accept

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/echostore/echostore/brand"
)

// The crash test re-executes the test binary as a child that records
// intents in a loop and prints, after each call returns, what it
// acknowledged: "A <id>" after Record, "C <id>" after MarkCommitted, and
// "D" after a Flush (everything printed before is durable). The parent
// SIGKILLs it at a random line, recovers the directory, and checks the
// loss window.

const crashEnv = "ACCEPT_CRASH_CHILD" // "<dir>,<round>,<K>,<flush every>"

// crashOp is the child's i-th operation: record id base+i, or, after
// every 7th record, mark base+i-3 committed.
type crashOp struct {
	commit bool
	id     brand.ID
}

func crashOps(round, n int) []crashOp {
	base := brand.ID(round) * 1_000_000
	var ops []crashOp
	for i := 1; len(ops) < n; i++ {
		ops = append(ops, crashOp{id: base + brand.ID(i)})
		if i%7 == 0 {
			ops = append(ops, crashOp{commit: true, id: base + brand.ID(i-3)})
		}
	}
	return ops[:n]
}

func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("runs only as the child of TestCrashLossWindow")
	}
	parts := strings.Split(spec, ",")
	dir := parts[0]
	round, _ := strconv.Atoi(parts[1])
	k, _ := strconv.Atoi(parts[2])
	every, _ := strconv.Atoi(parts[3])
	ctx := context.Background()
	o, err := Open(ctx, dir, Options{K: k})
	if err != nil {
		fmt.Fprintln(os.Stdout, "E", err)
		os.Exit(2)
	}
	ops := crashOps(round, 1<<22)
	for i, op := range ops {
		if op.commit {
			if _, err := o.MarkCommitted(ctx, op.id); err != nil {
				fmt.Fprintln(os.Stdout, "E", err)
				os.Exit(2)
			}
			fmt.Fprintln(os.Stdout, "C", uint64(op.id))
		} else {
			if err := o.Record(ctx, Intent{ID: op.id, Queue: qn("jobs"), Payload: []byte(strconv.Itoa(i))}); err != nil {
				fmt.Fprintln(os.Stdout, "E", err)
				os.Exit(2)
			}
			fmt.Fprintln(os.Stdout, "A", uint64(op.id))
		}
		if (i+1)%every == 0 {
			if err := o.Flush(ctx); err != nil {
				fmt.Fprintln(os.Stdout, "E", err)
				os.Exit(2)
			}
			fmt.Fprintln(os.Stdout, "D")
		}
	}
	os.Exit(3) // never reached in practice: the parent kills it first
}

//echostore:fault
func TestCrashLossWindow(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("child")
	}
	ctx := context.Background()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	prev := map[brand.ID]bool{} // the state recovered after the previous round
	for round := 1; round <= 6; round++ {
		k := []int{1, 10, 100, 1000}[rng.IntN(4)]
		every := 50 + rng.IntN(3000)
		killAt := 20 + rng.IntN(min(6000, 400*k)) // K=1 costs an fsync per line
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%d", crashEnv, dir, round, k, every))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		printed, durable, lines := 0, 0, 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			lines++
			switch {
			case line == "D":
				durable = printed
			case strings.HasPrefix(line, "A "), strings.HasPrefix(line, "C "):
				printed++
			default:
				t.Fatalf("round %d: child says %q", round, line)
			}
			if lines == killAt {
				cmd.Process.Kill() // SIGKILL; lines already in the pipe are still read
			}
		}
		cmd.Wait()

		o, err := Open(ctx, dir, Options{K: k})
		if err != nil {
			t.Fatalf("round %d: recovery: %v", round, err)
		}
		got, _ := o.Pending(ctx)
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(got, func(a, b Intent) int { return int(a.ID) - int(b.ID) }) {
			t.Fatalf("round %d: pending not in strictly increasing id order", round)
		}
		// Earlier rounds' intents are untouched.
		mine := map[brand.ID]bool{}
		old := map[brand.ID]bool{}
		for i, in := range got {
			if i > 0 && got[i-1].ID == in.ID {
				t.Fatalf("round %d: id %d twice", round, in.ID)
			}
			if in.ID > brand.ID(round)*1_000_000 {
				mine[in.ID] = true
			} else {
				old[in.ID] = true
			}
		}
		if !mapsEqual(old, prev) {
			t.Fatalf("round %d: intents of earlier rounds changed: %d, want %d", round, len(old), len(prev))
		}
		// What was recovered must be the state after some prefix p of the
		// child's operations (the log is in call order), with p at least the
		// last durable point and at most K acknowledged operations lost.
		p, ok := matchPrefix(round, mine, printed+k+1)
		if !ok {
			t.Fatalf("round %d: recovered %d intents, which is no prefix of the child's operations", round, len(mine))
		}
		if p < durable {
			t.Fatalf("round %d: recovered the first %d operations, but %d were flushed", round, p, durable)
		}
		if printed-p > k {
			t.Fatalf("round %d: %d acknowledged operations lost, K = %d", round, printed-p, k)
		}
		t.Logf("round %d: K=%d, killed after %d lines: %d acknowledged, %d flushed, %d recovered", round, k, killAt, printed, durable, p)
		for id := range mine {
			prev[id] = true
		}
	}
}

// matchPrefix finds the p ≤ limit such that the first p operations of the
// round leave exactly the live set got.
func matchPrefix(round int, got map[brand.ID]bool, limit int) (int, bool) {
	live := map[brand.ID]bool{}
	found, at := mapsEqual(live, got), 0
	for i, op := range crashOps(round, limit) {
		if op.commit {
			delete(live, op.id)
		} else {
			live[op.id] = true
		}
		if len(live) == len(got) && mapsEqual(live, got) {
			found, at = true, i+1
		}
	}
	return at, found
}

func mapsEqual(a, b map[brand.ID]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
