package mq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/redis/rueidis"
)

// TestAppendTxNotAboveTop: a chunk sent as a transaction whose first id is
// not above the stream's last id appends none of its records, even when
// the last id lies among the chunk's ids (some of its XADDs alone would
// land): a producer's entry there, or a last id raised by XSETID (which a
// WATCH would not see). The stream ends the transaction as it began: same
// last id, same entries-added, no scratch key left.
func TestAppendTxNotAboveTop(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		if !c.tx {
			t.Fatal("the client does not append through transactions")
		}
		ctx := testCtx(t)
		q := queueName(t)
		ref := mustRef(t, q, "s")
		key := StreamKey(ref)
		recs := [][]Field{fields("a", "1"), fields("b", "2"), fields("c", "3")}
		mint := func(n int) []brand.ID {
			t.Helper()
			ids := make([]brand.ID, n)
			if err := c.mint(ids, 0); err != nil {
				t.Fatal(err)
			}
			return ids
		}
		do := func(cmd rueidis.Completed) {
			t.Helper()
			if err := c.rdb.Do(ctx, cmd).Error(); err != nil {
				t.Fatal(err)
			}
		}
		send := func(ids []brand.ID) []string {
			t.Helper()
			reply, err := c.appendTx(ctx, ref, ids, recs)
			if err != nil {
				t.Fatalf("appendTx: %v", err)
			}
			return reply
		}
		check := func(what string, want StreamInfo) {
			t.Helper()
			got, err := c.Info(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if got.TopXID != want.TopXID || got.Length != want.Length || got.EntriesAdded != want.EntriesAdded || got.MaxDeleted != want.MaxDeleted {
				t.Fatalf("%s: stream is %+v, want it as before: %+v", what, got, want)
			}
			if n, err := c.rdb.Do(ctx, c.rdb.B().Exists().Key(appendScratchOf(ref)).Build()).AsInt64(); err != nil || n != 0 {
				t.Fatalf("%s: scratch key left (%d, %v)", what, n, err)
			}
		}

		if r := send(mint(3)); len(r) != 1 || r[0] != "OK" {
			t.Fatalf("first send: %q", r)
		}
		// Another producer's entry under the chunk's first id.
		ids := mint(3)
		do(c.rdb.B().Xadd().Key(key).Id(ids[0].RedisID()).FieldValue().FieldValue("x", "x").Build())
		before, _ := c.Info(ctx, ref)
		if r := send(ids); len(r) != 2 || r[0] != "TOP" || r[1] != before.TopXID {
			t.Fatalf("send below an entry among its ids: %q, want TOP %s", r, before.TopXID)
		}
		check("entry among the ids", before)

		// The last id raised by XSETID among the chunk's ids.
		ids = mint(3)
		do(c.rdb.B().Xsetid().Key(key).LastId(brand.ID(uint64(ids[0]) + 1).RedisID()).Build())
		before, _ = c.Info(ctx, ref)
		if r := send(ids); len(r) != 2 || r[0] != "TOP" || r[1] != before.TopXID {
			t.Fatalf("send below a raised last id: %q, want TOP %s", r, before.TopXID)
		}
		check("last id raised among the ids", before)

		// The last id above the whole chunk.
		old := ids
		before, _ = c.Info(ctx, ref)
		if r := send(old); len(r) != 2 || r[0] != "TOP" {
			t.Fatalf("send of ids all below the last id: %q, want TOP", r)
		}
		check("last id above the chunk", before)
		if n, _ := c.Len(ctx, ref); n != 4 {
			t.Fatalf("stream has %d entries, want 4 (3 and the other producer's)", n)
		}
	})
}

