package resp_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/resp"
)

// values are the field values of the records the tests XADD directly:
// every one comes back byte-identical.
func values(i int) []string {
	switch i % 10 {
	case 1:
		return []string{"v", "nul\x00byte"}
	case 2:
		return []string{"v", "crlf\r\nin $5\r\nhello\r\n*2\r\n"}
	case 3:
		return []string{"v", "ünïcödé ✓ 🚀"}
	case 4:
		return []string{"v", ""}
	case 7:
		return []string{"bin\xff", "\xff\xfe\x00\x80", "bin\xff", "a repeated name"}
	case 5:
		return []string{"a", "1", "b", "2", "c", "3", "d", strings.Repeat("x", 300)}
	case 6:
		if i == 56 {
			return []string{"big", strings.Repeat("0123456789", 7000)}
		}
	}
	return []string{"v", "value-" + strconv.Itoa(i)}
}

// fill XADDs n records with * ids directly to Redis and returns their ids.
func fill(t *testing.T, direct *client, key string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		rep := direct.must(append([]string{"XADD", key, "*"}, values(i)...)...)
		ids[i] = strings.TrimSpace(rep[strings.IndexByte(rep, '\n')+1:])
	}
	return ids
}

func ms(id string) string { return id[:strings.IndexByte(id, '-')] }

// TestArchivedReadsByteIdentical: the replies of XRANGE, XREVRANGE and
// XREAD (bounds, COUNT, exclusive ends, several keys) through the front
// after a cycle archived most of the stream are byte for byte Redis's
// replies before the cycle, in RESP2 and RESP3; XLEN counts archive and
// live tail.
func TestArchivedReadsByteIdentical(t *testing.T) {
	e := newEnv(t, false)
	ref, key := e.ref("orders")
	_, other := e.ref("other") // never archived
	direct := dial(t, e.redis)
	ids := fill(t, direct, key, 300)
	fill(t, direct, other, 20)
	cmds := [][]string{
		{"XRANGE", key, "-", "+"},
		{"XRANGE", key, "-", "+", "COUNT", "7"},
		{"XRANGE", key, "-", "+", "COUNT", "2000"}, // read ahead (aheadMin)
		{"XREVRANGE", key, "+", "-", "COUNT", "1500"},
		{"XREVRANGE", key, "+", "-", "COUNT", "9"},
		{"XREVRANGE", key, "+", "-"},
		{"XRANGE", key, "(" + ids[10], ids[250]},
		{"XRANGE", key, ids[3], "(" + ids[120]},
		{"XREVRANGE", key, "(" + ids[290], ids[5]},
		{"XRANGE", key, ms(ids[40]), ms(ids[60])},
		{"XRANGE", key, "0", "0"},
		{"XRANGE", key, "-", "+", "COUNT", "0"},
		{"XREAD", "COUNT", "25", "STREAMS", key, "0"},
		{"XREAD", "STREAMS", key, "0-0"},
		{"XREAD", "STREAMS", key, ids[100]},
		{"XREAD", "COUNT", "5", "STREAMS", key, other, "0", "0"},
		{"XREAD", "STREAMS", other, key, "0", ids[297]},
		{"XREAD", "STREAMS", key, other, ids[299], "0"},
		{"XREAD", "STREAMS", key, ids[299]},
		{"XREAD", "STREAMS", key, "$"},
	}
	direct3 := dial(t, e.redis)
	if rep := direct3.must("HELLO", "3"); rep[0] != '%' {
		t.Fatalf("HELLO 3: %q", rep)
	}
	want2, want3 := make([]string, len(cmds)), make([]string, len(cmds))
	for i, c := range cmds {
		want2[i], want3[i] = direct.do(c...), direct3.do(c...)
	}
	e.cycle(ref, 40)
	if got := direct.must("XLEN", key); got != ":40\r\n" {
		t.Fatalf("Redis XLEN after the cycle: %q, want 40 live", got)
	}
	front := dial(t, e.front)
	front3 := dial(t, e.front)
	if rep := front3.must("HELLO", "3"); rep[0] != '%' || !strings.Contains(rep, "proto") {
		t.Fatalf("HELLO 3 through the front: %q", rep)
	}
	for i, c := range cmds {
		if got := front.do(c...); got != want2[i] {
			t.Errorf("RESP2 %s: %d bytes, differ from Redis's %d bytes before the cycle\n got %.200q\nwant %.200q", strings.Join(c[:min(len(c), 5)], " "), len(got), len(want2[i]), got, want2[i])
		}
		if got := front3.do(c...); got != want3[i] {
			t.Errorf("RESP3 %s: %d bytes, differ from Redis's %d bytes before the cycle\n got %.200q\nwant %.200q", strings.Join(c[:min(len(c), 5)], " "), len(got), len(want3[i]), got, want3[i])
		}
	}
	if got := front.must("XLEN", key); got != ":300\r\n" {
		t.Errorf("XLEN through the front: %q, want 300 (archive and live)", got)
	}
	info := front.must("XINFO", "STREAM", key)
	for _, want := range []string{"$6\r\nlength\r\n:300\r\n", "$18\r\nechostore-archived\r\n:260\r\n",
		"$21\r\nechostore-live-length\r\n:40\r\n", "$11\r\nfirst-entry\r\n*2\r\n$" + strconv.Itoa(len(ids[0])) + "\r\n" + ids[0] + "\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("XINFO STREAM lacks %q: %.400q", want, info)
		}
	}
	// Not archived: Redis's own answer, unchanged.
	if got, want := front.do("XLEN", other), direct.do("XLEN", other); got != want {
		t.Errorf("XLEN of a stream not archived: %q, want Redis's %q", got, want)
	}
	if got := front.do("XRANGE", key, "bad", "+"); !strings.HasPrefix(got, "-ERR Invalid stream ID") {
		t.Errorf("XRANGE with a bad id: %q", got)
	}
}

