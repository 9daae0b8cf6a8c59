package mq

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// The test binary doubles as a producer process: TestMain runs runChild
// when childEnv is set, instead of the tests.
const childEnv = "EMQ_TEST_CHILD"

// runChild is the body of a child process; it returns the exit status.
func runChild(kind string) int {
	if kind != "producer" {
		fmt.Fprintf(os.Stderr, "unknown child kind %q\n", kind)
		return 2
	}
	if err := producerChild(); err != nil {
		fmt.Fprintf(os.Stderr, "producer: %v\n", err)
		return 1
	}
	return 0
}

// producerChild connects, says "ready", waits for "go" on stdin, appends
// EMQ_TEST_COUNT records in small batches and prints one line per record,
// "<redis id> <producer> <n>", then "remints <count>".
func producerChild() error {
	env := func(k string) string { return os.Getenv("EMQ_TEST_" + k) }
	index, count := env("INDEX"), env("COUNT")
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	t0ms, err := strconv.ParseInt(env("T0"), 10, 64)
	if err != nil {
		return err
	}
	// Every producer has node 0 and a clock frozen at the same instant:
	// they all mint the same ids, and must re-mint to get theirs in.
	t0 := time.UnixMilli(t0ms)
	minter, err := brand.NewMinter(0, brand.WithClock(func() time.Time { return t0 }))
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := Connect(ctx, Options{URL: env("URL"), Minter: minter,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer c.Close()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("waiting for go: %q, %v", line, err)
	}
	ref, err := names.ParseStreamRef(env("QUEUE"), env("STREAM"))
	if err != nil {
		return err
	}
	p, _ := strconv.Atoi(index)
	for sent := 0; sent < n; {
		size := min(1+(sent+p)%7, n-sent)
		batch := make([][]Field, size)
		for i := range batch {
			batch[i] = []Field{{Name: "p", Value: index}, {Name: "n", Value: strconv.Itoa(sent + i)}}
		}
		ids, err := c.AppendBatch(ctx, ref, batch)
		if err != nil {
			return err
		}
		for i, id := range ids {
			fmt.Fprintf(out, "%s %s %d\n", id.RedisID(), index, sent+i)
		}
		sent += size
	}
	fmt.Fprintf(out, "remints %d\n", c.Stats().Remints)
	return out.Flush()
}

// producerResult is what one child reported.
type producerResult struct {
	ids     map[int]string // n → redis id
	remints int64
}

// runProducers starts procs children appending count records each to
// stream s of queue q at url, releases them together, and returns their
// reports.
func runProducers(t *testing.T, url, q, s string, procs, count int) []producerResult {
	t.Helper()
	t0 := time.Now().UnixMilli()
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		lines *bufio.Scanner
		res   producerResult
	}
	children := make([]*child, procs)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=producer",
			"EMQ_TEST_URL="+url, "EMQ_TEST_QUEUE="+q, "EMQ_TEST_STREAM="+s,
			"EMQ_TEST_INDEX="+strconv.Itoa(i), "EMQ_TEST_COUNT="+strconv.Itoa(count),
			"EMQ_TEST_T0="+strconv.FormatInt(t0, 10))
		cmd.Stderr = t.Output()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		children[i] = &child{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout),
			res: producerResult{ids: map[int]string{}}}
	}
	for i, ch := range children {
		if !ch.lines.Scan() || ch.lines.Text() != "ready" {
			t.Fatalf("producer %d did not get ready: %q %v", i, ch.lines.Text(), ch.lines.Err())
		}
	}
	for _, ch := range children {
		if _, err := io.WriteString(ch.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i, ch := range children {
		wg.Go(func() {
			for ch.lines.Scan() {
				f := strings.Fields(ch.lines.Text())
				switch {
				case len(f) == 2 && f[0] == "remints":
					ch.res.remints, _ = strconv.ParseInt(f[1], 10, 64)
				case len(f) == 3 && f[1] == strconv.Itoa(i):
					n, _ := strconv.Atoi(f[2])
					ch.res.ids[n] = f[0]
				default:
					errs[i] = fmt.Errorf("producer %d printed %q", i, ch.lines.Text())
				}
			}
			if err := ch.cmd.Wait(); err != nil && errs[i] == nil {
				errs[i] = fmt.Errorf("producer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	out := make([]producerResult, procs)
	for i, ch := range children {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		out[i] = ch.res
	}
	return out
}

// Invariant 1 across processes: producers in several processes, sharing a
// node number and minting colliding ids, append concurrently to one
// stream. Every reported id is in the stream once, with the record its
// producer appended under it; the stream is in strictly increasing id
// order; each producer's records are in its append order; none is lost.
func TestOrderAcrossProcesses(t *testing.T) {
	const procs, count = 4, 300
	run := func(t *testing.T, url string) {
		q := queueName(t)
		results := runProducers(t, url, q, "s", procs, count)
		c := connect(t, url, Options{})
		recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
		if len(recs) != procs*count {
			t.Fatalf("stream has %d records, want %d", len(recs), procs*count)
		}
		checkIncreasing(t, recs, false)
		byID := map[string]Record{}
		for _, r := range recs {
			byID[r.ID.String()] = r
		}
		var remints int64
		for p, res := range results {
			remints += res.remints
			if len(res.ids) != count {
				t.Fatalf("producer %d reported %d ids, want %d", p, len(res.ids), count)
			}
			prev := ""
			for n := 0; n < count; n++ {
				xid := res.ids[n]
				rec, ok := byID[xid]
				if !ok {
					t.Fatalf("producer %d record %d: reported id %s is not in the stream", p, n, xid)
				}
				if want := fmt.Sprintf("%v", []Field{{Name: "p", Value: strconv.Itoa(p)}, {Name: "n", Value: strconv.Itoa(n)}}); fmt.Sprint(rec.Fields) != want {
					t.Fatalf("id %s holds %v, producer %d appended %s under it", xid, rec.Fields, p, want)
				}
				delete(byID, xid) // each reported id once
				if prev != "" && cmpXID(prev, xid) >= 0 {
					t.Fatalf("producer %d: record %d (%s) not after record %d (%s)", p, n, xid, n-1, prev)
				}
				prev = xid
			}
		}
		if len(byID) != 0 {
			t.Fatalf("%d records in the stream that no producer reported", len(byID))
		}
		// With frozen clocks every producer's first chunk collides.
		if remints < procs-1 {
			t.Fatalf("%d re-mints in all; colliding producers must re-mint at least %d times", remints, procs-1)
		}
		t.Logf("%d producers, %d records each, %d re-mints", procs, count, remints)
	}
	t.Run("redis", func(t *testing.T) { run(t, servers.Redis(t).URL) })
	t.Run("cluster", func(t *testing.T) { run(t, "redis://"+strings.Join(servers.Cluster(t).Addrs, ",")) })
}
