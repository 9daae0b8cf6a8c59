package mq

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
)

// testClock is a clock the test steps by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func jobOpts(clock *testClock) Options   { return Options{Jobs: JobOptions{Clock: clock.Now}} }
func status(t *testing.T, c *Client, q string) QueueStatus {
	t.Helper()
	st, err := c.Status(testCtx(t), mustQueue(t, q))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// makeIdle makes a pending entry look idle for d without changing its owner
// or its delivery count (XCLAIM … IDLE … JUSTID), so that stalled-claim
// recovery can be tested without waiting.
func makeIdle(t *testing.T, c *Client, q, owner, xid string, d time.Duration) {
	t.Helper()
	cmd := c.rdb.B().Xclaim().Key(JobsKey(mustQueue(t, q))).Group(c.opts.Jobs.Group).Consumer(owner).MinIdleTime("0").
		Id(xid).Idle(d.Milliseconds()).Justid().Build()
	if err := c.rdb.Do(testCtx(t), cmd).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestJobsEnqueueClaimAck(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		if st := status(t, c, q); st != (QueueStatus{Queue: q}) {
			t.Fatalf("status of a queue never used: %+v", st)
		}
		var jobs []EnqueueResult
		for _, v := range []string{"a", "b", "c"} {
			res, err := c.Enqueue(ctx, mustQueue(t, q), Job{Fields: fields("task", v, "z", "1")})
			if err != nil || res.EntryID == "" || res.Duplicate || res.Delayed {
				t.Fatalf("Enqueue: %+v, %v", res, err)
			}
			jobs = append(jobs, res)
		}
		// The same job again is a no-op; its id with other fields a
		// conflict (TestJobIDConflict).
		dup, err := c.Enqueue(ctx, mustQueue(t, q), Job{ID: jobs[0].ID, Fields: fields("task", "a", "z", "1")})
		if err != nil || !dup.Duplicate {
			t.Fatalf("second enqueue of %v: %+v, %v", jobs[0].ID, dup, err)
		}
		if dup, err := c.Enqueue(ctx, mustQueue(t, q), Job{ID: jobs[0].ID, Fields: fields("task", "again")}); err != nil || !dup.Conflict {
			t.Fatalf("enqueue of %v with other fields: %+v, %v", jobs[0].ID, dup, err)
		}
		if _, err := c.Enqueue(ctx, mustQueue(t, q), Job{Fields: fields("attempt", "9")}); !errors.Is(err, ErrReservedField) {
			t.Fatalf("a job field named attempt: %v, want ErrReservedField", err)
		}
		if st := status(t, c, q); st.Length != 3 || st.Lag != 3 || st.Pending != 0 {
			t.Fatalf("after 3 enqueues: %+v", st)
		}
		got, err := c.Claim(ctx, mustQueue(t, q), "w1", 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("Claim 2: %+v, %v", got, err)
		}
		for i, d := range got {
			if d.ID != jobs[i].ID || d.EntryID != jobs[i].EntryID || d.Attempt != 1 ||
				!sameFields(d.Fields, fields("task", []string{"a", "b"}[i], "z", "1")) {
				t.Fatalf("delivery %d: %+v, want job %v", i, d, jobs[i])
			}
		}
		if st := status(t, c, q); st.Pending != 2 || st.Lag != 1 || st.Consumers != 1 {
			t.Fatalf("after claiming 2: %+v", st)
		}
		if n, err := c.Ack(ctx, mustQueue(t, q), got[0].EntryID, got[1].EntryID); err != nil || n != 2 {
			t.Fatalf("Ack = %d, %v", n, err)
		}
		if n, _ := c.Ack(ctx, mustQueue(t, q), got[0].EntryID); n != 0 {
			t.Fatalf("a second ack counted %d", n)
		}
		rest, err := c.Claim(ctx, mustQueue(t, q), "w2", 0)
		if err != nil || len(rest) != 1 || rest[0].ID != jobs[2].ID {
			t.Fatalf("Claim the rest: %+v, %v", rest, err)
		}
		c.Ack(ctx, mustQueue(t, q), rest[0].EntryID)
		if more, err := c.Claim(ctx, mustQueue(t, q), "w2", 0); err != nil || len(more) != 0 {
			t.Fatalf("Claim on an empty queue: %+v, %v", more, err)
		}
		if st := status(t, c, q); st.Length != 0 || st.Pending != 0 || st.Lag != 0 {
			t.Fatalf("after acking all: %+v", st)
		}
	})
}

