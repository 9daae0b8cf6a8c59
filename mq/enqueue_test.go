package mq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
	"pgregory.net/rapid"
)

// queueState is what a job queue holds, with every job id replaced by a
// label that names the job alike in two queues fed the same jobs (minted
// ids differ between them): the job stream's entries in order (entry ids
// left out), the delayed set and the dedup set, each member with its score.
type queueState struct {
	Stream  [][]string
	Delayed []string
	IDs     []string
}

func snapshotQueue(ctx context.Context, c *Client, q names.Queue, label func(string) string) (queueState, error) {
	var st queueState
	msgs, err := c.rdb.Do(ctx, c.rdb.B().Xrange().Key(JobsKey(q)).Start("-").End("+").Build()).ToArray()
	if err != nil {
		return st, err
	}
	entries, err := rawEntries(msgs)
	if err != nil {
		return st, err
	}
	for _, e := range entries {
		kv := slices.Clone(e.kv)
		if len(kv) > 1 {
			kv[1] = label(kv[1])
		}
		st.Stream = append(st.Stream, kv)
	}
	zset := func(key string, member func(string) (string, error)) ([]string, error) {
		zs, err := c.rdb.Do(ctx, c.rdb.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			return nil, err
		}
		var out []string
		for _, z := range zs {
			m, err := member(z.Member)
			if err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("%s@%d", m, int64(z.Score)))
		}
		slices.Sort(out)
		return out, nil
	}
	if st.Delayed, err = zset(DelayedKey(q), func(m string) (string, error) {
		var kv []string
		if err := json.Unmarshal([]byte(m), &kv); err != nil || len(kv) < 2 {
			return "", fmt.Errorf("delayed member %q: %v", m, err)
		}
		kv[1] = label(kv[1])
		return strings.Join(kv, "\x00"), nil
	}); err != nil {
		return st, err
	}
	st.IDs, err = zset(JobIDsKey(q), func(m string) (string, error) { return label(m), nil })
	return st, err
}

// labeller names the jobs of a batch: a given id by itself, a minted one by
// the position of its job in the batch.
func labeller(jobs []Job, res []EnqueueResult) func(string) string {
	minted := map[string]string{}
	for i, j := range jobs {
		if j.ID == 0 && i < len(res) {
			minted[brand.JOB.Format(res[i].ID)] = fmt.Sprintf("minted#%d", i)
		}
	}
	return func(id string) string {
		if l, ok := minted[id]; ok {
			return l
		}
		return id
	}
}

