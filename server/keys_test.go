package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// TestConfigKeyStreams: top-level streams are named by their key, and
// what a key stream's entry may not hold is refused.
func TestConfigKeyStreams(t *testing.T) {
	no := false
	c, err := checked(Config{
		Defaults: StreamConfig{Keep: 50},
		Streams: []StreamConfig{
			{Key: "orders", Keep: 100, MaxAge: 24 * time.Hour, TrimAfter: "remote"},
			{Key: "app/eu:orders", Archived: &no},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	all := c.declaredStreams()
	if len(all) != 2 {
		t.Fatalf("declared %d streams, want 2", len(all))
	}
	k, ok := all[0].ref.Key()
	if !ok || k.String() != "orders" || all[0].window.Keep != 100 || !all[0].archived || all[0].trimAfter.String() != "remote" {
		t.Fatalf("orders: %+v", all[0])
	}
	if k, _ := all[1].ref.Key(); k.String() != "app/eu:orders" || all[1].archived || all[1].window.Keep != 50 {
		t.Fatalf("app/eu:orders: %+v", all[1])
	}
	if st, ok := c.declared(all[0].ref); !ok || st.window.Keep != 100 {
		t.Fatalf("declared(orders) = %+v %v", st, ok)
	}
	for _, bad := range []Config{
		{Streams: []StreamConfig{{Name: "s"}}},
		{Streams: []StreamConfig{{Key: ""}}},
		{Streams: []StreamConfig{{Key: "emq:{q}:stream:s"}}},
		{Streams: []StreamConfig{{Key: "k"}, {Key: "k"}}},
		{Streams: []StreamConfig{{Key: "k", Keep: -1}}},
		{Queues: []QueueConfig{{Name: "a", Streams: []StreamConfig{{Name: "s", Key: "k"}}}}},
		{MaxStreams: 1, Queues: []QueueConfig{{Name: "a", Streams: []StreamConfig{{Name: "s"}}}}, Streams: []StreamConfig{{Key: "k"}}},
	} {
		if _, err := checked(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", bad, err)
		}
	}
}

// TestKeyStreamRoutes: the /v1/keys/{k} routes, K path-escaped, on a key
// stream declared in the configuration before its key exists: the beat
// leaves it alone (no failed cycle), the application XADDs, and a cycle,
// the merge-read (Redis ids), the status and the delete work on it.
func TestKeyStreamRoutes(t *testing.T) {
	key := "app/" + queueName(t) + " orders:eu"
	e := start(t, Config{Streams: []StreamConfig{{Key: key, Keep: 2}}})
	path := "/v1/keys/" + url.PathEscape(key)
	ctx := context.Background()
	e.srv.Beat(ctx)
	// A declared stream's counters exist from the start, at 0.
	for _, line := range strings.Split(string(e.must("GET", "/metrics", "")), "\n") {
		if strings.HasPrefix(line, "echostore_fold_errors_total{") && !strings.HasSuffix(line, " 0") {
			t.Fatalf("a beat over a declared key that does not exist yet failed a cycle: %s", line)
		}
	}
	if code, body := e.do("POST", path+"/cycle?keep=2", "", nil); code != 404 || !strings.Contains(string(body), "does not exist") {
		t.Fatalf("cycle of a key not there yet: %d %s", code, body)
	}
	addr := strings.TrimPrefix(e.cfg.Redis, "redis://")
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	var want []string
	for i := range 5 {
		xid := fmt.Sprintf("1733052000%03d-0", i)
		if _, err := testserver.Do(ctx, addr, "XADD", key, xid, "n", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf(`{"id":"%s","fields":{"n":"%d"}}`, xid, i))
	}
	var cyc struct {
		Folded, Trimmed int64
		Watermark       string
	}
	if err := json.Unmarshal(e.must("POST", path+"/cycle", ""), &cyc); err != nil {
		t.Fatal(err)
	}
	if cyc.Folded != 3 || cyc.Trimmed != 3 || cyc.Watermark != "1733052000002-0" {
		t.Fatalf("cycle: %+v", cyc)
	}
	if got := strings.TrimSpace(string(e.must("GET", path, ""))); got != strings.Join(want, "\n") {
		t.Fatalf("merge-read:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if got := strings.TrimSpace(string(e.must("GET", path+"?from=1733052000001-0&to=1733052000003-0&reverse=true", ""))); got != want[3]+"\n"+want[2]+"\n"+want[1] {
		t.Fatalf("range read across the seam: %s", got)
	}
	ref, _ := names.ParseKeyRef(key)
	var st struct {
		Watermark string
		Live      int64
		Volume    string
	}
	if err := json.Unmarshal(e.must("GET", path+"/archive", ""), &st); err != nil {
		t.Fatal(err)
	}
	if st.Watermark != "1733052000002-0" || st.Live != 2 || st.Volume != ref.Volume().String() {
		t.Fatalf("status: %+v", st)
	}
	metrics := string(e.must("GET", "/metrics", ""))
	if lbl := fmt.Sprintf(`echostore_folded_records_total{queue="",stream=%q} 3`, ref.String()); !strings.Contains(metrics, lbl) {
		t.Errorf("metrics lack %s", lbl)
	}
	e.must("DELETE", path+"?confirm="+DeleteConfirm, "")
	if n, err := testserver.Do(ctx, addr, "EXISTS", key); err != nil || n != "0" {
		t.Fatalf("EXISTS after the delete: %q %v", n, err)
	}
}

// TestDiscoverKeyStream: a key stream registered as archived in Redis (an
// archive cycle run from the CLI) is adopted by serve's discovery, as a
// stream of a queue is.
func TestDiscoverKeyStream(t *testing.T) {
	on := true
	e := start(t, Config{Discover: &on})
	ctx := t.Context()
	c, err := mq.Connect(ctx, mq.Options{URL: e.cfg.Redis, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ref, err := names.ParseKeyRef("disc}" + queueName(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := archive.RegisterArchived(ctx, c, ref); err != nil {
		t.Fatal(err)
	}
	e.srv.Beat(ctx)
	if st, ok := e.srv.lookup(ref); !ok || !st.archived {
		t.Fatalf("discovery did not adopt %s: %+v %v", ref, st, ok)
	}
}
