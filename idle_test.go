package echostore_test

import (
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	goredis "github.com/redis/go-redis/v9"
)

// TestBeatSkipsIdleStreams: with no Pick, a beat cycles the archived
// streams that may have changed and leaves the others alone: every stream
// on the first beat, none of ten idle ones on the next, the one an append
// through the node named in its change feed, the one a plain XADD moved
// once the sweep reads its top (within as many beats as there are idle
// streams: the sweep reads the one read longest ago), and one declared
// again.
func TestBeatSkipsIdleStreams(t *testing.T) {
	ctx := t.Context()
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close(t.Context()) })
	policy := echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 2}}
	refs := make([]names.StreamRef, 10)
	for i := range refs {
		refs[i] = streamRef(t, "idle"+string(rune('a'+i)))
		if err := node.Declare(refs[i], policy); err != nil {
			t.Fatal(err)
		}
		appendN(t, node, refs[i], 5)
	}
	type beat struct {
		picked echostore.BeatPicked
		cycled []names.StreamRef
	}
	// An hour's sweep over 5 s beats: one idle stream's top read a beat.
	beatOnce := func() beat {
		var b beat
		node.Beat(ctx, echostore.BeatOptions{Sweep: time.Hour, Every: 5 * time.Second,
			OnPicked: func(p echostore.BeatPicked) { b.picked = p },
			OnCycle: func(r echostore.CycleReport) {
				if r.Err != nil {
					t.Errorf("cycle of %s: %v", r.Ref, r.Err)
				}
				b.cycled = append(b.cycled, r.Ref)
			}})
		return b
	}
	if b := beatOnce(); len(b.cycled) != 10 || b.picked.Due != 10 {
		t.Fatalf("first beat: %+v, want every stream cycled", b)
	}
	if b := beatOnce(); len(b.cycled) != 0 || b.picked != (echostore.BeatPicked{Idle: 10, Probed: 1}) {
		t.Fatalf("idle beat: %+v, want nothing cycled, ten idle, one top read", b)
	}
	appendN(t, node, refs[3], 1)
	if b := beatOnce(); len(b.cycled) != 1 || b.cycled[0] != refs[3] {
		t.Fatalf("after an append to %s: %+v, want it alone cycled", refs[3], b)
	}

	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: mq.StreamKey(refs[7]), Values: []string{"by", "another"}}).Err(); err != nil {
		t.Fatal(err)
	}
	found := false
	for i := 0; i <= len(refs) && !found; i++ {
		b := beatOnce()
		switch {
		case len(b.cycled) == 1 && b.cycled[0] == refs[7] && b.picked.Swept == 1:
			found = true
		case len(b.cycled) != 0:
			t.Fatalf("sweep beat %d: %+v, want nothing cycled or %s found by the sweep", i, b, refs[7])
		}
	}
	if !found {
		t.Fatalf("the sweep did not find the entry XADDed to %s within %d beats", refs[7], len(refs)+1)
	}
	st, err := node.Status(ctx, refs[7])
	if err != nil || st.Live != 2 || st.Archived != 4 {
		t.Fatalf("status of %s: %+v, %v; want 2 live, 4 archived", refs[7], st, err)
	}

	if err := node.Declare(refs[0], policy); err != nil {
		t.Fatal(err)
	}
	if b := beatOnce(); len(b.cycled) != 1 || b.cycled[0] != refs[0] {
		t.Fatalf("after declaring %s again: %+v, want it alone cycled", refs[0], b)
	}
}
