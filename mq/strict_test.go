package mq

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// TestJobIDConflict: an id enqueued again with the same fields is a
// Duplicate; with other fields a Conflict (also within one batch), and the
// job under the id stays the first; CheckJobID tells both without
// changing anything, and forgets the id with the dedup window.
func TestJobIDConflict(t *testing.T) {
	clock := newTestClock()
	eachServer(t, jobOpts(clock), func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		id, err := c.Minter().Mint()
		if err != nil {
			t.Fatal(err)
		}
		first := Job{ID: id, Fields: fields("payload", "1")}
		other := Job{ID: id, Fields: fields("payload", "2")}
		if known, err := c.CheckJobID(ctx, mustQueue(t, q), first); known || err != nil {
			t.Fatalf("CheckJobID of a new id: %v %v", known, err)
		}
		res, err := c.EnqueueBatch(ctx, mustQueue(t, q), []Job{first, first, other})
		if err != nil || res[0].EntryID == "" || !res[1].Duplicate || res[1].Conflict || !res[2].Conflict || res[2].Duplicate {
			t.Fatalf("EnqueueBatch: %+v %v", res, err)
		}
		if r, err := c.Enqueue(ctx, mustQueue(t, q), other); err != nil || !r.Conflict {
			t.Fatalf("Enqueue with other fields: %+v %v", r, err)
		}
		if r, err := c.Enqueue(ctx, mustQueue(t, q), first); err != nil || !r.Duplicate {
			t.Fatalf("Enqueue again: %+v %v", r, err)
		}
		if known, err := c.CheckJobID(ctx, mustQueue(t, q), first); !known || err != nil {
			t.Fatalf("CheckJobID with the same fields: %v %v", known, err)
		}
		if _, err := c.CheckJobID(ctx, mustQueue(t, q), other); !errors.Is(err, ErrIDConflict) {
			t.Fatalf("CheckJobID with other fields: %v", err)
		}
		ds, err := c.Claim(ctx, mustQueue(t, q), "w", 10)
		if err != nil || len(ds) != 1 || ds[0].Fields[0].Value != "1" {
			t.Fatalf("claimed %+v %v, want the first job alone", ds, err)
		}
		clock.Add(25 * time.Hour)
		if known, err := c.CheckJobID(ctx, mustQueue(t, q), other); known || err != nil {
			t.Fatalf("CheckJobID after the dedup window: %v %v", known, err)
		}
		if r, err := c.Enqueue(ctx, mustQueue(t, q), other); err != nil || r.EntryID == "" {
			t.Fatalf("Enqueue after the dedup window: %+v %v", r, err)
		}
		if n := c.rdb.Do(ctx, c.rdb.B().Hlen().Key(JobDigestsKey(mustQueue(t, q))).Build()); n.Error() != nil {
			t.Fatal(n.Error())
		} else if v, _ := n.AsInt64(); v != 1 {
			t.Fatalf("%d digests kept, want the one id of the window", v)
		}
	})
}

