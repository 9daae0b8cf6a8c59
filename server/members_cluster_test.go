package server

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/mq"
)

// memberOf is the membership of a bare server over live and a store
// replicating to the file:// remote at rdir: what refresh, streamMet and
// leave use.
func memberOf(t *testing.T, live *mq.Client, rdir string) *members {
	t.Helper()
	ctx := t.Context()
	rs, err := remote.Open(ctx, "file://"+rdir, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := graft.Open(ctx, filepath.Join(t.TempDir(), "graft"), graft.Options{Remote: rs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close(); rs.Close() })
	data := t.TempDir()
	id, err := loadNodeID(data)
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	s := &Server{cfg: Config{Data: data}, mq: live, store: gs, m: m, fm: newFleetMetrics(m.reg), nodeID: id,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &members{s: s, id: id, info: `{"addr":"test","node":0}`, clash: map[string]bool{}}
}

// TestMembersOnCluster: the heartbeat, the group's list, the stream epoch
// and leaving work on a Redis Cluster (their keys share the {emq} slot);
// nodes on another remote are another group; a node that stops
// heartbeating is out once its heartbeat's TTL has passed.
func TestMembersOnCluster(t *testing.T) {
	ctx := t.Context()
	cl := servers.Cluster(t)
	live, err := mq.Connect(ctx, mq.Options{URL: "redis://" + strings.Join(cl.Addrs, ","), AllowEviction: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	rdir := t.TempDir()
	a, b := memberOf(t, live, rdir), memberOf(t, live, rdir)
	other := memberOf(t, live, t.TempDir())
	refresh := func(m *members) *view {
		t.Helper()
		v, _, err := m.refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	refresh(a)
	refresh(other)
	v := refresh(b)
	want := []string{a.id, b.id}
	slices.Sort(want)
	if !slices.Equal(v.nodes, want) || v.self != b.id {
		t.Fatalf("b sees %v (self %s), want %v", v.nodes, v.self, want)
	}
	if v := refresh(other); !slices.Equal(v.nodes, []string{other.id}) || v.group == a.view().group {
		t.Fatalf("a node on another remote sees %v in group %s", v.nodes, v.group)
	}
	// a and b have one node number: b's check finds a.
	b.checkNodeNumbers(ctx, v)
	if !b.clash[a.id] || len(b.clash) != 1 {
		t.Fatalf("b's node-number check: %v, want a (%s)", b.clash, a.id)
	}
	epoch := v.epoch
	if err := a.streamMet(ctx); err != nil {
		t.Fatal(err)
	}
	if v, changed, err := b.refresh(ctx); err != nil || !changed || v.epoch == epoch {
		t.Fatalf("after a met a stream, b: %+v changed %v, %v", v, changed, err)
	}
	a.leave(ctx)
	if v := refresh(b); !slices.Equal(v.nodes, []string{b.id}) {
		t.Fatalf("after a left, b sees %v", v.nodes)
	}
	if v := a.view(); v != nil {
		t.Fatalf("a left and still has a view: %+v", v)
	}
	// A node that stops heartbeating (killed) is out after HeartbeatTTL.
	c := memberOf(t, live, rdir)
	refresh(c)
	if v := refresh(b); len(v.nodes) != 2 {
		t.Fatalf("b sees %v, want itself and c", v.nodes)
	}
	deadline := time.Now().Add(HeartbeatTTL + 10*time.Second)
	for {
		if v := refresh(b); len(v.nodes) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c still live %v after its last heartbeat", HeartbeatTTL+10*time.Second)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