// TestAppendTxRemintsAboveRaisedTop: end to end, a chunk minted below a
// last id raised since (XSETID, as the archive's SetID after a fold) is
// re-minted above it and lands whole, once.
func TestAppendTxRemintsAboveRaisedTop(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		usePath(t, c, 1)
		ctx := testCtx(t)
		q := queueName(t)
		ref := mustRef(t, q, "s")
		first, err := c.Append(ctx, ref, fields("a", "0")...)
		if err != nil {
			t.Fatal(err)
		}
		// A fixed clock mints the same ids again; the raised last id lies
		// among them.
		t0 := time.Now()
		c.minter = fixedMinter(t, t0)
		probe := make([]brand.ID, 3)
		if err := c.mint(probe, first); err != nil {
			t.Fatal(err)
		}
		c.minter = fixedMinter(t, t0)
		raised := brand.ID(uint64(probe[0]) + 1)
		if err := c.rdb.Do(ctx, c.rdb.B().Xsetid().Key(StreamKey(ref)).LastId(raised.RedisID()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		batch := [][]Field{fields("a", "1"), fields("a", "2"), fields("a", "3")}
		ids, err := c.AppendBatch(ctx, ref, batch)
		if err != nil {
			t.Fatal(err)
		}
		if c.Stats().Remints != 1 || ids[0] <= raised {
			t.Fatalf("remints %d, ids %v; want one re-mint above %v", c.Stats().Remints, ids, raised)
		}
		recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
		if len(recs) != 4 || recs[1].ID != ids[0].XID() || recs[3].ID != ids[2].XID() {
			t.Fatalf("stream holds %+v, want the first record and the batch once under %v", recs, ids)
		}
	})
}

// TestScriptAppendOption: with ScriptAppend the client appends through the
// script, and both paths read back the same records.
func TestScriptAppendOption(t *testing.T) {
	c := plain(t, Options{ScriptAppend: true})
	if c.tx {
		t.Fatal("ScriptAppend client appends through transactions")
	}
	ctx := testCtx(t)
	q := queueName(t)
	ids, err := c.AppendBatch(ctx, mustRef(t, q, "s"), [][]Field{fields("a", "1"), fields("a", "2")})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
	if len(recs) != 2 || recs[0].ID != ids[0].XID() || recs[1].ID != ids[1].XID() {
		t.Fatalf("stream holds %+v", recs)
	}
}

// TestNoTransactionsFallsBackToScript: a user whose ACL refuses MULTI and
// EXEC gets a client that appends through the append script, whole chunks
// as before, whether the ACL refuses all of @transaction or EXEC alone.
func TestNoTransactionsFallsBackToScript(t *testing.T) {
	for user, rule := range map[string]string{"emqnotx": "-@transaction", "emqnoexec": "-exec"} {
		t.Run(rule, func(t *testing.T) { noTransactions(t, user, rule) })
	}
}

func noTransactions(t *testing.T, user, rule string) {
	r := servers.Redis(t)
	if _, err := testserver.Do(context.Background(), r.Addr, "ACL", "SETUSER", user, "on", ">s3cret", "~*", "&*", "+@all", rule); err != nil {
		t.Fatal(err)
	}
	c := connect(t, "redis://"+user+":s3cret@"+r.Addr, Options{})
	if c.tx {
		t.Fatal("a user refused MULTI/EXEC got a client that appends through transactions")
	}
	ctx := testCtx(t)
	q := queueName(t)
	ids, err := c.AppendBatch(ctx, mustRef(t, q, "s"), [][]Field{fields("a", "1"), fields("a", "2")})
	if err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
	if len(recs) != 2 || recs[0].ID != ids[0].XID() || recs[1].ID != ids[1].XID() {
		t.Fatalf("stream holds %+v, want the batch under %v", recs, ids)
	}
}

// pipeBatch is a batch of n records of one field, v0 … v(n-1).
func pipeBatch(n int) [][]Field {
	b := make([][]Field, n)
	for i := range b {
		b[i] = fields("v", fmt.Sprint(i))
	}
	return b
}

// checkBatch fails unless the stream of q/s holds exactly before records
// and then the batch, once each, in order, under ids.
func checkBatch(t *testing.T, c *Client, q string, before int, batch [][]Field, ids []brand.ID) {
	t.Helper()
	recs := readAll(t, c, q, "s", 0, brand.Max, 0, false)
	checkIncreasing(t, recs, false)
	if len(recs) != before+len(batch) || len(ids) != len(batch) {
		t.Fatalf("stream holds %d records and the append returned %d ids, want %d and %d", len(recs), len(ids), before+len(batch), len(batch))
	}
	for i, r := range recs[before:] {
		if r.ID != ids[i].XID() || len(r.Fields) != 1 || r.Fields[0].Value != batch[i][0].Value {
			t.Fatalf("record %d is %+v, want %v under %v", before+i, r, batch[i], ids[i])
		}
	}
}

