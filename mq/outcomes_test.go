package mq

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// outcomeLines renders the outcome stream of q, one line a record: its
// outcome, its job's "task" field, the attempt, the consumer and the error,
// checking that the job id and the job's own fields ride along.
func outcomeLines(t *testing.T, c *Client, q names.Queue, ids map[string]string) []string {
	t.Helper()
	ref, ok := c.opts.Jobs.OutcomeRef(q)
	if !ok {
		t.Fatal("no outcome stream")
	}
	var lines []string
	for rec, err := range c.Read(testCtx(t), ref, xid.Min, xid.Max, 0, false) {
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range rec.Fields {
			names = append(names, f.Name)
		}
		if got := strings.Join(names, " "); got != "outcome job attempt consumer error task" {
			t.Fatalf("outcome record %v: fields %q", rec.ID, got)
		}
		get := func(n string) string { v, _ := rec.Get(n); return v }
		if ids[get("task")] != get("job") {
			t.Fatalf("outcome of task %s names job %s, enqueued as %s", get("task"), get("job"), ids[get("task")])
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s %q", get("outcome"), get("task"), get("attempt"), get("consumer"), get("error")))
	}
	return lines
}

// With JobOptions.Outcomes, every end of a delivery is appended to the
// queue's outcome stream by the script that ends it, in order: acks as
// done, failures as retry or dead with their error, stalls' burials as dead
// with the stalled consumer; claims, take-overs, redrives and a second ack
// log nothing. The change feed names the stream, so the beat cycles it.
func TestJobOutcomes(t *testing.T) {
	clock := newTestClock()
	opts := jobOpts(clock)
	opts.Jobs.MaxAttempts = 2
	opts.Jobs.Backoff = func(int) time.Duration { return time.Second }
	opts.Jobs.Outcomes, _ = names.ParseStream("outcomes")
	eachServer(t, opts, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := mustQueue(t, queueName(t))
		ids := map[string]string{}
		entry := map[string]string{}
		for _, task := range []string{"a", "b", "c", "d"} {
			res, err := c.Enqueue(ctx, q, Job{Fields: fields("task", task)})
			if err != nil {
				t.Fatal(err)
			}
			ids[task] = brand.JOB.Format(res.ID)
		}
		got, err := c.Claim(ctx, q, "w1", 4)
		if err != nil || len(got) != 4 {
			t.Fatalf("claim: %+v, %v", got, err)
		}
		byTask := map[string]Delivery{}
		for _, d := range got {
			v, _ := Record{Fields: d.Fields}.Get("task")
			byTask[v] = d
			entry[v] = d.EntryID
		}
		if n, err := c.Ack(ctx, q, entry["a"]); err != nil || n != 1 {
			t.Fatalf("ack a: %d, %v", n, err)
		}
		if n, err := c.Ack(ctx, q, entry["a"]); err != nil || n != 0 {
			t.Fatalf("second ack of a: %d, %v", n, err)
		}
		for _, task := range []string{"b", "c"} {
			if fr, err := c.Fail(ctx, q, "w1", byTask[task], "boom "+task); err != nil || fr.Dead {
				t.Fatalf("fail %s: %+v, %v", task, fr, err)
			}
		}
		makeIdle(t, c, q.String(), "w1", entry["d"], time.Hour)
		if r, err := c.Recover(ctx, q, "w2", time.Minute, 0); err != nil || len(r.Claimed) != 1 {
			t.Fatalf("take over d: %+v, %v", r, err)
		}
		clock.Add(time.Second)
		again, err := c.Claim(ctx, q, "w3", 4)
		if err != nil || len(again) != 2 {
			t.Fatalf("claim the retries: %+v, %v", again, err)
		}
		for _, d := range again {
			switch v, _ := (Record{Fields: d.Fields}).Get("task"); v {
			case "b":
				if _, err := c.Ack(ctx, q, d.EntryID); err != nil {
					t.Fatal(err)
				}
			case "c":
				if fr, err := c.Fail(ctx, q, "w3", d, "boom again"); err != nil || !fr.Dead {
					t.Fatalf("fail c again: %+v, %v", fr, err)
				}
			}
		}
		makeIdle(t, c, q.String(), "w2", entry["d"], time.Hour)
		if r, err := c.Recover(ctx, q, "w4", time.Minute, 0); err != nil || r.Dead != 1 {
			t.Fatalf("bury d: %+v, %v", r, err)
		}
		if _, err := c.RedriveAll(ctx, q, 0); err != nil {
			t.Fatal(err)
		}
		want := []string{
			`done a 1 w1 ""`,
			`retry b 1 w1 "boom b"`,
			`retry c 1 w1 "boom c"`,
			`done b 2 w3 ""`,
			`dead c 2 w3 "boom again"`,
			`dead d 2 w2 "stalled: not acknowledged within 60000 ms"`,
		}
		lines := outcomeLines(t, c, q, ids)
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Fatalf("outcomes:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		ref, _ := c.opts.Jobs.OutcomeRef(q)
		keys, err := c.FeedKeys(ctx, DirtyOf(ref))
		if err != nil || !slices.Contains(keys, StreamKey(ref)) {
			t.Fatalf("change feed %v (%v) lacks %s", keys, err, StreamKey(ref))
		}
	})
}

// Without JobOptions.Outcomes nothing is logged: no outcome stream appears.
func TestJobOutcomesOff(t *testing.T) {
	c := plain(t, Options{})
	ctx := testCtx(t)
	q := mustQueue(t, queueName(t))
	if _, err := c.Enqueue(ctx, q, Job{Fields: fields("task", "a")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Claim(ctx, q, "w", 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %+v, %v", got, err)
	}
	if _, err := c.Ack(ctx, q, got[0].EntryID); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.opts.Jobs.OutcomeRef(q); ok {
		t.Fatal("OutcomeRef with no Outcomes")
	}
	n, err := c.rdb.Do(ctx, c.rdb.B().Exists().Key("emq:{"+q.String()+"}:stream:outcomes").Build()).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("an outcome stream exists with outcomes off: %d, %v", n, err)
	}
}
