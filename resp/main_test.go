package resp_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/resp"
)

var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// env is a front over a node over the package's redis-server.
type env struct {
	t     testing.TB
	node  *echostore.Node
	live  *mq.Client // a client of the node's Redis, for what the tests read or write below the node
	redis string     // redis-server's address
	front string     // the front's address
}

// token values of newEnv's tokens.
const (
	readToken  = "read-token-0123456789"
	writeToken = "write-token-0123456789"
	adminToken = "admin-token-0123456789"
)

// newEnv starts a front; with tokens, AUTH takes the three tokens above.
func newEnv(t testing.TB, tokens bool) *env {
	t.Helper()
	r := servers.Redis(t)
	ctx := context.Background()
	// Each test starts from an empty Redis (the tests do not run in
	// parallel), so that -count=N repeats them.
	if _, err := testserver.Do(ctx, r.Addr, "FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	live, err := mq.Connect(ctx, mq.Options{URL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	cfg := resp.Config{Upstream: resp.Upstream{Addr: r.Addr}, Archive: node, Lookup: node}
	if tokens {
		cfg.Authenticate = func(_, pass []byte) (resp.Identity, bool) {
			switch string(pass) {
			case readToken:
				return resp.Identity{Name: "reader", Scope: resp.ScopeRead}, true
			case writeToken:
				return resp.Identity{Name: "writer", Scope: resp.ScopeWrite}, true
			case adminToken:
				return resp.Identity{Name: "admin", Scope: resp.ScopeAdmin}, true
			}
			return resp.Identity{}, false
		}
	}
	s, err := resp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		s.Close()
		<-done
		node.Close(ctx)
		live.Close()
	})
	return &env{t: t, node: node, live: live, redis: r.Addr, front: ln.Addr().String()}
}

// ref makes a stream of the test's own and returns it and its key.
func (e *env) ref(s string) (names.StreamRef, string) {
	e.t.Helper()
	q := strings.NewReplacer("/", ".", "_", "-").Replace(strings.ToLower(e.t.Name()))
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		e.t.Fatal(err)
	}
	return ref, "emq:{" + q + "}:stream:" + s
}

// cycle folds all but keep records of ref into its archive.
func (e *env) cycle(ref names.StreamRef, keep int64) {
	e.t.Helper()
	if _, err := e.node.Cycle(context.Background(), ref, echostore.CycleOptions{Window: echostore.Window{Keep: keep}}); err != nil {
		e.t.Fatal(err)
	}
}

// client is a raw RESP connection: commands in, replies as bytes out.
type client struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes a command without reading its reply.
func (c *client) send(args ...string) {
	c.t.Helper()
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		c.t.Fatal(err)
	}
}

// read reads one reply's bytes.
func (c *client) read() string {
	c.t.Helper()
	rep, err := resp.ReadReply(c.r, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return string(rep)
}

// do sends a command and returns its reply's bytes.
func (c *client) do(args ...string) string {
	c.t.Helper()
	c.send(args...)
	return c.read()
}

// must is do, failing on an error reply.
func (c *client) must(args ...string) string {
	c.t.Helper()
	rep := c.do(args...)
	if strings.HasPrefix(rep, "-") {
		c.t.Fatalf("%v: %q", args, rep)
	}
	return rep
}