func TestJobsDelayed(t *testing.T) {
	clock := newTestClock()
	c := plain(t, jobOpts(clock))
	ctx := testCtx(t)
	q := queueName(t)
	due := clock.Now().Add(time.Hour)
	res, err := c.Enqueue(ctx, mustQueue(t, q), Job{Fields: fields("k", "later"), RunAt: due})
	if err != nil || !res.Delayed {
		t.Fatalf("Enqueue delayed: %+v, %v", res, err)
	}
	if again, _ := c.Enqueue(ctx, mustQueue(t, q), Job{ID: res.ID, Fields: fields("k", "later"), RunAt: due}); !again.Duplicate {
		t.Fatalf("a delayed job enqueued twice: %+v", again)
	}
	if got, _ := c.Claim(ctx, mustQueue(t, q), "w", 0); len(got) != 0 {
		t.Fatalf("claimed %+v before it was due", got)
	}
	st := status(t, c, q)
	if st.Delayed != 1 || st.Length != 0 || st.NextDue != due.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano) {
		t.Fatalf("status with a delayed job: %+v", st)
	}
	clock.Add(time.Hour)
	got, err := c.Claim(ctx, mustQueue(t, q), "w", 0)
	if err != nil || len(got) != 1 || got[0].ID != res.ID || got[0].Attempt != 1 {
		t.Fatalf("Claim when due: %+v, %v", got, err)
	}
	if st := status(t, c, q); st.Delayed != 0 || st.Pending != 1 {
		t.Fatalf("status after promotion: %+v", st)
	}
}

// A claim its consumer stopped working on is taken over after min-idle.
func TestJobsStalledClaimRecovered(t *testing.T) {
	eachServer(t, Options{Jobs: JobOptions{MaxAttempts: 3}}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		res, _ := c.Enqueue(ctx, mustQueue(t, q), Job{Fields: fields("k", "v")})
		got, _ := c.Claim(ctx, mustQueue(t, q), "dead-worker", 1)
		if len(got) != 1 {
			t.Fatalf("claimed %d", len(got))
		}
		if r, err := c.Recover(ctx, mustQueue(t, q), "rescuer", time.Hour, 0); err != nil || len(r.Claimed) != 0 {
			t.Fatalf("Recover of a fresh claim: %+v, %v", r, err)
		}
		makeIdle(t, c, q, "dead-worker", res.EntryID, 2*time.Minute)
		r, err := c.Recover(ctx, mustQueue(t, q), "rescuer", time.Minute, 0)
		if err != nil || len(r.Claimed) != 1 || r.Dead != 0 {
			t.Fatalf("Recover: %+v, %v", r, err)
		}
		d := r.Claimed[0]
		if d.ID != res.ID || d.EntryID != res.EntryID || d.Attempt != 2 || !sameFields(d.Fields, fields("k", "v")) {
			t.Fatalf("recovered %+v", d)
		}
		// The first worker lost it: it may not fail it any more.
		if _, err := c.Fail(ctx, mustQueue(t, q), "dead-worker", got[0], "late"); !errors.Is(err, ErrNoJob) {
			t.Fatalf("Fail by the former owner: %v, want ErrNoJob", err)
		}
		if n, _ := c.Ack(ctx, mustQueue(t, q), d.EntryID); n != 1 {
			t.Fatal("rescuer could not ack")
		}
		// Recover on a queue never used is a no-op.
		if r, err := c.Recover(ctx, mustQueue(t, queueName(t)), "x", 0, 0); err != nil || len(r.Claimed) != 0 {
			t.Fatalf("Recover on an unused queue: %+v, %v", r, err)
		}
	})
}