// TestAppendPipelined: a batch of several chunks goes as one pipeline of
// append transactions and lands whole, in order, once; on a stream whose
// last id was raised above the batch's ids (as the archive's SetID does)
// the first chunk, and with it every chunk after it, fails and the batch
// is re-minted above it once.
func TestAppendPipelined(t *testing.T) {
	eachServer(t, Options{ChunkRecords: 4}, func(t *testing.T, c *Client) {
		usePath(t, c, 1)
		ctx := testCtx(t)
		q := queueName(t)
		ref := mustRef(t, q, "s")
		batch := pipeBatch(4*maxPipeChunks + 7) // a full pipeline, then one of two chunks
		ids, err := c.AppendBatch(ctx, ref, batch)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, c, q, 0, batch, ids)
		if st := c.Stats(); st.Chunks != maxPipeChunks+2 || st.Remints != 0 || st.Retries != 0 {
			t.Fatalf("stats %+v, want %d chunks, no re-mint, no retry", st, maxPipeChunks+2)
		}
		raised := brand.ID(uint64(ids[len(ids)-1]) + 1<<30)
		if err := c.rdb.Do(ctx, c.rdb.B().Xsetid().Key(StreamKey(ref)).LastId(raised.RedisID()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		more := pipeBatch(13)
		got, err := c.AppendBatch(ctx, ref, more)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, c, q, len(batch), more, got)
		if st := c.Stats(); st.Remints != 1 || got[0] <= raised {
			t.Fatalf("stats %+v, ids from %v; want one re-mint above %v", st, got[0], raised)
		}
	})
}

// TestAppendTxAfter: the guard of a chunk sent behind another in a
// pipeline requires the stream to end at that chunk's last id; when it
// does not (that chunk did not land, or another producer appended in
// between), the chunk appends nothing and the stream is as it was.
func TestAppendTxAfter(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		ref := mustRef(t, q, "s")
		first, err := c.Append(ctx, ref, fields("a", "0")...)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]brand.ID, 3)
		if err := c.mint(ids, 0); err != nil {
			t.Fatal(err)
		}
		recs := pipeBatch(3)
		for _, tc := range []struct {
			after brand.ID
			want  string
		}{{first - 1, "TOP"}, {ids[0], "TOP"}, {first, "OK"}} {
			reply, err := txOutcome(ids, c.rdb.DoMulti(ctx, c.txCommands(nil, ref, brand.RedisIDs(ids), recs, tc.after.RedisID())...))
			if err != nil || reply[0] != tc.want {
				t.Fatalf("after %v: %q %v, want %s", tc.after, reply, err, tc.want)
			}
			n, _ := c.Len(ctx, ref)
			if want := map[string]int64{"TOP": 1, "OK": 4}[tc.want]; n != want {
				t.Fatalf("after %v: stream has %d entries, want %d", tc.after, n, want)
			}
		}
	})
}

// TestAppendPipelinedLostReply: the replies of a pipeline are lost with
// the connection (after the server ran it) and, in the other case, the
// server answers LOADING to every command of it (ran nothing): the
// batch's chunks are sent again, with their ids after the lost replies,
// and the batch is in the stream once, in order.
func TestAppendPipelinedLostReply(t *testing.T) {
	for _, fault := range []string{"lost", "loading"} {
		t.Run(fault, func(t *testing.T) {
			c, proxy := proxied(t, Options{ChunkRecords: 4, RetryBackoff: time.Millisecond})
			usePath(t, c, 1)
			ctx := testCtx(t)
			q := queueName(t)
			ref := mustRef(t, q, "s")
			if _, err := c.Append(ctx, ref, fields("v", "first")...); err != nil {
				t.Fatal(err)
			}
			if fault == "lost" {
				proxy.DropReplies(1)
			} else {
				proxy.AnswerLoading(1)
			}
			batch := pipeBatch(22)
			ids, err := c.AppendBatch(ctx, ref, batch)
			if err != nil {
				t.Fatal(err)
			}
			// The chunk that stopped the pipeline is sent again at once (a
			// retry after a lost reply tells a chunk that landed): no pause.
			wantPlayed(t, c, proxy, 0)
			if want := map[string]int64{"lost": 1, "loading": 0}[fault]; proxy.Dropped() != want {
				t.Fatalf("%d replies dropped, want %d", proxy.Dropped(), want)
			}
			checkBatch(t, c, q, 1, batch, ids)
		})
	}
}
