package mq

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestJobsListing: a queue with a job in each state lists each in its own
// state, with its consumer and idle time, due time or error; a deleted
// dead letter is gone; the queue is found by Queues; bad input is refused.
func TestJobsListing(t *testing.T) {
	clock := newTestClock()
	opts := jobOpts(clock)
	opts.Jobs.MaxAttempts = 1
	eachServer(t, opts, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		mq := mustQueue(t, q)
		enq := func(n string, runAt time.Time) {
			t.Helper()
			if _, err := c.Enqueue(ctx, mq, Job{Fields: fields("n", n), RunAt: runAt}); err != nil {
				t.Fatal(err)
			}
		}
		enq("pending", time.Time{})
		enq("dead", time.Time{})
		enq("ready", time.Time{})
		enq("delayed", clock.Now().Add(time.Hour))
		got, err := c.Claim(ctx, mq, "w1", 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("claim: %+v, %v", got, err)
		}
		if fr, err := c.Fail(ctx, mq, "w1", got[1], "boom"); err != nil || !fr.Dead {
			t.Fatalf("fail: %+v, %v", fr, err)
		}
		makeIdle(t, c, q, "w1", got[0].EntryID, 3*time.Second)

		want := map[JobState]string{Ready: "ready", Pending: "pending", Delayed: "delayed", DeadState: "dead"}
		listed := map[JobState]ListedJob{}
		for st, n := range want {
			js, err := c.Jobs(ctx, mq, st, 10)
			if err != nil || len(js) != 1 || !sameFields(js[0].Fields, fields("n", n)) || js[0].State != st {
				t.Fatalf("%s jobs: %+v, %v", st, js, err)
			}
			listed[st] = js[0]
		}
		if p := listed[Pending]; p.Consumer != "w1" || p.Idle < 3*time.Second || p.EntryID != got[0].EntryID || p.Attempt != 1 {
			t.Fatalf("pending job: %+v", p)
		}
		if d := listed[Delayed]; d.EntryID != "" || d.Due.UnixMilli() != clock.Now().Add(time.Hour).UnixMilli() {
			t.Fatalf("delayed job: %+v", d)
		}
		if d := listed[DeadState]; d.Error != "boom" || d.EntryID == "" {
			t.Fatalf("dead job: %+v", d)
		}
		// The JSON form keeps each state's own keys.
		var m map[string]any
		b, _ := json.Marshal(listed[Pending])
		if err := json.Unmarshal(b, &m); err != nil || m["state"] != "pending" || m["consumer"] != "w1" || m["due"] != nil {
			t.Fatalf("pending JSON %s: %v", b, err)
		}

		n, err := c.DeleteDead(ctx, mq, listed[DeadState].EntryID)
		if err != nil || n != 1 {
			t.Fatalf("delete dead: %d, %v", n, err)
		}
		if js, err := c.Jobs(ctx, mq, DeadState, 10); err != nil || len(js) != 0 {
			t.Fatalf("dead after delete: %+v, %v", js, err)
		}
		var qs []string
		for q, err := range c.Queues(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			qs = append(qs, q.String())
		}
		if !slices.Contains(qs, q) {
			t.Fatalf("Queues lacks %s", q)
		}
		if _, err := c.Jobs(ctx, mq, 0, 10); !errors.Is(err, ErrJobState) {
			t.Fatalf("no state: %v", err)
		}
		if _, err := c.Jobs(ctx, mq, Ready, 1001); !errors.Is(err, ErrListLimit) {
			t.Fatalf("limit 1001: %v", err)
		}
		if _, err := ParseJobState("running"); !errors.Is(err, ErrJobState) {
			t.Fatalf("ParseJobState: %v", err)
		}
		if _, err := c.DeleteDead(ctx, mq, "not-an-id"); err == nil {
			t.Fatal("DeleteDead of a malformed entry id: no error")
		}
	})
}
