package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/resp"
	"github.com/echostore/echostore/server"
)

// TestServeRESP: `serve --resp` answers the Redis protocol; without a
// token given it takes the data dir's serve.token, which AUTH needs; the
// archived stream's XRANGE and XLEN count archive and live tail. A --resp
// address other than loopback without a token given is refused.
func TestServeRESP(t *testing.T) {
	r := startRedis(t)
	data := filepath.Join(t.TempDir(), "data")
	g := []string{"--redis", r.URL, "--data", data}
	logs, logw := io.Pipe()
	root := newRootCmd(io.Discard, logw)
	root.SetArgs(append(append([]string{}, g...), "serve", "--listen", "127.0.0.1:0", "--resp", "127.0.0.1:0", "--beat", "1h"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := root.ExecuteContext(ctx)
		logw.Close()
		done <- err
	}()
	sc := bufio.NewScanner(logs)
	addr := ""
	for !strings.Contains(sc.Text(), "serve: listening") {
		if !sc.Scan() {
			t.Fatalf("serve ended before it listened: %v", <-done)
		}
		if line := sc.Text(); strings.Contains(line, "RESP front listening") {
			_, rest, _ := strings.Cut(line, "addr=")
			addr, _, _ = strings.Cut(rest, " ")
		}
	}
	go io.Copy(io.Discard, logs)
	if addr == "" {
		t.Fatal("serve did not log the RESP front's address")
	}
	cli := mustRun(t, g)
	for _, v := range []string{"n=1", "n=2", "n=3", "n=4", "n=5"} {
		cli("stream", "append", "q", "s", v)
	}
	cli("archive", "cycle", "q", "s", "--keep", "1")
	token, err := os.ReadFile(filepath.Join(data, serveTokenName))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	do := func(args ...string) string {
		t.Helper()
		b := []byte{}
		b = append(b, '*')
		b = append(b, []byte(strconv.Itoa(len(args))+"\r\n")...)
		for _, a := range args {
			b = append(b, []byte("$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n")...)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		rep, err := resp.ReadReply(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(rep)
	}
	key := "emq:{q}:stream:s"
	if got := do("XLEN", key); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("XLEN before AUTH: %q", got)
	}
	if got := do("AUTH", strings.TrimSpace(string(token))); got != "+OK\r\n" {
		t.Fatalf("AUTH with serve.token: %q", got)
	}
	if got := do("XLEN", key); got != ":5\r\n" {
		t.Fatalf("XLEN: %q, want 5 (4 archived, 1 live)", got)
	}
	if got := do("XRANGE", key, "-", "+"); !strings.HasPrefix(got, "*5\r\n") || !strings.Contains(got, "n\r\n$1\r\n1\r\n") {
		t.Fatalf("XRANGE: %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after its context ended: %v", err)
	}

	root = newRootCmd(io.Discard, io.Discard)
	root.SetArgs(append(append([]string{}, g...), "serve", "--listen", "127.0.0.1:0", "--resp", "0.0.0.0:0"))
	if err := root.ExecuteContext(context.Background()); !errors.Is(err, server.ErrInsecure) {
		t.Fatalf("serve --resp 0.0.0.0:0 without a token given: %v, want ErrInsecure", err)
	}
}
