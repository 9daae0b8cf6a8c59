package lane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

type pair struct {
	w, f *graft.Volume
	cs   *remote.CountingStore
	sps  chan remote.SyncPoint
	errc chan error
}

// setup opens a writer and a follower (each its own store, sharing a
// remote and a Redis) and starts the follower's Follow.
func setup(t testing.TB, remoteURL, vol string) *pair {
	ctx := context.Background()
	r := servers.Redis(t)
	c, err := mq.Connect(ctx, mq.Options{URL: r.URL, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rs, err := remote.Open(ctx, remoteURL, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	open := func(s remote.Store) *graft.Volume {
		st, err := graft.Open(ctx, t.TempDir(), graft.Options{Remote: s, Notifier: New(c)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		v, err := st.CreateVolume(ctx, volName(vol))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	p := &pair{w: open(rs), cs: remote.NewCountingStore(rs), sps: make(chan remote.SyncPoint, 16), errc: make(chan error, 1)}
	p.f = open(p.cs)
	fctx, cancel := context.WithCancel(ctx)
	go func() { p.errc <- p.f.Follow(fctx, func(sp remote.SyncPoint) { p.sps <- sp }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-p.errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow: %v", err)
		}
	})
	<-p.sps // the initial pull
	return p
}

func commit(t testing.TB, v *graft.Volume, i uint64, data []byte) {
	txn := v.Begin()
	if err := txn.Put(i, data); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(context.Background(), graft.Synced); err != nil {
		t.Fatal(err)
	}
}

// TestFollowOnTheLane: a follower blocks on the volume's lane; local
// commits of the writer (announced as "commit") cost it no request; a push
// makes it pull exactly once (3 requests: the head, the list above its
// sync point, the new commit; a fresh follower one LIST more for the newest
// checkpoint), after which it reads the pushed bytes.
func TestFollowOnTheLane(t *testing.T) {
	ctx := context.Background()
	p := setup(t, "file://"+t.TempDir(), "lane.test")
	for round := 1; round <= 5; round++ {
		p.cs.Reset()
		for k := 0; k < 3; k++ {
			commit(t, p.w, uint64(k), []byte(fmt.Sprint(round, k)))
		}
		sp, err := p.w.Push(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := <-p.sps
		if got.Remote != sp.Remote || got.Hash != sp.Hash {
			t.Fatalf("round %d: follower at %+v, writer at %+v", round, got, sp)
		}
		wantList := int64(2)
		if round == 1 {
			wantList = 3 // a fresh follower also looks for a checkpoint
		}
		if c := p.cs.Counts(); c.List != wantList || c.Get != 1 || c.Total() != wantList+1 {
			t.Fatalf("round %d: follower requests %+v, want one pull (2 LIST, 1 GET) and nothing while quiet", round, c)
		}
		snap, err := p.f.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := snap.Get(ctx, 2)
		snap.Close()
		if err != nil || string(b) != fmt.Sprint(round, 2) {
			t.Fatalf("round %d: follower reads %q, %v", round, b, err)
		}
	}
}

// BenchmarkFollowLatency measures push → follower visible (the pull done)
// through the lane, on file://; it reports p50 and p99 in microseconds.
func BenchmarkFollowLatency(b *testing.B) {
	ctx := context.Background()
	p := setup(b, "file://"+b.TempDir(), "lane.bench")
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		commit(b, p.w, 1, []byte(fmt.Sprint(i)))
		start := time.Now()
		if _, err := p.w.Push(ctx); err != nil {
			b.Fatal(err)
		}
		<-p.sps
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// volName returns volume name s checked; it panics if s is not a valid
// volume name (test names are made valid).
func volName(s string) names.Volume {
	v, err := names.ParseVolume(s)
	if err != nil {
		panic(err)
	}
	return v
}

// TestLocalListeners: every commit and push of a store is handed to the
// Local listeners of its notifier, with its volume, kind and LSN, in
// order, and is still published on the lane; after stop a listener gets
// nothing more.
func TestLocalListeners(t *testing.T) {
	ctx := context.Background()
	r := servers.Redis(t)
	c, err := mq.Connect(ctx, mq.Options{URL: r.URL, AllowEviction: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rs, err := remote.Open(ctx, "file://"+t.TempDir(), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	n := New(c)
	st, err := graft.Open(ctx, t.TempDir(), graft.Options{Remote: rs, Notifier: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var got, after []graft.Event
	stop := n.Local(func(e graft.Event) { got = append(got, e) }) // Notify runs on the committing goroutine
	n.Local(func(e graft.Event) { after = append(after, e) })
	vols := []string{"local.a", "local.b"}
	for _, name := range vols {
		v, err := st.CreateVolume(ctx, volName(name))
		if err != nil {
			t.Fatal(err)
		}
		commit(t, v, 1, []byte(name))
		if _, err := v.Push(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []graft.Event{
		{Volume: "local.a", LSN: 1, Kind: graft.EventCommit}, {Volume: "local.a", LSN: 1, Kind: graft.EventPush},
		{Volume: "local.b", LSN: 1, Kind: graft.EventCommit}, {Volume: "local.b", LSN: 1, Kind: graft.EventPush},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("local events %+v, want %+v", got, want)
	}
	for _, name := range vols {
		l, err := lane(name)
		if err != nil {
			t.Fatal(err)
		}
		if top, err := c.LaneTop(ctx, l); err != nil || top == 0 {
			t.Fatalf("lane of %s: top %v, %v: the events were not published on it", name, top, err)
		}
	}
	stop()
	v, err := st.Volume(ctx, volName("local.a"))
	if err != nil {
		t.Fatal(err)
	}
	commit(t, v, 2, []byte("after stop"))
	if len(got) != len(want) {
		t.Fatalf("a stopped listener got %+v", got[len(want):])
	}
	if len(after) != len(want)+1 || after[len(want)] != (graft.Event{Volume: "local.a", LSN: 2, Kind: graft.EventCommit}) {
		t.Fatalf("the listener still registered got %+v", after)
	}
}