// TestXReadBlock: XREAD BLOCK on an archived stream returns its history
// at once when there is some, and otherwise waits on the live tail (an
// id, or $) and returns what is appended.
func TestXReadBlock(t *testing.T) {
	e := newEnv(t, false)
	ref, key := e.ref("events")
	direct := dial(t, e.redis)
	ids := fill(t, direct, key, 50)
	history := direct.do("XREAD", "STREAMS", key, "0")
	e.cycle(ref, 5)
	front := dial(t, e.front)
	if got := front.do("XREAD", "BLOCK", "0", "STREAMS", key, "0"); got != history {
		t.Fatalf("XREAD BLOCK from 0: %d bytes, want Redis's %d bytes of all 50 records before the cycle", len(got), len(history))
	}
	front.send("XREAD", "BLOCK", "0", "STREAMS", key, ids[49])
	id := strings.TrimSpace(strings.SplitN(direct.must("XADD", key, "*", "v", "after"), "\n", 2)[1])
	if got := front.read(); !strings.Contains(got, id) || !strings.Contains(got, "after") {
		t.Fatalf("XREAD BLOCK from the last id: %q, want %s", got, id)
	}
	front.send("XREAD", "BLOCK", "0", "STREAMS", key, "$")
	waitBlocked(t, direct)
	id = strings.TrimSpace(strings.SplitN(direct.must("XADD", key, "*", "v", "dollar"), "\n", 2)[1])
	if got := front.read(); !strings.Contains(got, id) || strings.Contains(got, "after") {
		t.Fatalf("XREAD BLOCK $: %q, want %s alone", got, id)
	}
	if got := front.do("XREAD", "BLOCK", "1", "STREAMS", key, "$"); got != "*-1\r\n" {
		t.Fatalf("XREAD BLOCK 1 $ that times out: %q, want the null array", got)
	}
}

