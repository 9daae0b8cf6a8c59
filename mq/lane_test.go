package mq

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/echostore/echostore/brand"
)

// laneItem is one thing a follower yielded.
type laneItem struct {
	e   LaneEntry
	err error
}

// follow runs seq in a goroutine and hands its items over a channel. The
// goroutine ends when ctx ends; the returned func waits for that.
func follow(seq func(func(LaneEntry, error) bool)) (<-chan laneItem, func()) {
	ch := make(chan laneItem)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		for e, err := range seq {
			ch <- laneItem{e, err}
			if err != nil && !errors.Is(err, ErrLaneGap) {
				return
			}
		}
	}()
	return ch, func() {
		for range ch {
		}
		<-done
	}
}

// blockedClients returns the number of clients blocked on every server.
func blockedClients(t testing.TB, ctx context.Context, c *Client) int {
	t.Helper()
	total := 0
	for _, n := range c.rdb.Nodes() {
		info, err := n.Do(ctx, n.B().Info().Section("clients").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := strconv.Atoi(infoField(info, "blocked_clients"))
		total += b
	}
	return total
}

// waitBlocked waits until more than base clients are blocked: the follower
// sits in XREAD BLOCK. It ends with the test's context, not a timer.
func waitBlocked(t testing.TB, ctx context.Context, c *Client, base int) {
	t.Helper()
	for blockedClients(t, ctx, c) <= base {
		if ctx.Err() != nil {
			t.Fatal("the follower never blocked")
		}
	}
}

// A follower that caught up blocks in XREAD BLOCK and wakes when an entry is
// published: no polling while idle.
func TestLaneWakesBlockedFollower(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		lane, err := QueueLane(mustQueue(t, queueName(t)), "events")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, lane, fields("seq", "0")...); err != nil {
			t.Fatal(err)
		}
		base := blockedClients(t, ctx, c)
		fctx, cancel := context.WithCancel(ctx)
		items, wait := follow(c.Subscribe(fctx, lane))
		waitBlocked(t, ctx, c, base)
		id, err := c.Publish(ctx, lane, fields("seq", "1", "kind", "wake")...)
		if err != nil {
			t.Fatal(err)
		}
		got := <-items
		if got.err != nil || got.e.ID != id || !sameFields(got.e.Fields, fields("seq", "1", "kind", "wake")) {
			t.Fatalf("follower got %+v, want the published entry %v", got, id)
		}
		// Blocked again, it wakes again.
		waitBlocked(t, ctx, c, base)
		id2, _ := c.Publish(ctx, lane, fields("seq", "2")...)
		if got := <-items; got.e.ID != id2 {
			t.Fatalf("second wake got %+v", got)
		}
		cancel()
		if last := <-items; !errors.Is(last.err, context.Canceled) {
			t.Fatalf("after cancel the follower yielded %+v, want context.Canceled", last)
		}
		wait()
	})
}

// A follower that was away catches up from its last seen id, in order.
func TestLaneCatchUp(t *testing.T) {
	c := plain(t, Options{PageSize: 2})
	ctx := testCtx(t)
	lane, _ := QueueLane(mustQueue(t, queueName(t)), "l")
	var ids []brand.ID
	for i := 0; i < 7; i++ {
		id, err := c.Publish(ctx, lane, fields("i", strconv.Itoa(i))...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	fctx, cancel := context.WithCancel(ctx)
	items, wait := follow(c.Follow(fctx, lane, ids[1]))
	for _, want := range ids[2:] {
		if got := <-items; got.err != nil || got.e.ID != want {
			t.Fatalf("got %+v, want %v", got, want)
		}
	}
	cancel()
	wait()
	if top, err := c.LaneTop(ctx, lane); err != nil || top != ids[6] {
		t.Fatalf("LaneTop = %v, %v", top, err)
	}
}

// A follower whose last seen entry the cap trimmed learns of the gap, then
// continues from the oldest entry kept.
func TestLaneGap(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		lane, _ := QueueLane(mustQueue(t, queueName(t)), "capped")
		lane.Cap = 10 // MAXLEN ~ 10 trims whole nodes of 100 entries
		first, err := c.Publish(ctx, lane, fields("i", "0")...)
		if err != nil {
			t.Fatal(err)
		}
		var last brand.ID
		for i := 1; i <= 300; i++ {
			if last, err = c.Publish(ctx, lane, fields("i", strconv.Itoa(i))...); err != nil {
				t.Fatal(err)
			}
		}
		in, err := c.info(ctx, lane.Key)
		if err != nil {
			t.Fatal(err)
		}
		if in.First <= first+1 {
			t.Fatalf("the cap trimmed nothing: %+v", in)
		}
		fctx, cancel := context.WithCancel(ctx)
		items, wait := follow(c.Follow(fctx, lane, first))
		got := <-items
		var gap *GapError
		if !errors.Is(got.err, ErrLaneGap) || !errors.As(got.err, &gap) || gap.After != first.RedisID() || gap.Prev == gap.After {
			t.Fatalf("first item %+v, want a gap after %v", got, first)
		}
		// Then the oldest kept entry and every one after it, in order, with
		// no further gap.
		var got2 []LaneEntry
		for int64(len(got2)) < in.Length {
			it := <-items
			if it.err != nil {
				t.Fatalf("after %d entries: %v", len(got2), it.err)
			}
			got2 = append(got2, it.e)
		}
		if got2[0].ID != in.First || got2[len(got2)-1].ID != last {
			t.Fatalf("follower read %v..%v, the lane holds %v..%v", got2[0].ID, got2[len(got2)-1].ID, in.First, last)
		}
		for i, e := range got2 {
			if want := strconv.Itoa(301 - len(got2) + i); e.Fields[0].Value != want || len(e.Fields) != 1 {
				t.Fatalf("entry %d: fields %v, want i=%s", i, e.Fields, want)
			}
		}
		// A follower that keeps up sees no gap while the cap trims what it
		// has read: publish in lockstep with it, across several trims.
		fctx2, cancel2 := context.WithCancel(ctx)
		items2, wait2 := follow(c.Follow(fctx2, lane, last))
		for i := 0; i < 250; i++ {
			id, err := c.Publish(ctx, lane, fields("i", "more")...)
			if err != nil {
				t.Fatal(err)
			}
			if it := <-items2; it.err != nil || it.e.ID != id {
				t.Fatalf("follower in lockstep got %+v, want %v", it, id)
			}
		}
		if in2, _ := c.info(ctx, lane.Key); in2.First <= last {
			t.Fatalf("the cap trimmed nothing during the lockstep: %+v", in2)
		}
		cancel2()
		wait2()
		cancel()
		wait()
	})
}

func TestLaneKeys(t *testing.T) {
	l, err := VolumeLane(mustVolume(t, "archive.q.s"))
	if err != nil || l.Key != "emq:{vol.archive.q.s}:lane:lsn" {
		t.Fatalf("VolumeLane = %+v, %v", l, err)
	}
	if l, err := QueueLane(mustQueue(t, "q"), "l"); err != nil || l.Key != "emq:{q}:lane:l" {
		t.Fatalf("QueueLane = %+v, %v", l, err)
	}
	if _, err := QueueLane(mustQueue(t, "q"), "a:b"); err == nil {
		t.Fatal("a lane name with ':' was accepted")
	}
}
