package resp_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/resp"
)

// TestCluster: behind a 3-master Redis Cluster the front relays to one
// master; archived reads serve every stream whatever its slot (the node
// reads through its Cluster client), and a relayed command for a slot of
// another master gets Redis's MOVED redirect unchanged.
func TestCluster(t *testing.T) {
	cl := servers.Cluster(t)
	ctx := context.Background()
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: "redis://" + strings.Join(cl.Addrs, ",")})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(ctx)
	s, err := resp.New(resp.Config{Upstream: resp.Upstream{Addr: cl.Addrs[0]}, Archive: node, Lookup: node})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ctx, ln)
	defer s.Close()
	front := dial(t, ln.Addr().String())
	direct := dial(t, cl.Addrs[0])
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // -count=N repeats the test
	for i := range 6 {                                  // six hashtags: their slots fall on more than one master
		ref, err := names.ParseStreamRef("clu"+strconv.Itoa(i)+"-"+run, "s")
		if err != nil {
			t.Fatal(err)
		}
		for j := range 20 {
			if _, err := node.Append(ctx, ref, [][]echostore.Field{{{Name: "n", Value: strconv.Itoa(j)}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 3}}); err != nil {
			t.Fatal(err)
		}
		key := "emq:{" + ref.Queue().String() + "}:stream:s"
		if got := front.must("XRANGE", key, "-", "+"); !strings.HasPrefix(got, "*20\r\n") {
			t.Errorf("XRANGE of %s through the front: %.60q, want its 20 records", key, got)
		}
		if got := front.must("XLEN", key); got != ":20\r\n" {
			t.Errorf("XLEN of %s: %q, want 20", key, got)
		}
	}
	moved := 0
	for i := range 40 {
		k := "clu-key-" + strconv.Itoa(i)
		got, want := front.do("GET", k), direct.do("GET", k)
		if got != want {
			t.Fatalf("GET %s through the front: %q, want the master's own reply %q", k, got, want)
		}
		if strings.HasPrefix(got, "-MOVED ") {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key of 40 is on another master: the test proves nothing")
	}
}