// waitBlocked waits until a client is blocked in Redis (CLIENT LIST flags
// b), for at most 10 seconds.
func waitBlocked(t *testing.T, direct *client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(direct.must("CLIENT", "LIST"), "flags=b") {
		if time.Now().After(deadline) {
			t.Fatal("no client blocked in Redis after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPassThrough: commands that are not archived reads reach Redis
// unchanged on the connection's own upstream connection, with its state:
// binary values, SELECT, MULTI/EXEC, WATCH, CLIENT SETNAME, blocking
// commands, pipelines, and an archived XRANGE inside MULTI (live only).
func TestPassThrough(t *testing.T) {
	e := newEnv(t, false)
	ref, key := e.ref("tx")
	direct := dial(t, e.redis)
	fill(t, direct, key, 30)
	e.cycle(ref, 10)
	front := dial(t, e.front)
	bin := "\x00\xff\xfe binary \r\n\x80"
	front.must("SET", "pt:bin", bin)
	if got, want := direct.do("GET", "pt:bin"), "$"+strconv.Itoa(len(bin))+"\r\n"+bin+"\r\n"; got != want {
		t.Fatalf("GET of a value SET through the front: %q, want %q", got, want)
	}
	if got, want := front.do("GET", "pt:bin"), direct.do("GET", "pt:bin"); got != want {
		t.Fatalf("GET through the front: %q, want %q", got, want)
	}
	front.must("MULTI")
	front.must("SET", "pt:n", "1")
	front.must("INCR", "pt:n")
	front.must("XRANGE", key, "-", "+")
	exec := front.must("EXEC")
	if !strings.HasPrefix(exec, "*3\r\n+OK\r\n:2\r\n*10\r\n") {
		t.Fatalf("EXEC: %.100q, want OK, 2 and the 10 live entries", exec)
	}
	front.must("WATCH", "pt:n")
	direct.must("SET", "pt:n", "7")
	front.must("MULTI")
	front.must("INCR", "pt:n")
	if got := front.do("EXEC"); got != "*-1\r\n" {
		t.Fatalf("EXEC after a WATCHed key changed: %q, want the null array", got)
	}
	front.must("SELECT", "3")
	front.must("SET", "pt:db", "three")
	direct.must("SELECT", "3")
	if got := direct.do("GET", "pt:db"); got != "$5\r\nthree\r\n" {
		t.Fatalf("GET in db 3: %q", got)
	}
	direct.must("SELECT", "0")
	if got := front.do("XLEN", key); got != ":0\r\n" {
		t.Fatalf("XLEN of the archived key in db 3: %q, want Redis's (no key there)", got)
	}
	front.must("SELECT", "0")
	front.must("CLIENT", "SETNAME", "front-conn")
	if got := front.do("CLIENT", "GETNAME"); got != "$10\r\nfront-conn\r\n" {
		t.Fatalf("CLIENT GETNAME: %q", got)
	}
	// A pipeline of 200 commands, replies in order.
	for i := range 100 {
		front.send("SET", "pt:p"+strconv.Itoa(i), strconv.Itoa(i))
		front.send("XLEN", key)
	}
	for i := range 100 {
		if got := front.read(); got != "+OK\r\n" {
			t.Fatalf("pipelined SET %d: %q", i, got)
		}
		if got := front.read(); got != ":30\r\n" {
			t.Fatalf("pipelined XLEN %d: %q, want 30", i, got)
		}
	}
	front.send("BLPOP", "pt:list", "0")
	direct.must("RPUSH", "pt:list", "x")
	if got := front.read(); got != "*2\r\n$7\r\npt:list\r\n$1\r\nx\r\n" {
		t.Fatalf("BLPOP: %q", got)
	}
}

// TestPubSub: SUBSCRIBE and PSUBSCRIBE deliver messages in RESP2 and RESP3
// (push); once unsubscribed the connection serves archived reads again.
func TestPubSub(t *testing.T) {
	e := newEnv(t, false)
	ref, key := e.ref("ps")
	direct := dial(t, e.redis)
	fill(t, direct, key, 20)
	e.cycle(ref, 5)
	for _, proto := range []string{"2", "3"} {
		front := dial(t, e.front)
		front.must("HELLO", proto)
		ch := "ch-" + proto
		sub := front.must("SUBSCRIBE", ch)
		if !strings.Contains(sub, "subscribe") {
			t.Fatalf("RESP%s SUBSCRIBE: %q", proto, sub)
		}
		front.must("PSUBSCRIBE", "pat-"+proto+"*")
		direct.must("PUBLISH", ch, "hello")
		direct.must("PUBLISH", "pat-"+proto+"x", "world")
		kind := "*"
		if proto == "3" {
			kind = ">"
		}
		if got, want := front.read(), kind+"3\r\n$7\r\nmessage\r\n$"+strconv.Itoa(len(ch))+"\r\n"+ch+"\r\n$5\r\nhello\r\n"; got != want {
			t.Fatalf("RESP%s message: %q, want %q", proto, got, want)
		}
		if got := front.read(); !strings.HasPrefix(got, kind+"4\r\n$8\r\npmessage\r\n") || !strings.Contains(got, "world") {
			t.Fatalf("RESP%s pmessage: %q", proto, got)
		}
		if got := front.must("UNSUBSCRIBE"); !strings.Contains(got, "unsubscribe") || !strings.HasSuffix(got, ":1\r\n") {
			t.Fatalf("RESP%s UNSUBSCRIBE: %q, want one subscription left", proto, got)
		}
		if got, want := front.do("PING"), map[string]string{"2": "*2\r\n$4\r\npong\r\n$0\r\n\r\n", "3": "+PONG\r\n"}[proto]; got != want {
			t.Fatalf("RESP%s PING while subscribed: %q, want %q", proto, got, want)
		}
		front.send("PUNSUBSCRIBE")
		if got := front.read(); !strings.Contains(got, "punsubscribe") || !strings.HasSuffix(got, ":0\r\n") {
			t.Fatalf("RESP%s PUNSUBSCRIBE: %q", proto, got)
		}
		if got := front.do("XLEN", key); got != ":20\r\n" {
			t.Fatalf("RESP%s XLEN after unsubscribing: %q, want 20 (archive and live)", proto, got)
		}
		if got := front.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("RESP%s PING: %q", proto, got)
		}
	}
}

// TestAuth: with tokens, nothing but AUTH and HELLO … AUTH runs before a
// token is given; a read token reads, a write token writes, admin
// commands need admin; scripts (EVAL, EVALSHA, FCALL) are refused by the
// write rule to every token, admin's too.
func TestAuth(t *testing.T) {
	e := newEnv(t, true)
	_, key := e.ref("auth")
	c := dial(t, e.front)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", "a"}, "-NOAUTH"},
		{[]string{"HELLO", "3"}, "-NOAUTH"},
		{[]string{"AUTH", "nope-nope-nope-nope"}, "-WRONGPASS"},
		{[]string{"GET", "a"}, "-NOAUTH"},
		{[]string{"AUTH", readToken}, "+OK"},
		{[]string{"GET", "a"}, "$-1"},
		{[]string{"XRANGE", key, "-", "+"}, "*0"},
		{[]string{"SET", "a", "1"}, "-NOPERM"},
		{[]string{"XADD", key, "*", "f", "v"}, "-NOPERM"},
		{[]string{"PUBLISH", "c", "m"}, "-NOPERM"},
		{[]string{"AUTH", "someone", writeToken}, "+OK"},
		{[]string{"SET", "a", "1"}, "+OK"},
		{[]string{"XADD", key, "*", "f", "v"}, "$"},
		{[]string{"DEL", key}, "-NOPERM"},
		{[]string{"FLUSHALL"}, "-NOPERM"},
		{[]string{"CONFIG", "GET", "maxmemory"}, "-NOPERM"},
		{[]string{"CLIENT", "KILL", "ID", "1"}, "-NOPERM"},
		{[]string{"CLIENT", "ID"}, ":"},
		// A script can run any command on any key, an archived stream's
		// XTRIM included, whatever its arguments say: refused.
		{[]string{"EVAL", "return redis.call('XTRIM', KEYS[1], 'MAXLEN', 0)", "1", key}, "-NOPERM"},
		{[]string{"EVALSHA", "0000000000000000000000000000000000000000", "0"}, "-NOPERM"},
		{[]string{"FCALL", "f", "0"}, "-NOPERM"},
		{[]string{"EVAL_RO", "return 1", "0"}, ":1"},
		{[]string{"XLEN", key}, ":1"},
		{[]string{"AUTH", adminToken}, "+OK"},
		{[]string{"CONFIG", "GET", "maxmemory"}, "*2"},
		// The write rule: no token runs a script through the front.
		{[]string{"EVAL", "return 1", "0"}, "-NOPERM echostore: EVAL is refused"},
		{[]string{"SCRIPT", "LOAD", "return 1"}, "$40"},
		{[]string{"MONITOR"}, "-ERR echostore: MONITOR is not relayed by the echostore front (docs/RESP.md)\r\n"},
		{[]string{"CLIENT", "REPLY", "OFF"}, "-ERR echostore"},
	} {
		if got := c.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want %s…", tc.args, got, tc.want)
		}
	}
	h := dial(t, e.front)
	if got := h.do("HELLO", "3", "AUTH", "default", "wrong-wrong-wrong-wrong"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Errorf("HELLO 3 AUTH with a wrong token: %q", got)
	}
	if got := h.do("HELLO", "3", "AUTH", "default", readToken, "SETNAME", "reader"); !strings.HasPrefix(got, "%") {
		t.Errorf("HELLO 3 AUTH: %q", got)
	}
	if got := h.do("CLIENT", "GETNAME"); got != "$6\r\nreader\r\n" {
		t.Errorf("CLIENT GETNAME after HELLO SETNAME: %q", got)
	}
	if got := h.do("SET", "a", "2"); !strings.HasPrefix(got, "-NOPERM") {
		t.Errorf("SET with a read token after HELLO: %q", got)
	}
	if got := h.do("RESET"); got != "+RESET\r\n" {
		t.Errorf("RESET: %q", got)
	}
	if got := h.do("GET", "a"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("GET after RESET: %q, want NOAUTH", got)
	}
	open := newEnv(t, false)
	if got := dial(t, open.front).do("AUTH", "x"); !strings.HasPrefix(got, "-ERR AUTH <password> called without any password configured") {
		t.Errorf("AUTH on a front without tokens: %q", got)
	}
}

// TestBlockedClientHangsUp: a client that goes away while its command
// blocks in Redis takes its upstream connection with it, as Redis
// unblocks a client that went away.
func TestBlockedClientHangsUp(t *testing.T) {
	e := newEnv(t, false)
	direct := dial(t, e.redis)
	front := dial(t, e.front)
	front.send("BLPOP", "hangup:list", "0")
	waitBlocked(t, direct)
	front.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(direct.must("CLIENT", "LIST"), "flags=b") {
		if time.Now().After(deadline) {
			t.Fatal("the upstream connection still blocks in Redis 10s after its client hung up")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRelayModeAuthAndReset: while subscribed, AUTH stays the front's
// (the token never reaches Redis) and RESET ends the subscriptions and
// the connection's authentication.
func TestRelayModeAuthAndReset(t *testing.T) {
	e := newEnv(t, true)
	direct := dial(t, e.redis)
	front := dial(t, e.front)
	front.must("AUTH", readToken)
	front.must("SUBSCRIBE", "relay-ch")
	// Redis has no password: an AUTH that reached it would be its -ERR.
	if got := front.do("AUTH", writeToken); got != "+OK\r\n" {
		t.Fatalf("AUTH while subscribed: %q", got)
	}
	if got := front.do("RESET"); got != "+RESET\r\n" {
		t.Fatalf("RESET while subscribed: %q", got)
	}
	if got := front.do("GET", "x"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("GET after RESET: %q, want NOAUTH", got)
	}
	front.must("AUTH", readToken)
	direct.must("PUBLISH", "relay-ch", "after-reset")
	if got := front.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after RESET: %q, want +PONG (no subscription left, no message)", got)
	}
}

// TestUnauthenticatedInputBounded: with tokens, a client that sends more
// than MaxUnauthenticatedInput before AUTH (one huge bulk string the
// reader would buffer whole) gets an error and is disconnected; after
// AUTH the same value is written.
func TestUnauthenticatedInputBounded(t *testing.T) {
	e := newEnv(t, true)
	big := strings.Repeat("x", 2*resp.MaxUnauthenticatedInput)
	c := dial(t, e.front)
	// The write may fail part way once the front hangs up: the reply (or
	// the connection's end) is what counts.
	go func() {
		fmt.Fprintf(c.c, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n%s\r\n", len(big), big)
	}()
	rep, err := resp.ReadReply(c.r, nil)
	if err != nil || !strings.Contains(string(rep), "before AUTH") {
		t.Fatalf("2 MiB before AUTH: %q %v, want the error", rep, err)
	}
	if _, err := resp.ReadReply(c.r, nil); err == nil {
		t.Fatal("the connection stayed open")
	}
	a := dial(t, e.front)
	a.must("AUTH", writeToken)
	if got := a.do("SET", "big", big); got != "+OK\r\n" {
		t.Fatalf("2 MiB after AUTH: %q", got)
	}
	if got := a.do("STRLEN", "big"); got != ":"+strconv.Itoa(len(big))+"\r\n" {
		t.Fatalf("STRLEN: %q", got)
	}
}