// EnqueueBatch is a faster Enqueue of each job in turn: on random batches of
// due, delayed, past-due, duplicate (within the batch and of jobs enqueued
// before) and id-less jobs, cut in random chunks, the results and what the
// queue then holds are those of one Enqueue after another on another queue.
func TestEnqueueBatchMatchesEnqueue(t *testing.T) {
	clock := newTestClock()
	eachServerConn(t, func(t *testing.T, conn func(testing.TB, Options) *Client) {
		ctx := testCtx(t)
		per := conn(t, jobOpts(clock))
		var batchers []*Client // by their chunks: one job, a few small jobs, the default
		for _, chunk := range [][2]int{{1, 0}, {3, 60}, {0, 0}} {
			opts := jobOpts(clock)
			opts.ChunkRecords, opts.ChunkBytes = chunk[0], chunk[1]
			batchers = append(batchers, conn(t, opts))
		}
		rapid.Check(t, func(rt *rapid.T) {
			bc := batchers[rapid.IntRange(0, len(batchers)-1).Draw(rt, "chunks")]
			qa, qb := queueName(t), queueName(t)
			now := clock.Now()
			pool := make([]brand.ID, 4)
			for i := range pool {
				pool[i] = brand.FirstAt(now.Add(-time.Duration(i+1) * time.Second))
			}
			for i, id := range pool[:rapid.IntRange(0, len(pool)).Draw(rt, "enqueued before")] {
				for _, q := range []string{qa, qb} {
					if _, err := per.Enqueue(ctx, mustQueue(t, q), Job{ID: id, Fields: fields("before", fmt.Sprint(i))}); err != nil {
						rt.Fatal(err)
					}
				}
			}
			offsets := []time.Duration{-time.Hour, -time.Millisecond, 0, time.Millisecond, time.Hour}
			names := []string{"task", "n", "payload", "z"}
			n := rapid.IntRange(1, 16).Draw(rt, "jobs")
			jobs := make([]Job, n)
			for i := range jobs {
				var j Job
				if k := rapid.IntRange(-1, len(pool)-1).Draw(rt, "id"); k >= 0 {
					j.ID = pool[k]
				}
				if k := rapid.IntRange(-1, len(offsets)-1).Draw(rt, "run at"); k >= 0 {
					j.RunAt = now.Add(offsets[k])
				}
				for _, name := range names[:rapid.IntRange(0, len(names)).Draw(rt, "fields")] {
					j.Fields = append(j.Fields, Field{Name: name, Value: rapid.StringMatching(`[a-z0-9 "/\\é]{0,20}`).Draw(rt, "value")})
				}
				jobs[i] = j
			}

			got, err := bc.EnqueueBatch(ctx, mustQueue(t, qa), jobs)
			if err != nil {
				rt.Fatalf("EnqueueBatch: %v", err)
			}
			want := make([]EnqueueResult, n)
			for i, j := range jobs {
				if want[i], err = per.Enqueue(ctx, mustQueue(t, qb), j); err != nil {
					rt.Fatalf("Enqueue of job %d: %v", i, err)
				}
			}
			if len(got) != n {
				rt.Fatalf("EnqueueBatch gave %d results for %d jobs", len(got), n)
			}
			seen := map[brand.ID]bool{}
			for i, j := range jobs {
				g, w := got[i], want[i]
				if g.Duplicate != w.Duplicate || g.Delayed != w.Delayed || (g.EntryID == "") != (w.EntryID == "") {
					rt.Fatalf("job %d (%+v): batch gave %+v, Enqueue %+v", i, j, g, w)
				}
				if j.ID != 0 && g.ID != j.ID || j.ID == 0 && (g.ID == 0 || seen[g.ID]) {
					rt.Fatalf("job %d (id %v): batch gave id %v", i, j.ID, g.ID)
				}
				seen[g.ID] = true
			}
			sa, err := snapshotQueue(ctx, bc, mustQueue(t, qa), labeller(jobs, got))
			if err != nil {
				rt.Fatal(err)
			}
			sb, err := snapshotQueue(ctx, per, mustQueue(t, qb), labeller(jobs, want))
			if err != nil {
				rt.Fatal(err)
			}
			if fmt.Sprint(sa) != fmt.Sprint(sb) {
				rt.Fatalf("after the batch the queue holds\n%q\nafter one Enqueue per job\n%q", sa, sb)
			}
			// The entry ids the batch gave are the stream's, in order.
			var xids []string
			for _, r := range got {
				if r.EntryID != "" {
					xids = append(xids, r.EntryID)
				}
			}
			msgs, _ := bc.rdb.Do(ctx, bc.rdb.B().Xrange().Key(JobsKey(mustQueue(t, qa))).Start("-").End("+").Build()).ToArray()
			entries, _ := rawEntries(msgs)
			var inStream []string
			for _, e := range entries[len(entries)-len(xids):] {
				inStream = append(inStream, e.xid)
			}
			if !slices.Equal(xids, inStream) {
				rt.Fatalf("entry ids %v, the stream's newest %v", xids, inStream)
			}
		})
	})
}

