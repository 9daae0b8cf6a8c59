package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

// TestRESPConfig: a RESP address other than loopback needs a token, as
// the HTTP address does.
func TestRESPConfig(t *testing.T) {
	base := Config{Data: t.TempDir(), Redis: "redis://127.0.0.1:1/0"}
	c := base
	c.RESP = "0.0.0.0:6380"
	if _, err := c.Checked(); !errors.Is(err, ErrInsecure) {
		t.Fatalf("resp on 0.0.0.0 without a token: %v, want ErrInsecure", err)
	}
	c.Tokens = []TokenConfig{{Name: "t", Scopes: []string{"read"}, Value: strings.Repeat("k", MinTokenLen)}}
	if _, err := c.Checked(); err != nil {
		t.Fatalf("resp on 0.0.0.0 with a token: %v", err)
	}
	c = base
	c.RESP = "127.0.0.1:6380"
	if _, err := c.Checked(); err != nil {
		t.Fatalf("resp on loopback without a token: %v", err)
	}
}

// respRecord is a record as the client scripts expect it: names and
// values in hex.
type respRecord struct {
	ID     string      `json:"id"`
	Fields [][2]string `json:"fields"`
}

// TestRESPClients: redis-py and ioredis, against a server with tokens and
// a RESP front, read an archived stream whose records were XADDed
// directly (NUL bytes, CRLF, empty and large values) byte-identical
// through XRANGE, XREVRANGE and XREAD after a cycle, use GET/SET,
// MULTI/EXEC and SUBSCRIBE through it, and are refused a write with the
// read token and anything with a wrong token. No token shows in the
// server's logs.
func TestRESPClients(t *testing.T) {
	ctx := context.Background()
	py, pyErr := testserver.PythonRedis(ctx)
	js, jsErr := testserver.IORedis(ctx)
	r := servers.Redis(t)
	readTok, writeTok := "resp-read-token-"+strconv.Itoa(os.Getpid()), "resp-write-token-"+strconv.Itoa(os.Getpid())
	e, logs := startLogged(t, Config{Redis: r.URL, RESP: "127.0.0.1:0", Tokens: []TokenConfig{
		{Name: "reader", Scopes: []string{"read"}, Value: readTok},
		{Name: "writer", Scopes: []string{"write"}, Value: writeTok}}})
	q := queueName(t)
	ref, err := names.ParseStreamRef(q, "orders")
	if err != nil {
		t.Fatal(err)
	}
	key := "emq:{" + q + "}:stream:orders"
	var want []respRecord
	for i := range 300 {
		fields := [][2]string{{"n", strconv.Itoa(i)}}
		switch i % 6 {
		case 1:
			fields = append(fields, [2]string{"nul", "a\x00b"})
		case 2:
			fields = append(fields, [2]string{"crlf", "x\r\n$3\r\nabc\r\n"})
		case 3:
			fields = append(fields, [2]string{"empty", ""})
		case 4:
			fields = append(fields, [2]string{"big", strings.Repeat("é", 5000)})
		}
		args := []string{"XADD", key, "*"}
		rec := respRecord{}
		for _, f := range fields {
			args = append(args, f[0], f[1])
			rec.Fields = append(rec.Fields, [2]string{hex.EncodeToString([]byte(f[0])), hex.EncodeToString([]byte(f[1]))})
		}
		if rec.ID, err = testserver.Do(ctx, r.Addr, args...); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	if _, err := e.srv.node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 30}}); err != nil {
		t.Fatal(err)
	}
	if n, err := testserver.Do(ctx, r.Addr, "XLEN", key); err != nil || n != "30" {
		t.Fatalf("live XLEN after the cycle: %s, %v; want 30", n, err)
	}
	wantFile := filepath.Join(t.TempDir(), "want.json")
	b, _ := json.Marshal(want)
	if err := os.WriteFile(wantFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(e.srv.RESPAddr().String())
	env := append(os.Environ(), "RESP_HOST="+host, "RESP_PORT="+port, "READ_TOKEN="+readTok, "WRITE_TOKEN="+writeTok,
		"KEY="+key, "WANT="+wantFile)
	run := func(t *testing.T, name string, args ...string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
		}
	}
	t.Run("redis-py", func(t *testing.T) {
		if pyErr != nil {
			testserver.Unavailable(t, pyErr)
		}
		run(t, py, "testdata/resp/redis_py_check.py")
	})
	t.Run("ioredis", func(t *testing.T) {
		if jsErr != nil {
			testserver.Unavailable(t, jsErr)
		}
		env = append(env, "NODE_PATH="+js)
		run(t, "node", "testdata/resp/ioredis_check.js")
	})
	for _, tok := range []string{readTok, writeTok} {
		if strings.Contains(logs.String(), tok) {
			t.Fatal("a token shows in the server's logs")
		}
	}
}
