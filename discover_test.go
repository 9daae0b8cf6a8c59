package echostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// TestAdoptable: of the archived streams registered in Redis, a node may
// adopt those not declared on it whose archive it can reach: its own
// volume, or one in its remote; a stream folded elsewhere and never pushed
// is left alone, and a declared one is not listed.
func TestAdoptable(t *testing.T) {
	ctx := t.Context()
	remoteURL := "file://" + t.TempDir()
	open := func(remote string) *echostore.Node {
		node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remote})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close(t.Context()) })
		return node
	}
	a := open(remoteURL)
	local, pushed := streamRef(t, "local"), streamRef(t, "pushed")
	for _, ref := range []names.StreamRef{local, pushed} {
		appendN(t, a, ref, 5)
		if _, err := a.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Push(ctx, pushed.Volume()); err != nil {
		t.Fatal(err)
	}
	adoptable := func(n *echostore.Node) map[names.StreamRef]echostore.Adoptable {
		out := map[names.StreamRef]echostore.Adoptable{}
		for ad, err := range n.Adoptable(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if ad.Ref == local || ad.Ref == pushed { // Redis holds other tests' streams too
				out[ad.Ref] = ad
			}
		}
		return out
	}
	if got := adoptable(a); len(got) != 2 || !got[local].LocalVolume || !got[pushed].LocalVolume {
		t.Fatalf("the folding node may adopt %+v, want both streams, each with its local volume", got)
	}
	if err := a.Declare(local, echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 2}}); err != nil {
		t.Fatal(err)
	}
	if got := adoptable(a); len(got) != 1 || !got[pushed].LocalVolume {
		t.Fatalf("after declaring %s the folding node may adopt %+v, want %s alone", local, got, pushed)
	}
	b := open(remoteURL) // another data dir on the same remote
	if got := adoptable(b); len(got) != 1 || got[pushed].LocalVolume || got[pushed].Ref != pushed {
		t.Fatalf("a node on the remote may adopt %+v, want %s (its volume in the remote) alone", got, pushed)
	}
	c := open("file://" + t.TempDir()) // another remote: neither volume within reach
	if got := adoptable(c); len(got) != 0 {
		t.Fatalf("a node on another remote may adopt %+v, want none", got)
	}
}

// TestProbe: a node's Probe answers nil for a Redis and a remote that
// answer, and ErrNoRedis for a node without Redis.
func TestProbe(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name      string
		redis     string
		wantRedis error
	}{{"with Redis", redisURL, nil}, {"without Redis", "", echostore.ErrNoRedis}} {
		t.Run(tc.name, func(t *testing.T) {
			node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: tc.redis, Remote: "file://" + t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer node.Close(ctx)
			rerr, serr := node.Probe(ctx)
			if !errors.Is(rerr, tc.wantRedis) || (tc.wantRedis == nil) != (rerr == nil) || serr != nil {
				t.Fatalf("Probe: redis %v, remote %v; want redis %v, remote nil", rerr, serr, tc.wantRedis)
			}
		})
	}
}

// TestBeatDiscovers: with BeatOptions.Adopt, the first beat offers the
// streams the node may adopt, the next ones within DiscoverEvery offer
// none, a change of the node's group makes the next beat offer them again,
// and a stream Adopt declares is not offered after.
func TestBeatDiscovers(t *testing.T) {
	ctx := t.Context()
	remoteURL := "file://" + t.TempDir()
	folder := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remoteURL})
	ref := streamRef(t, "found")
	appendN(t, folder, ref, 5)
	if _, err := folder.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := folder.Push(ctx, ref.Volume()); err != nil {
		t.Fatal(err)
	}
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remoteURL})
	policy := echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 2}}
	take := false // whether adopt declares what it is offered
	beat := func(every time.Duration) (offered int) {
		t.Helper()
		node.Beat(ctx, echostore.BeatOptions{DiscoverEvery: every, Adopt: func(_ context.Context, a echostore.Adoptable) error {
			if a.Ref != ref { // Redis holds other tests' streams too
				return errors.New("not this test's")
			}
			offered++
			if !take {
				return errors.New("left alone by the test")
			}
			return node.Declare(a.Ref, policy)
		}})
		return offered
	}
	if n := beat(0); n != 1 {
		t.Fatalf("the first beat offered %s %d times, want once", ref, n)
	}
	if n := beat(0); n != 0 {
		t.Fatalf("the second beat offered %s %d times, want none within DiscoverEvery", ref, n)
	}
	node.JoinGroup("")
	t.Cleanup(func() { node.LeaveGroup(context.WithoutCancel(ctx)) })
	if v := node.Heartbeat(ctx); v == nil {
		t.Fatal("no view of the group after joining it")
	}
	take = true
	if n := beat(0); n != 1 {
		t.Fatalf("the beat after the group changed offered %s %d times, want once", ref, n)
	}
	if d := node.Declared(); len(d) != 1 || d[0].Ref != ref || !d[0].Policy.Archived {
		t.Fatalf("declared %+v, want the adopted %s archived", d, ref)
	}
	if n := beat(time.Nanosecond); n != 0 { // due on every beat, but declared
		t.Fatalf("a beat offered the declared %s %d times", ref, n)
	}
}