// One invalid job refuses the whole batch, naming it, before any write.
func TestEnqueueBatchBadInputWritesNothing(t *testing.T) {
	eachServer(t, Options{Limits: Limits{MaxFields: 4, MaxBytes: 64}}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		for _, bad := range []struct {
			fields []Field
			want   error
		}{
			{fields("attempt", "2"), ErrReservedField},
			{fields("job", "JOB_X"), ErrReservedField},
			{fields("a", "1", "error", "x"), ErrReservedField},
			{fields("a", "\xff"), ErrInvalidUTF8},
			{fields("a", "1", "a", "2"), ErrDuplicateField},
			{fields("a", "1", "b", "2", "c", "3", "d", "4", "e", "5"), ErrTooLarge},
			{fields("a", strings.Repeat("x", 65)), ErrTooLarge},
		} {
			q := queueName(t)
			jobs := []Job{{Fields: fields("a", "1")}, {}, {RunAt: time.Now().Add(time.Hour)}, {Fields: bad.fields}, {}}
			res, err := c.EnqueueBatch(ctx, mustQueue(t, q), jobs)
			var re *RecordError
			if !errors.Is(err, bad.want) || !errors.As(err, &re) || re.Index != 3 || res != nil {
				t.Fatalf("batch with %q at 3: %v, %v; want %v naming job 3", bad.fields, res, err, bad.want)
			}
			n, err := c.rdb.Do(ctx, c.rdb.B().Exists().Key(JobsKey(mustQueue(t, q)), DelayedKey(mustQueue(t, q)), JobIDsKey(mustQueue(t, q))).Build()).AsInt64()
			if err != nil || n != 0 {
				t.Fatalf("after a refused batch %d of the queue's keys exist (%v)", n, err)
			}
		}
		if _, err := c.EnqueueBatch(ctx, names.Queue{}, []Job{{}}); !errors.Is(err, names.ErrInvalid) {
			t.Fatalf("a batch on no queue: %v, want names.ErrInvalid", err)
		}
		if res, err := c.EnqueueBatch(ctx, mustQueue(t, queueName(t)), nil); err != nil || len(res) != 0 {
			t.Fatalf("empty batch: %v, %v", res, err)
		}
	})
}

// The script refuses malformed arguments before it writes anything.
func TestEnqueueScriptRefusesMalformedArgs(t *testing.T) {
	c := plain(t, Options{})
	ctx := testCtx(t)
	q := queueName(t)
	keys := []string{JobsKey(mustQueue(t, q)), DelayedKey(mustQueue(t, q)), JobIDsKey(mustQueue(t, q))}
	head := []string{"1000", "60000", "workers"}
	for _, args := range [][]string{
		append(head, "0"),
		append(head, "1"),
		append(head, "1", "JOB_A", "0", "1", "a"),
		append(head, "1", "JOB_A", "0", "1", "a", "1", "extra"),
		append(head, "2", "JOB_A", "0", "0"),
		append(head, "1", "JOB_A", "soon", "0"),
		append(head, "1", "JOB_A", "0", "-1", "x"),
		{"later", "60000", "workers", "1", "JOB_A", "0", "0"},
	} {
		err := c.lua.enqueue.Exec(ctx, c.rdb, keys, args).Error()
		if err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("ARGV %q: %v, want malformed arguments", args, err)
		}
	}
	if n, _ := c.rdb.Do(ctx, c.rdb.B().Exists().Key(keys...).Build()).AsInt64(); n != 0 {
		t.Fatalf("refused calls left %d keys", n)
	}
}

// jobsInQueue returns every job id in q's job stream and delayed set, as
// often as it is there.
func jobsInQueue(t *testing.T, c *Client, q string) []string {
	t.Helper()
	st, err := snapshotQueue(testCtx(t), c, mustQueue(t, q), func(s string) string { return s })
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, kv := range st.Stream {
		ids = append(ids, kv[1])
	}
	for _, m := range st.Delayed {
		ids = append(ids, strings.Split(m, "\x00")[1])
	}
	slices.Sort(ids)
	return ids
}

func formatIDs(res []EnqueueResult) []string {
	var ids []string
	for _, r := range res {
		ids = append(ids, brand.JOB.Format(r.ID))
	}
	slices.Sort(ids)
	return ids
}

