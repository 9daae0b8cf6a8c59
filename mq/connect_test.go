package mq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
)

func setPolicy(t testing.TB, addr, policy string) {
	t.Helper()
	if _, err := testserver.Do(context.Background(), addr, "CONFIG", "SET", "maxmemory-policy", policy); err != nil {
		t.Fatalf("CONFIG SET maxmemory-policy %s on %s: %v", policy, addr, err)
	}
}

// Invariant 9: a server that may evict keys is refused at connect, with a
// message that says what to set, unless the override is given.
func TestEvictingPolicyRefused(t *testing.T) {
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	for _, policy := range []string{"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu",
		"volatile-random", "volatile-ttl"} {
		setPolicy(t, r.Addr, policy)
		_, err := Connect(testCtx(t), Options{URL: r.URL})
		if !errors.Is(err, ErrEvictingPolicy) {
			t.Fatalf("maxmemory-policy %s: Connect = %v, want ErrEvictingPolicy", policy, err)
		}
		if msg := err.Error(); !strings.Contains(msg, policy) || !strings.Contains(msg, "noeviction") ||
			!strings.Contains(msg, "allow_eviction") {
			t.Fatalf("the error does not say what is wrong and what to do: %s", msg)
		}
	}
	// The explicit overrides: an option, or the URL.
	c := connect(t, r.URL, Options{AllowEviction: true})
	if _, err := c.Append(testCtx(t), mustRef(t, "q", "s"), fields("a", "1")...); err != nil {
		t.Fatal(err)
	}
	connect(t, r.URL+"?allow_eviction=true", Options{})
	setPolicy(t, r.Addr, "noeviction")
	connect(t, r.URL, Options{})
}

// On a Cluster every master is checked: one evicting master is enough to
// refuse.
func TestEvictingPolicyRefusedOnOneClusterMaster(t *testing.T) {
	cl := servers.Cluster(t)
	last := cl.Addrs[len(cl.Addrs)-1]
	setPolicy(t, last, "allkeys-lru")
	t.Cleanup(func() { setPolicy(t, last, "noeviction") })
	url := "redis://" + cl.Addrs[0] // one seed is enough to find the others
	_, err := Connect(testCtx(t), Options{URL: url})
	if !errors.Is(err, ErrEvictingPolicy) || !strings.Contains(err.Error(), last) {
		t.Fatalf("Connect = %v, want ErrEvictingPolicy naming %s", err, last)
	}
	setPolicy(t, last, "noeviction")
	c := connect(t, url, Options{})
	if n := len(c.rdb.Nodes()); n < 3 {
		t.Fatalf("the client knows %d nodes of a 3-master cluster", n)
	}
}

func TestConnectErrors(t *testing.T) {
	if _, err := Connect(testCtx(t), Options{URL: "http://x"}); !errors.Is(err, ErrBadURL) {
		t.Fatalf("bad URL: %v", err)
	}
	// A cluster has only db 0.
	cl := servers.Cluster(t)
	if _, err := Connect(testCtx(t), Options{URL: "redis://" + cl.Addrs[0] + "/2"}); err == nil || !strings.Contains(err.Error(), "cluster") {
		t.Fatalf("db 2 on a cluster: %v, want an error about the cluster", err)
	}
	// Username and password reach the server.
	r := servers.Redis(t)
	if _, err := testserver.Do(context.Background(), r.Addr, "ACL", "SETUSER", "emqtest", "on", ">s3cret", "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	if _, err := Connect(testCtx(t), Options{URL: "redis://emqtest:wrong@" + r.Addr}); err == nil {
		t.Fatal("connected with a wrong password")
	}
	c := connect(t, "redis://emqtest:s3cret@"+r.Addr+"/3", Options{})
	if _, err := c.Append(testCtx(t), mustRef(t, "q", "s"), fields("a", "1")...); err != nil {
		t.Fatal(err)
	}
	info, err := c.rdb.Do(testCtx(t), c.rdb.B().ClientInfo().Build()).ToString()
	if err != nil || !strings.Contains(info, " db=3 ") || !strings.Contains(info, " user=emqtest ") {
		t.Fatalf("CLIENT INFO = %q, %v; want db 3 as user emqtest", info, err)
	}
}

// The client reconnects by itself: after the server is killed and
// restarted, appends go on, and nothing acknowledged before is lost (AOF
// with appendfsync always).
//
//echostore:fault
func TestReconnectAfterRestart(t *testing.T) {
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{AOF: true})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	c := connect(t, r.URL, Options{RetryBackoff: 10 * time.Millisecond})
	ctx := testCtx(t)
	first, err := c.Append(ctx, mustRef(t, "q", "s"), fields("n", "1")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(ctx); err != nil { // SIGKILL, then start again
		t.Fatal(err)
	}
	second, err := c.Append(ctx, mustRef(t, "q", "s"), fields("n", "2")...)
	if err != nil {
		t.Fatalf("append after a restart: %v", err)
	}
	recs := readAll(t, c, "q", "s", 0, brand.Max, 0, false)
	if len(recs) != 2 || recs[0].ID != first.XID() || recs[1].ID != second.XID() {
		t.Fatalf("after the restart the stream holds %+v", recs)
	}
}
