package mq

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// testCtx returns a context that ends with the test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var queueSeq atomic.Int64

var notName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// queueName returns a queue name unique to the test.
func queueName(t testing.TB) string {
	n := notName.ReplaceAllString(t.Name(), "_")
	if len(n) > 80 {
		n = n[:80]
	}
	return fmt.Sprintf("%s.%d", n, queueSeq.Add(1))
}

// connect connects to url with opts and closes the client with the test.
func connect(t testing.TB, url string, opts Options) *Client {
	t.Helper()
	opts.URL = url
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	c, err := Connect(testCtx(t), opts)
	if err != nil {
		t.Fatalf("Connect(%s): %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

// plain connects to the package's plain redis-server.
func plain(t testing.TB, opts Options) *Client {
	return connect(t, servers.Redis(t).URL, opts)
}

// cluster connects to the package's 3-master Redis Cluster.
func cluster(t testing.TB, opts Options) *Client {
	cl := servers.Cluster(t)
	return connect(t, "redis://"+strings.Join(cl.Addrs, ","), opts)
}

// eachServer runs f against the plain server and the cluster.
func eachServer(t *testing.T, opts Options, f func(t *testing.T, c *Client)) {
	eachServerConn(t, func(t *testing.T, conn func(testing.TB, Options) *Client) { f(t, conn(t, opts)) })
}

// eachServerConn runs f against the plain server and the cluster, giving it
// the function that connects to the one at hand (plain or cluster).
func eachServerConn(t *testing.T, f func(t *testing.T, conn func(testing.TB, Options) *Client)) {
	t.Run("redis", func(t *testing.T) { f(t, plain) })
	t.Run("cluster", func(t *testing.T) { f(t, cluster) })
}

// proxied connects with opts through a ScriptProxy in front of the plain
// server, which the test then tells which script replies to lose.
func proxied(t testing.TB, opts Options) (*Client, *testserver.ScriptProxy) {
	proxy := testserver.StartScriptProxy(t, servers.Redis(t).Addr)
	return connect(t, "redis://"+proxy.Addr+"/0", opts), proxy
}

// eachLostReplies runs f with no reply lost before the fault it plays, and
// with one (the first call runs, its reply is lost).
func eachLostReplies(t *testing.T, f func(t *testing.T, drops int64)) {
	for _, drops := range []int64{0, 1} {
		t.Run(fmt.Sprintf("lost_replies=%d", drops), func(t *testing.T) { f(t, drops) })
	}
}

// wantPlayed checks that the proxy played every fault it was given and that
// the client retried retries times.
func wantPlayed(t testing.TB, c *Client, proxy *testserver.ScriptProxy, retries int64) {
	t.Helper()
	if d, l := proxy.Pending(); d != 0 || l != 0 || c.Stats().Retries != retries {
		t.Fatalf("pending drops %d, LOADING answers %d; retries %d; want 0, 0, %d", d, l, c.Stats().Retries, retries)
	}
}

// fixedMinter returns a minter whose clock stands still at t0, so that
// minters made alike mint the same ids.
func fixedMinter(t testing.TB, t0 time.Time) *brand.Minter {
	m, err := brand.NewMinter(0, brand.WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fields(kv ...string) []Field {
	out := make([]Field, len(kv)/2)
	for i := range out {
		out[i] = Field{Name: kv[2*i], Value: kv[2*i+1]}
	}
	return out
}

// readAll reads a whole range and fails the test on any error.
func readAll(t testing.TB, c *Client, q, s string, from, to brand.ID, count int, reverse bool) []Record {
	t.Helper()
	var out []Record
	lo, hi := from.XID(), to.XID()
	if from == 0 {
		lo = xid.Min
	}
	if to == brand.Max {
		hi = xid.Max
	}
	for rec, err := range c.Read(testCtx(t), mustRef(t, q, s), lo, hi, count, reverse) {
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		out = append(out, rec)
	}
	return out
}

// mustRef returns the StreamRef of stream s of queue q, failing the test if
// the names are not valid.
func mustRef(t testing.TB, q, s string) names.StreamRef {
	t.Helper()
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		t.Fatalf("stream %s/%s: %v", q, s, err)
	}
	return ref
}

// mustQueue returns queue name q checked, failing the test if it is not
// valid.
func mustQueue(t testing.TB, q string) names.Queue {
	t.Helper()
	qq, err := names.ParseQueue(q)
	if err != nil {
		t.Fatalf("queue %s: %v", q, err)
	}
	return qq
}

// mustVolume returns volume name v checked, failing the test if it is not
// valid.
func mustVolume(t testing.TB, v string) names.Volume {
	t.Helper()
	vv, err := names.ParseVolume(v)
	if err != nil {
		t.Fatalf("volume %s: %v", v, err)
	}
	return vv
}

// eachAppendPath runs f for both paths of a chunk's first send: as a
// transaction (txMin 1: every chunk) and through the append script (txMin
// above any chunk of the test). f gives its client the path (usePath).
func eachAppendPath(t *testing.T, f func(t *testing.T, txMin int)) {
	t.Run("tx", func(t *testing.T) { f(t, 1) })
	t.Run("script", func(t *testing.T) { f(t, 1<<30) })
}

// usePath makes c send chunks of txMin records or more as transactions,
// failing the test if c has none (txMin 1 would then test the script).
func usePath(t testing.TB, c *Client, txMin int) {
	t.Helper()
	if txMin == 1 && !c.tx {
		t.Fatal("the client does not append through transactions")
	}
	c.txMin = txMin
}