// End to end: the server runs a chunk but its reply is lost. The client
// sends the chunk again with the same ids; its jobs come back Duplicate (a
// success) and each job is in the queue once.
func TestEnqueueBatchLostReplyRetried(t *testing.T) {
	c, proxy, q, warm, jobs := proxiedJobs(t)
	ctx := testCtx(t)
	jobs[5].ID = brand.FirstAt(time.Now().Add(-time.Hour)) // not the minter's
	proxy.DropReplies(1)
	res, err := c.EnqueueBatch(ctx, mustQueue(t, q), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if proxy.Dropped() != 1 || c.Stats().Retries != 1 {
		t.Fatalf("dropped %d replies, client retried %d times; want 1 and 1", proxy.Dropped(), c.Stats().Retries)
	}
	for i, r := range res {
		if first := i < 4; r.Duplicate != first || !first && r.Delayed != (i%3 == 2) {
			t.Fatalf("job %d: %+v (the first chunk, 0..3, landed before its retry)", i, r)
		}
	}
	if res[5].ID != jobs[5].ID {
		t.Fatalf("job 5 enqueued as %v, not under its own id %v", res[5].ID, jobs[5].ID)
	}
	want := formatIDs(append(res, warm))
	if got := jobsInQueue(t, plain(t, Options{}), q); !slices.Equal(got, want) {
		t.Fatalf("queue holds %v, want each of %v once", got, want)
	}
}

// When every reply is lost, the batch fails with ErrOutcomeUnknown naming
// the ids of the chunk in doubt; a caller that sends the batch again under
// those ids gets each job once, the landed ones as Duplicate.
func TestEnqueueBatchOutcomeUnknownThenResent(t *testing.T) {
	c, proxy := proxied(t, Options{RetryBackoff: time.Millisecond, AppendRetries: 2})
	ctx := testCtx(t)
	q := queueName(t)
	jobs := []Job{{Fields: fields("n", "0")}, {Fields: fields("n", "1"), RunAt: time.Now().Add(time.Hour)}, {Fields: fields("n", "2")}}
	proxy.DropReplies(1 << 30)
	_, err := c.EnqueueBatch(ctx, mustQueue(t, q), jobs)
	var ee *EnqueueError
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &ee) || len(ee.Unknown) != 3 || len(ee.Done) != 0 {
		t.Fatalf("EnqueueBatch = %v, want ErrOutcomeUnknown naming the 3 ids", err)
	}
	for i := range jobs {
		jobs[i].ID = ee.Unknown[i]
	}
	direct := plain(t, Options{})
	res, err := direct.EnqueueBatch(ctx, mustQueue(t, q), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Duplicate || r.ID != ee.Unknown[i] {
			t.Fatalf("job %d sent again: %+v, want Duplicate under %v", i, r, ee.Unknown[i])
		}
	}
	if got := jobsInQueue(t, direct, q); !slices.Equal(got, formatIDs(res)) {
		t.Fatalf("queue holds %v, want %v once each", got, formatIDs(res))
	}
}

// proxiedJobs connects through a ScriptProxy with chunks of 4 jobs, loads
// the scripts with one job enqueued in a fresh queue, and returns that
// job's result and 10 jobs to enqueue there, every third delayed.
func proxiedJobs(t *testing.T) (*Client, *testserver.ScriptProxy, string, EnqueueResult, []Job) {
	t.Helper()
	c, proxy := proxied(t, Options{RetryBackoff: time.Millisecond, ChunkRecords: 4})
	q := queueName(t)
	warm, err := c.Enqueue(testCtx(t), mustQueue(t, q), Job{Fields: fields("warm", "1")})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]Job, 10)
	for i := range jobs {
		jobs[i].Fields = fields("n", fmt.Sprint(i))
		if i%3 == 2 {
			jobs[i].RunAt = time.Now().Add(time.Hour)
		}
	}
	return c, proxy, q, warm, jobs
}

// An EnqueueBatch chunk that meets LOADING (a restarted server still
// loading its data), first or on the retry of a chunk whose reply was lost,
// is sent again with the same ids once the server serves: each job is in the
// queue once, the jobs of a chunk that had run before its reply was lost
// reported Duplicate.
func TestEnqueueBatchRetriesLoading(t *testing.T) {
	eachLostReplies(t, func(t *testing.T, drops int64) {
		c, proxy, q, warm, jobs := proxiedJobs(t)
		proxy.DropReplies(drops)
		proxy.AnswerLoading(3)
		res, err := c.EnqueueBatch(testCtx(t), mustQueue(t, q), jobs)
		if err != nil {
			t.Fatalf("EnqueueBatch after LOADING: %v", err)
		}
		wantPlayed(t, c, proxy, drops+3)
		for i, r := range res {
			if dup := drops > 0 && i < 4; r.Duplicate != dup || !dup && r.Delayed != (i%3 == 2) {
				t.Fatalf("job %d: %+v", i, r)
			}
		}
		want := formatIDs(append(res, warm))
		if got := jobsInQueue(t, plain(t, Options{}), q); !slices.Equal(got, want) {
			t.Fatalf("queue holds %v, want each of %v once", got, want)
		}
	})
}