// A failing job is retried after its backoff until MaxAttempts, then dead;
// a dead letter can be listed and redriven.
func TestJobsRetryThenDead(t *testing.T) {
	clock := newTestClock()
	opts := jobOpts(clock)
	opts.Jobs.MaxAttempts = 3
	opts.Jobs.Backoff = func(n int) time.Duration { return time.Duration(n) * time.Second }
	eachServer(t, opts, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		res, _ := c.Enqueue(ctx, mustQueue(t, q), Job{Fields: fields("k", "v", "n", "1")})
		for attempt := 1; attempt <= 3; attempt++ {
			got, err := c.Claim(ctx, mustQueue(t, q), "w", 0)
			if err != nil || len(got) != 1 || got[0].Attempt != attempt || got[0].ID != res.ID {
				t.Fatalf("attempt %d: claimed %+v, %v", attempt, got, err)
			}
			fr, err := c.Fail(ctx, mustQueue(t, q), "w", got[0], "boom "+got[0].EntryID)
			if err != nil {
				t.Fatal(err)
			}
			if attempt < 3 {
				if fr.Dead || fr.Attempts != attempt || !fr.RetryAt.Equal(clock.Now().Add(time.Duration(attempt)*time.Second)) {
					t.Fatalf("attempt %d failed: %+v", attempt, fr)
				}
				if early, _ := c.Claim(ctx, mustQueue(t, q), "w", 0); len(early) != 0 {
					t.Fatalf("claimed again before the backoff: %+v", early)
				}
				if st := status(t, c, q); st.Delayed != 1 || st.Length != 0 {
					t.Fatalf("waiting for a retry: %+v", st)
				}
				clock.Add(time.Duration(attempt) * time.Second)
				continue
			}
			if !fr.Dead || fr.Attempts != 3 {
				t.Fatalf("last attempt failed: %+v, want dead after 3", fr)
			}
		}
		st := status(t, c, q)
		if st.Dead != 1 || st.Length != 0 || st.Delayed != 0 || st.Pending != 0 {
			t.Fatalf("after dead-lettering: %+v", st)
		}
		dead, err := c.Dead(ctx, mustQueue(t, q), "", 0)
		if err != nil || len(dead) != 1 {
			t.Fatalf("Dead: %+v, %v", dead, err)
		}
		dl := dead[0]
		if dl.ID != res.ID || dl.Attempts != 3 || !strings.HasPrefix(dl.Error, "boom ") || !sameFields(dl.Fields, fields("k", "v", "n", "1")) {
			t.Fatalf("dead letter %+v", dl)
		}
		ids, err := c.Redrive(ctx, mustQueue(t, q), dl.EntryID)
		if err != nil || len(ids) != 1 {
			t.Fatalf("Redrive: %v, %v", ids, err)
		}
		got, err := c.Claim(ctx, mustQueue(t, q), "w", 0)
		if err != nil || len(got) != 1 || got[0].ID != res.ID || got[0].Attempt != 1 || got[0].EntryID != ids[0] ||
			!sameFields(got[0].Fields, fields("k", "v", "n", "1")) {
			t.Fatalf("claim after redrive: %+v, %v", got, err)
		}
		if st := status(t, c, q); st.Dead != 0 {
			t.Fatalf("dead letters after redrive: %+v", st)
		}
	})
}

// A job whose consumers keep stalling goes to the dead letters once its
// deliveries reach MaxAttempts; RedriveAll brings it back.
func TestJobsStalledToDead(t *testing.T) {
	c := plain(t, Options{Jobs: JobOptions{MaxAttempts: 2}})
	ctx := testCtx(t)
	q := queueName(t)
	res, _ := c.Enqueue(ctx, mustQueue(t, q), Job{Fields: fields("k", "v")})
	c.Claim(ctx, mustQueue(t, q), "a", 0) // attempt 1
	makeIdle(t, c, q, "a", res.EntryID, time.Hour)
	r, _ := c.Recover(ctx, mustQueue(t, q), "b", time.Minute, 0) // attempt 2
	if len(r.Claimed) != 1 || r.Claimed[0].Attempt != 2 {
		t.Fatalf("first recovery: %+v", r)
	}
	makeIdle(t, c, q, "b", res.EntryID, time.Hour)
	r, _ = c.Recover(ctx, mustQueue(t, q), "c", time.Minute, 0)
	if len(r.Claimed) != 0 || r.Dead != 1 {
		t.Fatalf("second recovery: %+v, want the job dead", r)
	}
	dead, _ := c.Dead(ctx, mustQueue(t, q), "", 0)
	if len(dead) != 1 || dead[0].Attempts != 2 || !strings.Contains(dead[0].Error, "stalled") {
		t.Fatalf("dead letters %+v", dead)
	}
	ids, err := c.RedriveAll(ctx, mustQueue(t, q), 0)
	if err != nil || len(ids) != 1 {
		t.Fatalf("RedriveAll: %v, %v", ids, err)
	}
	if st := status(t, c, q); st.Dead != 0 || st.Length != 1 || st.Lag != 1 {
		t.Fatalf("after RedriveAll: %+v", st)
	}
	if got, _ := c.Claim(ctx, mustQueue(t, q), "d", 0); len(got) != 1 || got[0].ID != res.ID || got[0].Attempt != 1 {
		t.Fatalf("claim after RedriveAll: %+v", got)
	}
}

func TestJobDedupWindow(t *testing.T) {
	clock := newTestClock()
	opts := jobOpts(clock)
	opts.Jobs.DedupWindow = time.Minute
	c := plain(t, opts)
	ctx := testCtx(t)
	q := queueName(t)
	id := brand.FirstAt(clock.Now())
	if r, _ := c.Enqueue(ctx, mustQueue(t, q), Job{ID: id}); r.Duplicate {
		t.Fatal("first enqueue is a duplicate")
	}
	clock.Add(59 * time.Second)
	if r, _ := c.Enqueue(ctx, mustQueue(t, q), Job{ID: id}); !r.Duplicate {
		t.Fatal("enqueue within the window is not a duplicate")
	}
	clock.Add(2 * time.Second)
	if r, _ := c.Enqueue(ctx, mustQueue(t, q), Job{ID: id}); r.Duplicate {
		t.Fatal("the window passed, the id is still remembered")
	}
	if st := status(t, c, q); st.Length != 2 {
		t.Fatalf("queue length %d, want 2", st.Length)
	}
}
