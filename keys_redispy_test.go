package echostore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

// redisPyProducer XADDs N entries to KEY with '*' ids, printing each id.
const redisPyProducer = `
import os, redis
r = redis.Redis.from_url(os.environ["REDIS_URL"])
if os.environ.get("CLUSTER"):
    r = redis.cluster.RedisCluster.from_url(os.environ["REDIS_URL"])
key = os.environ["KEY"]
for i in range(int(os.environ["N"])):
    print(r.xadd(key, {"item": str(i), "src": "redis-py"}).decode(), flush=True)
`

// redisPyConsumer reads KEY with XREADGROUP in group g, acknowledging
// each entry, until it has N of them, printing "id item" per entry.
const redisPyConsumer = `
import os, sys, time, redis
r = redis.Redis.from_url(os.environ["REDIS_URL"])
if os.environ.get("CLUSTER"):
    r = redis.cluster.RedisCluster.from_url(os.environ["REDIS_URL"])
key, n = os.environ["KEY"], int(os.environ["N"])
seen, deadline = 0, time.time() + 60
while seen < n:
    if time.time() > deadline:
        sys.exit("consumer: %d of %d entries after 60s" % (seen, n))
    for _, entries in r.xreadgroup("g", "c1", {key: ">"}, count=7, block=500) or []:
        for xid, fields in entries:
            print(xid.decode(), fields[b"item"].decode(), flush=True)
            r.xack(key, "g", xid)
            seen += 1
`

// TestRedisPyKeyStream: an application's own producer (redis-py, XADD K *)
// and consumer group (XREADGROUP, XACK) on the key "orders" keep working
// while echostore bounds the stream in place, cycle after cycle: the group
// receives every entry once and in order, echostore's merge-read returns
// every entry with the application's ids, and the live stream ends at the
// window.
func TestRedisPyKeyStream(t *testing.T) {
	addr := strings.SplitN(redisURL, "/", 4)[2] // redis://host:port/…
	redisPyKeyStream(t, redisURL, []string{addr}, "")
}

// TestRedisPyKeyStreamOnCluster is TestRedisPyKeyStream on a 3-master
// Redis Cluster: redis-py's RedisCluster produces and consumes, echostore
// cycles through its cluster client.
func TestRedisPyKeyStreamOnCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := testserver.StartCluster(ctx, 3)
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { cl.Stop() })
	redisPyKeyStream(t, "redis://"+strings.Join(cl.Addrs, ","), cl.Addrs, "redis://"+cl.Addrs[0])
}

// redisPyKeyStream runs TestRedisPyKeyStream against url (echostore's
// Redis URL), whose masters are at addrs; pyURL, when set, is redis-py's
// URL of a Redis Cluster (else it uses url, a single server).
func redisPyKeyStream(t *testing.T, url string, addrs []string, pyURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	py, err := testserver.RedisPy(ctx)
	if err != nil {
		testserver.Unavailable(t, err)
	}
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: url})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(ctx)
	const n, keep = 500, 20
	key := "orders." + strings.ReplaceAll(t.Name(), "/", ".")
	ref, err := names.ParseKeyRef(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: keep}}); err == nil {
		t.Fatal("cycle of a key that does not exist succeeded")
	}
	// The group is made on the master that holds the key's slot (the
	// others answer MOVED).
	var gerr error
	for _, addr := range addrs {
		if _, gerr = testserver.Do(ctx, addr, "XGROUP", "CREATE", key, "g", "0", "MKSTREAM"); gerr == nil {
			break
		}
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	env := append(os.Environ(), "REDIS_URL="+url, "KEY="+key, fmt.Sprint("N=", n))
	if pyURL != "" {
		env = append(os.Environ(), "REDIS_URL="+pyURL, "CLUSTER=1", "KEY="+key, fmt.Sprint("N=", n))
	}
	run := func(script string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.CommandContext(ctx, py, "-c", script)
		cmd.Env = env
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}
	consumer, consumed := run(redisPyConsumer)
	producer, produced := run(redisPyProducer)
	done := make(chan error, 2)
	go func() { done <- producer.Wait() }()
	go func() { done <- consumer.Wait() }()
	cycles, folded := 0, int64(0)
	for exited := 0; exited < 2; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("redis-py: %v", err)
			}
			exited++
		default:
		}
		res, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: keep}})
		if err != nil {
			t.Fatalf("cycle %d while redis-py produces and consumes: %v", cycles, err)
		}
		if res.AppTrimmed != nil {
			t.Fatalf("cycle %d reports an application trim: %+v", cycles, *res.AppTrimmed)
		}
		cycles++
		folded += res.Folded
	}
	res, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: keep}})
	if err != nil {
		t.Fatal(err)
	}
	folded += res.Folded
	ids := strings.Fields(produced.String())
	if len(ids) != n {
		t.Fatalf("the producer printed %d ids, want %d", len(ids), n)
	}
	lines := strings.Split(strings.TrimSpace(consumed.String()), "\n")
	if len(lines) != n {
		t.Fatalf("the group received %d entries, want %d", len(lines), n)
	}
	for i, l := range lines {
		if l != fmt.Sprintf("%s %d", ids[i], i) {
			t.Fatalf("the group's entry %d is %q, want %q", i, l, fmt.Sprintf("%s %d", ids[i], i))
		}
	}
	i := 0
	for rec, err := range node.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		item, _ := rec.Get("item")
		if i >= n || echostore.FormatID(ref, rec.ID) != ids[i] || item != fmt.Sprint(i) {
			t.Fatalf("merge-read record %d: %s item %s, want %s item %d", i, echostore.FormatID(ref, rec.ID), item, ids[min(i, n-1)], i)
		}
		i++
	}
	if i != n {
		t.Fatalf("merge-read returned %d records, want %d", i, n)
	}
	st, err := node.Status(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if folded != n-keep || st.Live != keep || st.Watermark == nil || *st.Watermark != ids[n-keep-1] {
		t.Fatalf("after %d cycles: folded %d, status %+v (watermark %v); want %d folded, %d live, watermark %s",
			cycles, folded, st, st.Watermark, n-keep, keep, ids[n-keep-1])
	}
	t.Logf("%d cycles bounded the stream while redis-py produced and consumed %d entries", cycles, n)
}