// TestClaimCreatesNothing: Claim and Redrive on a queue with no jobs and no
// dead letters create no key; bad consumer names and entry ids are refused
// before anything is sent.
func TestClaimCreatesNothing(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		if ds, err := c.Claim(ctx, mustQueue(t, q), "w", 1); err != nil || len(ds) != 0 {
			t.Fatalf("Claim: %v %v", ds, err)
		}
		if ids, err := c.RedriveAll(ctx, mustQueue(t, q), 1); err != nil || len(ids) != 0 {
			t.Fatalf("RedriveAll: %v %v", ids, err)
		}
		if ids, err := c.Redrive(ctx, mustQueue(t, q), "1-1"); err != nil || len(ids) != 0 {
			t.Fatalf("Redrive: %v %v", ids, err)
		}
		for _, k := range []string{JobsKey(mustQueue(t, q)), DeadKey(mustQueue(t, q)), DelayedKey(mustQueue(t, q)), JobIDsKey(mustQueue(t, q)), JobDigestsKey(mustQueue(t, q))} {
			if n, err := c.rdb.Do(ctx, c.rdb.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
				t.Fatalf("%s exists after a claim and a redrive (%v)", k, err)
			}
		}
		for _, name := range []string{"", strings.Repeat("w", MaxConsumerName+1), "\xff", "a b", "a\tb", "a\x00", "\u200b"} {
			if _, err := c.Claim(ctx, mustQueue(t, q), name, 1); !errors.Is(err, ErrInvalidConsumer) {
				t.Fatalf("Claim by %q: %v", name, err)
			}
			if _, err := c.Recover(ctx, mustQueue(t, q), name, time.Second, 1); !errors.Is(err, ErrInvalidConsumer) {
				t.Fatalf("Recover by %q: %v", name, err)
			}
		}
		for _, id := range []string{"", "x", "1-", "-1", "1-x", "+", "-", "1-1-1", "18446744073709551616-0", " 1-1"} {
			if _, err := c.Ack(ctx, mustQueue(t, q), "1-1", id); !errors.Is(err, ErrInvalidEntryID) {
				t.Fatalf("Ack of %q: %v", id, err)
			}
			if _, err := c.Redrive(ctx, mustQueue(t, q), id); !errors.Is(err, ErrInvalidEntryID) {
				t.Fatalf("Redrive of %q: %v", id, err)
			}
			if id != "" {
				if _, err := c.Dead(ctx, mustQueue(t, q), id, 1); !errors.Is(err, ErrInvalidEntryID) {
					t.Fatalf("Dead after %q: %v", id, err)
				}
			}
		}
		if _, err := c.Ack(ctx, mustQueue(t, q), "1", "0-0", "18446744073709551615-18446744073709551615"); err != nil {
			t.Fatalf("Ack of valid ids: %v", err)
		}
	})
}

// TestIsUnavailable: a killed Redis and a LOADING answer are unavailable;
// an error reply about the command is not. A read with Redis down fails
// (its retries are bounded, about a second) instead of being retried until
// its context ends: the test's context has 60s, and the read must end with
// more than half of it left.
func TestIsUnavailable(t *testing.T) {
	rd, err := testserver.StartRedis(testCtx(t), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { rd.Stop() })
	proxy := testserver.StartScriptProxy(t, rd.Addr)
	c := connect(t, "redis://"+proxy.Addr, Options{AppendRetries: 1, RetryBackoff: time.Millisecond})
	ctx := testCtx(t)
	q := queueName(t)
	if _, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "1")...); err != nil {
		t.Fatal(err)
	}
	err = c.rdb.Do(ctx, c.rdb.B().Incr().Key(StreamKey(mustRef(t, q, "s"))).Build()).Error()
	if err == nil || IsUnavailable(err) {
		t.Fatalf("WRONGTYPE: %v, IsUnavailable true", err)
	}
	if IsUnavailable(nil) || IsUnavailable(ErrSyntax) || IsUnavailable(ErrInvalidEntryID) {
		t.Fatal("IsUnavailable of a client mistake")
	}
	// A file system's errno is not Redis being down (syscall.Errno is a
	// net.Error too), a refused connection is.
	if perm := fmt.Errorf("open the data dir: %w", &fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.EACCES}); IsUnavailable(perm) {
		t.Fatalf("IsUnavailable(%v) = true", perm)
	}
	if refused := (&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}); !IsUnavailable(refused) {
		t.Fatalf("IsUnavailable(%v) = false", refused)
	}
	proxy.AnswerLoading(100)
	if _, err := c.Claim(ctx, mustQueue(t, q), "w", 1); !IsUnavailable(err) {
		t.Fatalf("Claim answered LOADING: %v, not unavailable", err)
	}
	if _, err := c.Append(ctx, mustRef(t, q, "s"), fields("a", "2")...); !IsUnavailable(err) {
		t.Fatalf("Append answered LOADING: %v, not unavailable", err)
	}
	proxy.AnswerLoading(0)
	if err := rd.Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(ctx, mustQueue(t, q))
	if dl, _ := ctx.Deadline(); time.Until(dl) < 30*time.Second {
		t.Fatalf("Status with Redis down returned only near its context's deadline (%v): its retries are not bounded", err)
	}
	if !IsUnavailable(err) {
		t.Fatalf("Status with Redis down: %v, not unavailable", err)
	}
	if _, err := c.Claim(ctx, mustQueue(t, q), "w", 1); !IsUnavailable(err) {
		t.Fatalf("Claim with Redis down: %v, not unavailable", err)
	}
}
