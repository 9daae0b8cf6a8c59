package resp_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

// TestKeyStreamRedisPy: redis-py XADDs binary-safe values to the
// application's own key orders with * through the front; a cycle of
// names.KeyRef(orders) folds all but 20 into the archive; then, through
// the front, XRANGE - +, XREVRANGE, XREAD from 0 and after an id return
// every entry byte-identical under its original id, XLEN and XINFO STREAM
// count archive and live tail; XTRIM, DEL, UNLINK, XDEL, RENAME, EXPIRE,
// SET and XADD with MAXLEN or a MINID above the watermark of the archived
// key are refused to the write and to the admin token (Redis still holds
// its 20 entries), XADD and the consumer group commands run, an XADD with
// MINID at the watermark runs, and a key that is not archived passes
// through (keystream.py).
func TestKeyStreamRedisPy(t *testing.T) {
	ctx := context.Background()
	py, err := testserver.PythonRedis(ctx)
	if err != nil {
		testserver.Unavailable(t, err)
	}
	e := newEnv(t, true)
	host, port, _ := net.SplitHostPort(e.front)
	_, rport, _ := net.SplitHostPort(e.redis)
	env := append(os.Environ(), "RESP_HOST="+host, "RESP_PORT="+port, "REDIS_PORT="+rport, "KEY=orders",
		"READ_TOKEN="+readToken, "WRITE_TOKEN="+writeToken, "ADMIN_TOKEN="+adminToken, "LIVE=20",
		"WANT="+filepath.Join(t.TempDir(), "want.json"))
	run := func(phase string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, py, "testdata/keystream.py", phase)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("keystream.py %s: %v\n%s", phase, err, out)
		}
		if phase == "read" && strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("keystream.py %s: %s", phase, out)
		}
	}
	run("write")
	ref, err := names.ParseKeyRef("orders")
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 20}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded != 180 {
		t.Fatalf("the cycle folded %d records, want 180", res.Folded)
	}
	direct := dial(t, e.redis)
	if got := direct.must("XLEN", "orders"); got != ":20\r\n" {
		t.Fatalf("Redis XLEN after the cycle: %q, want 20 live", got)
	}
	run("read")
}

// TestArchivedKeyWriteScope: the write rule for an archived stream key,
// over the raw protocol: plain XADD and XADD with a field named MAXLEN
// run; XTRIM MAXLEN, XTRIM MINID above the watermark's successor, XADD
// MAXLEN (options in any order), DEL (also as a second key) and XSETID are
// refused before they reach Redis, to the write and to the admin token;
// inside MULTI the refused command dooms the transaction (EXEC aborts, as
// Redis aborts one whose command it refused); XTRIM MINID at the
// watermark's successor runs (it removes folded entries only); the same
// commands on a key that is not archived run.
func TestArchivedKeyWriteScope(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	direct := dial(t, e.redis)
	fill(t, direct, "orders", 30)
	fill(t, direct, "scratch", 3)
	ref, err := names.ParseKeyRef("orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 5}}); err != nil {
		t.Fatal(err)
	}
	seam, ok, err := archive.GetArchived(ctx, e.live, ref)
	if err != nil || !ok {
		t.Fatalf("seam cache of orders: %v, %v", ok, err)
	}
	next, _ := seam.W.Next()
	above, _ := next.Next()
	w := dial(t, e.front)
	w.must("AUTH", writeToken)
	a := dial(t, e.front)
	a.must("AUTH", adminToken)
	w.must("XADD", "orders", "*", "a", "b")
	w.must("XADD", "orders", "*", "MAXLEN", "0")
	for _, c := range [][]string{
		{"XTRIM", "orders", "MAXLEN", "~", "1000"},
		{"XTRIM", "orders", "MINID", above.String()},
		{"XADD", "orders", "MAXLEN", "~", "1", "*", "a", "b"},
		{"XADD", "orders", "NOMKSTREAM", "MAXLEN", "0", "*", "a", "b"},
		{"XADD", "orders", "LIMIT", "100", "MAXLEN", "~", "0", "*", "a", "b"},
		{"DEL", "scratch", "orders"},
		{"XSETID", "orders", "9999999999999-0"},
	} {
		for _, cl := range []*client{w, a} {
			if got := cl.do(c...); !strings.HasPrefix(got, "-NOPERM echostore: ") || !strings.Contains(got, "archived stream") {
				t.Errorf("%v: %q, want NOPERM echostore: … archived stream", c, got)
			}
		}
	}
	w.must("MULTI")
	w.must("SET", "in-multi", "1")
	if got := w.do("XTRIM", "orders", "MAXLEN", "0"); !strings.HasPrefix(got, "-NOPERM echostore: ") {
		t.Errorf("XTRIM inside MULTI: %q, want NOPERM", got)
	}
	if got := w.do("EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
		t.Errorf("EXEC after a refused command: %q, want EXECABORT", got)
	}
	if got := direct.must("EXISTS", "in-multi"); got != ":0\r\n" {
		t.Errorf("the doomed transaction's SET ran: EXISTS %q", got)
	}
	w.must("MULTI")
	w.must("SET", "in-multi", "1")
	if got := w.must("EXEC"); got != "*1\r\n+OK\r\n" {
		t.Errorf("EXEC of the next transaction: %q", got)
	}
	if got := direct.must("XLEN", "orders"); got != ":7\r\n" {
		t.Errorf("Redis XLEN of orders: %q, want 7 (5 live and 2 appends; nothing trimmed)", got)
	}
	if got := w.must("XTRIM", "orders", "MINID", next.String()); got != ":0\r\n" {
		t.Errorf("XTRIM MINID at the watermark's successor: %q, want :0 (nothing above W)", got)
	}
	if got := a.must("XTRIM", "orders", "MINID", "~", seam.W.String()); got != ":0\r\n" {
		t.Errorf("XTRIM MINID ~ W with the admin token: %q", got)
	}
	if got := w.must("XTRIM", "scratch", "MAXLEN", "1"); got != ":2\r\n" {
		t.Errorf("XTRIM of a key that is not archived: %q", got)
	}
	if got := w.must("DEL", "scratch"); got != ":1\r\n" {
		t.Errorf("DEL of a key that is not archived: %q", got)
	}
}
