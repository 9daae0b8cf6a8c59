package resp_test

import (
	"context"
	"strings"
	"testing"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// TestWriteRuleAttacks: an archived queue stream, an archived application
// key and a job queue (with its group and pending jobs) behind the front;
// every attack of the write rule's list (docs/RESP.md "The write rule")
// sent with a write token and with an admin token, on each of the keys:
// trims by MAXLEN and by MINID above the watermark (XADD's options in any
// order, repeated), XDEL, XSETID, DEL, UNLINK, RENAME and RENAMENX both
// ways, the EXPIRE family, SET, RESTORE … REPLACE, COPY … REPLACE, MOVE,
// SORT … STORE, *STORE, FLUSHDB, FLUSHALL, SWAPDB, EVAL, EVALSHA, FCALL,
// each inside MULTI too, and XGROUP DESTROY|SETID|DELCONSUMER of the job
// stream. Each is refused with the rule's NOPERM echostore error (a MULTI
// around it aborts) but the trims at the watermark, which land at or
// below it, and XGROUP's with admin, which remove no entry. Then the audit:
// a merge-read of each archived stream returns every record acknowledged
// (those written before the cycle and the appends made during the
// attacks), the job stream holds every job enqueued, and no key has a TTL.
func TestWriteRuleAttacks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	direct := dial(t, e.redis)
	qref, qkey := e.ref("orders")
	kref, err := names.ParseKeyRef("orders")
	if err != nil {
		t.Fatal(err)
	}
	const kkey = "orders"
	acked := map[string][]string{qkey: fill(t, direct, qkey, 40), kkey: fill(t, direct, kkey, 40)}
	refs := map[string]names.StreamRef{qkey: qref, kkey: kref}
	for _, ref := range refs {
		e.cycle(ref, 10)
	}
	q := qref.Queue()
	jkey := mq.JobsKey(q)
	var jobs []string
	for i := range 8 {
		res, err := e.live.Enqueue(ctx, q, mq.Job{Fields: []mq.Field{{Name: "n", Value: string(rune('a' + i))}}})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, res.EntryID)
	}
	if _, err := e.live.Claim(ctx, q, "c1", 3); err != nil {
		t.Fatal(err)
	}
	direct.must("SET", "x", "scratch")
	direct.must("ZADD", "z", "1", "m")
	direct.must("SADD", "s", "m")
	dump := direct.must("DUMP", "x")
	dump = dump[strings.IndexByte(dump, '\n')+1 : len(dump)-2]
	watermark := func(key string) xid.ID {
		t.Helper()
		seam, ok, err := archive.GetArchived(ctx, e.live, refs[key])
		if err != nil || !ok {
			t.Fatalf("seam cache of %s: %v, %v", key, ok, err)
		}
		return seam.W
	}
	w := dial(t, e.front)
	w.must("AUTH", writeToken)
	a := dial(t, e.front)
	a.must("AUTH", adminToken)
	attacks := func(key string) [][]string {
		top := jobs[len(jobs)-1]
		if ids := acked[key]; len(ids) > 0 {
			top = ids[len(ids)-1]
		}
		return [][]string{
			{"XADD", key, "MAXLEN", "0", "*", "f", "v"},
			{"XADD", key, "NOMKSTREAM", "MAXLEN", "0", "*", "f", "v"},
			{"XADD", key, "LIMIT", "100", "MAXLEN", "~", "0", "*", "f", "v"},
			{"XADD", key, "NOMKSTREAM", "LIMIT", "5", "NOMKSTREAM", "MINID", "~", top, "LIMIT", "0", "*", "f", "v"},
			{"XADD", key, "MINID", top, "*", "f", "v"},
			{"XADD", key, "MAXLEN\x00", "0", "*", "f", "v"},
			{"XTRIM", key, "MAXLEN", "0"},
			{"XTRIM", key, "LIMIT", "10", "MINID", "~", top},
			{"XTRIM", key, "MINID", top},
			{"XDEL", key, top},
			{"XSETID", key, "1-1"},
			{"DEL", "x", key},
			{"UNLINK", key},
			{"RENAME", key, "elsewhere"},
			{"RENAME", "x", key},
			{"RENAMENX", key, "elsewhere"},
			{"EXPIRE", key, "1"},
			{"PEXPIRE", key, "1"},
			{"EXPIREAT", key, "1"},
			{"PEXPIREAT", key, "1"},
			{"SET", key, "v"},
			{"RESTORE", key, "0", dump, "REPLACE"},
			{"COPY", "x", key, "REPLACE"},
			{"MOVE", key, "1"},
			{"SORT", "s", "ALPHA", "STORE", key},
			{"ZUNIONSTORE", key, "1", "z"},
			{"SUNIONSTORE", key, "s"},
			{"FLUSHDB"},
			{"FLUSHALL"},
			{"SWAPDB", "0", "1"},
			{"EVAL", "return redis.call('DEL', KEYS[1])", "1", key},
			{"EVAL", "return redis.call('DEL', '" + key + "')", "0"},
			{"EVALSHA", "0000000000000000000000000000000000000000", "1", key},
			{"FCALL", "f", "1", key},
		}
	}
	refused := func(c *client, who string, cmd []string) {
		t.Helper()
		if got := c.do(cmd...); !strings.HasPrefix(got, "-NOPERM echostore: ") {
			t.Errorf("%s token: %q: %q, want the write rule's refusal", who, cmd, got)
		}
	}
	for _, key := range []string{qkey, kkey, jkey} {
		for _, c := range []struct {
			who string
			cl  *client
		}{{"write", w}, {"admin", a}} {
			for _, cmd := range attacks(key) {
				refused(c.cl, c.who, cmd)
				// The same inside MULTI: refused as it is queued, and the
				// transaction aborts.
				c.cl.must("MULTI")
				c.cl.must("XADD", "other", "*", "f", "v")
				refused(c.cl, c.who, cmd)
				if got := c.cl.do("EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
					t.Errorf("%s token: EXEC after %q inside MULTI: %q, want EXECABORT", c.who, cmd, got)
				}
			}
			if key == jkey {
				continue
			}
			// Trims at the watermark land at or below it; XADD with one is
			// an acknowledged append.
			wm := watermark(key)
			next, _ := wm.Next()
			c.cl.must("XTRIM", key, "MINID", next.String())
			c.cl.must("XTRIM", key, "MINID", "~", wm.String(), "LIMIT", "10")
			rep := c.cl.must("XADD", key, "NOMKSTREAM", "MINID", "=", next.String(), "*", "f", c.who)
			acked[key] = append(acked[key], strings.TrimSpace(rep[strings.IndexByte(rep, '\n')+1:]))
			rep = c.cl.must("XADD", key, "*", "MAXLEN", "0")
			acked[key] = append(acked[key], strings.TrimSpace(rep[strings.IndexByte(rep, '\n')+1:]))
		}
	}
	// Group management of the job stream: admin's alone, and it removes no
	// entry.
	for _, cmd := range [][]string{
		{"XGROUP", "DELCONSUMER", jkey, "workers", "c1"},
		{"XGROUP", "SETID", jkey, "workers", "$"},
		{"XGROUP", "DESTROY", jkey, "workers"},
	} {
		refused(w, "write", cmd)
		a.must(cmd...)
	}
	w.must("XGROUP", "CREATE", jkey, "workers", "0")
	w.must("XREADGROUP", "GROUP", "workers", "c2", "COUNT", "2", "STREAMS", jkey, ">")
	// A plain append to the job stream or its dead letters is a job no
	// enqueue accepted: refused for every token, and nothing lands.
	for _, key := range []string{jkey, mq.DeadKey(q)} {
		refused(w, "write", []string{"XADD", key, "*", "job", "JOB_0000000000001", "attempt", "1"})
		refused(a, "admin", []string{"XADD", key, "*", "job", "JOB_0000000000001", "attempt", "1"})
	}
	if got := direct.must("XLEN", jkey); got != ":8\r\n" {
		t.Errorf("XLEN %s: %q, want the 8 enqueued jobs alone", jkey, got)
	}

	// The audit.
	for key, ref := range refs {
		seen := map[string]bool{}
		for r, err := range e.node.Read(ctx, ref, echostore.ReadOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			seen[r.ID.String()] = true
		}
		for _, id := range acked[key] {
			if !seen[id] {
				t.Errorf("%s: acknowledged record %s is in neither the archive nor Redis", key, id)
			}
		}
		if len(seen) != len(acked[key]) {
			t.Errorf("%s: the merge-read returns %d records, %d were acknowledged", key, len(seen), len(acked[key]))
		}
	}
	live := direct.must("XRANGE", jkey, "-", "+")
	for _, id := range jobs {
		if !strings.Contains(live, "\r\n"+id+"\r\n") {
			t.Errorf("job %s is gone from %s", id, jkey)
		}
	}
	for _, key := range []string{qkey, kkey, jkey} {
		if got := direct.must("PTTL", key); got != ":-1\r\n" {
			t.Errorf("PTTL %s: %q, want -1 (no expiry)", key, got)
		}
		if got := direct.must("TYPE", key); got != "+stream\r\n" {
			t.Errorf("TYPE %s: %q", key, got)
		}
	}
	if got := direct.must("GET", "x"); got != "$7\r\nscratch\r\n" {
		t.Errorf("GET x: %q (a refused command changed it)", got)
	}
}
