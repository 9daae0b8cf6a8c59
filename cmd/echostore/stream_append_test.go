package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// jsonlLines returns n lines of --jsonl input; line bad (1-based, 0 for
// none) is not a record.
func jsonlLines(n, bad int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		if i == bad {
			b.WriteString("{\"fields\":{\"n\":1}}\n") // a number, not a string
			continue
		}
		fmt.Fprintf(&b, "{\"fields\":{\"n\":\"%d\",\"pad\":\"%s\"}}\n", i, strings.Repeat("x", 40))
	}
	return b.Bytes()
}

// xlen is the length of the stream at key, 0 if there is none.
func xlen(t *testing.T, addr, key string) int {
	t.Helper()
	v, err := testserver.Do(context.Background(), addr, "XLEN", key)
	if err != nil {
		t.Fatalf("XLEN %s: %v", key, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("XLEN %s: %q", key, v)
	}
	return n
}

// gatedReader hands out first, then blocks until the stream holds want
// records (the first chunk was appended before the rest of the input was
// read), then hands out rest. If the stream does not get there by the
// deadline, Read fails with errWholeInput.
type gatedReader struct {
	addr, key  string
	want       int
	first      io.Reader
	rest       io.Reader
	deadline   time.Time
	opened     bool
	then       func() // called once the gate opens, before rest is read
	waitFailed error
}

var errWholeInput = errors.New("the first chunk was not appended before more input was read")

func (g *gatedReader) Read(p []byte) (int, error) {
	if n, err := g.first.Read(p); n > 0 || err != io.EOF {
		return n, err
	}
	for !g.opened {
		v, err := testserver.Do(context.Background(), g.addr, "XLEN", g.key)
		if err != nil {
			g.waitFailed = err
			return 0, err
		}
		if n, _ := strconv.Atoi(v); n >= g.want {
			g.opened = true
			if g.then != nil {
				g.then()
			}
			break
		}
		if time.Now().After(g.deadline) {
			g.waitFailed = errWholeInput
			return 0, errWholeInput
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g.rest.Read(p)
}

// TestAppendJSONLStreamsInChunks: stream append --jsonl appends the first
// chunk of its input before it reads past it — the input is not read
// whole — and then appends the rest, every record once, in order.
func TestAppendJSONLStreamsInChunks(t *testing.T) {
	r := startRedis(t)
	const total = jsonlChunkRecords*2 + 17
	in := jsonlLines(total, 0)
	cut := bytes.Index(in, []byte(fmt.Sprintf("{\"fields\":{\"n\":\"%d\",", jsonlChunkRecords+1)))
	g := &gatedReader{addr: r.Addr, key: "emq:{q}:stream:s", want: jsonlChunkRecords,
		first: bytes.NewReader(in[:cut]), rest: bytes.NewReader(in[cut:]), deadline: time.Now().Add(30 * time.Second)}
	var stdout, stderr bytes.Buffer
	root := newRootCmd(&stdout, &stderr)
	root.SetIn(g)
	root.SetArgs([]string{"--redis", r.URL, "--data", t.TempDir(), "stream", "append", "q", "s", "--jsonl", "-"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if g.waitFailed != nil {
		t.Fatalf("the gate: %v", g.waitFailed)
	}
	if err != nil {
		t.Fatalf("stream append --jsonl: %v\n%s", err, stderr.String())
	}
	if ids := lines(stdout.String()); len(ids) != total || !strings.HasPrefix(ids[0], "EVT_") {
		t.Fatalf("printed %d ids (first %q), want %d EVT_ ids", len(ids), ids[0], total)
	}
	if n := xlen(t, r.Addr, "emq:{q}:stream:s"); n != total {
		t.Fatalf("XLEN = %d, want %d", n, total)
	}
	out, _, err := run(t, "", "--redis", r.URL, "--data", t.TempDir(), "stream", "read", "q", "s", "--live-only")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines(out) {
		if want := fmt.Sprintf("\"n\":\"%d\"", i+1); !strings.Contains(l, want) {
			t.Fatalf("record %d is %s, want %s", i, l, want)
		}
	}
}

// TestAppendJSONLAtomicity: input that fits one chunk appends nothing when
// a line is bad; with a bad line in a later chunk, the chunks before it
// are appended (their ids printed), nothing of the bad chunk or after it,
// the error names the bad line and the lines appended, and the exit status
// is 1.
func TestAppendJSONLAtomicity(t *testing.T) {
	r := startRedis(t)
	for _, tc := range []struct {
		name       string
		lines, bad int
		appended   int
		msg        string
	}{
		{"one chunk, last line bad", jsonlChunkRecords, jsonlChunkRecords, 0,
			fmt.Sprintf("line %d: ", jsonlChunkRecords)},
		{"one chunk, first line bad", 10, 1, 0, "line 1: "},
		{"second chunk bad", jsonlChunkRecords*2 + 10, jsonlChunkRecords + 5, jsonlChunkRecords,
			fmt.Sprintf("line %d: ", jsonlChunkRecords+5)},
		{"third chunk bad", jsonlChunkRecords*3 + 10, jsonlChunkRecords*3 + 1, jsonlChunkRecords * 3,
			fmt.Sprintf("line %d: ", jsonlChunkRecords*3+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := strings.ReplaceAll(tc.name, " ", "-")
			s = strings.ReplaceAll(s, ",", "")
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			root := newRootCmd(&stdout, &stderr)
			root.SetIn(bytes.NewReader(jsonlLines(tc.lines, tc.bad)))
			root.SetArgs([]string{"--redis", r.URL, "--data", t.TempDir(), "stream", "append", "q", s, "--jsonl", "-"})
			err := root.ExecuteContext(ctx)
			if err == nil {
				t.Fatal("stream append of input with a bad line succeeded")
			}
			if code := exitCode(err); code != exitFailure {
				t.Errorf("exit status %d, want %d", code, exitFailure)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("error %q does not name the bad line (%q)", msg, tc.msg)
			}
			var wantTail string
			if tc.appended == 0 {
				wantTail = "nothing was appended"
			} else {
				chunks := "chunks"
				if tc.appended == jsonlChunkRecords {
					chunks = "chunk"
				}
				wantTail = fmt.Sprintf("lines 1-%d (%d records in %d %s) were appended before it and their ids printed; nothing from line %d on was appended",
					tc.appended, tc.appended, tc.appended/jsonlChunkRecords, chunks, tc.appended+1)
			}
			if !strings.HasSuffix(msg, wantTail) {
				t.Errorf("error %q, want it to end %q", msg, wantTail)
			}
			ids := strings.Fields(stdout.String())
			if len(ids) != tc.appended {
				t.Errorf("printed %d ids, want %d", len(ids), tc.appended)
			}
			if n := xlen(t, r.Addr, "emq:{q}:stream:"+s); n != tc.appended {
				t.Errorf("XLEN = %d, want %d", n, tc.appended)
			}
		})
	}
}

// FuzzReadJSONL: whatever the input, readJSONL ends, its chunks cover the
// lines in order without a gap (each starts after the last line of the one
// before), none holds more than jsonlChunkRecords records, and only the
// last one ends the input or carries an error.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte("{\"fields\":{\"a\":\"1\"}}\n\n{\"fields\":{\"b\":\"2\"}}"))
	f.Add([]byte("{\"fields\":{\"a\":1}}\n"))
	f.Add([]byte("\n\n\n"))
	f.Add(jsonlLines(jsonlChunkRecords+3, 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out := make(chan jsonlChunk)
		go readJSONL(ctx, bytes.NewReader(in), "-", out)
		next, ended := 1, false
		for ch := range out {
			if ended {
				t.Fatal("a chunk after the end of the input or an error")
			}
			if ch.first != next {
				t.Fatalf("chunk starts at line %d, want %d", ch.first, next)
			}
			if len(ch.records) > jsonlChunkRecords {
				t.Fatalf("chunk of %d records", len(ch.records))
			}
			if ch.err == nil && ch.last < ch.first {
				t.Fatalf("chunk of lines %d-%d", ch.first, ch.last)
			}
			next, ended = ch.last+1, ch.eof || ch.err != nil
		}
		if !ended {
			t.Fatal("the chunks stopped before the end of the input")
		}
	})
}

// TestAppendJSONLRedisLostAfterAChunk: when Redis goes away after the first
// chunk is in the stream, the command fails (exit status 1), the ids of the
// first chunk are printed, and the error says how many records were
// appended before the failure.
func TestAppendJSONLRedisLostAfterAChunk(t *testing.T) {
	r := startRedis(t)
	in := jsonlLines(jsonlChunkRecords*2, 0)
	cut := bytes.Index(in, []byte(fmt.Sprintf("{\"fields\":{\"n\":\"%d\",", jsonlChunkRecords+1)))
	g := &gatedReader{addr: r.Addr, key: "emq:{q}:stream:s", want: jsonlChunkRecords,
		first: bytes.NewReader(in[:cut]), rest: bytes.NewReader(in[cut:]), deadline: time.Now().Add(30 * time.Second),
		then: func() { r.Stop() }}
	var stdout, stderr bytes.Buffer
	root := newRootCmd(&stdout, &stderr)
	root.SetIn(g)
	root.SetArgs([]string{"--redis", r.URL, "--data", t.TempDir(), "stream", "append", "q", "s", "--jsonl", "-"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if g.waitFailed != nil {
		t.Fatalf("the gate: %v", g.waitFailed)
	}
	if err == nil {
		t.Fatal("stream append succeeded with Redis gone")
	}
	if code := exitCode(err); code != exitFailure {
		t.Errorf("exit status %d, want %d", code, exitFailure)
	}
	want := fmt.Sprintf("%d records were appended before it (lines 1-%d, and 0 records of the chunk from line %d) and their ids printed",
		jsonlChunkRecords, jsonlChunkRecords, jsonlChunkRecords+1)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if ids := strings.Fields(stdout.String()); len(ids) != jsonlChunkRecords {
		t.Errorf("printed %d ids, want the first chunk's %d", len(ids), jsonlChunkRecords)
	}
}
