package echostore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// TestShareOf: every node computes the same owner; the shares are fair;
// a node that joins takes streams only from the others (no stream moves
// between two nodes that stay), and one that leaves gives only its own.
func TestShareOf(t *testing.T) {
	ids := []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "00000000000000000000000000000001"}
	const n = 3000
	refs := make([]names.StreamRef, n)
	for i := range refs {
		r, err := names.ParseStreamRef("q", fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = r
	}
	k, err := names.ParseKeyRef("app:orders")
	if err != nil {
		t.Fatal(err)
	}
	refs = append(refs, k)
	two := map[names.StreamRef]string{}
	count := map[string]int{}
	for _, r := range refs {
		o := echostore.ShareOf(ids[:2], r)
		if o2 := echostore.ShareOf([]string{ids[1], ids[0]}, r); o2 != o {
			t.Fatalf("%s: owner %s or %s by the order of the ids", r, o, o2)
		}
		two[r] = o
		count[o]++
	}
	for _, id := range ids[:2] {
		if c := count[id]; c < n*2/5 || c > n*3/5 {
			t.Errorf("two nodes: %s owns %d of %d streams", id, c, len(refs))
		}
	}
	count = map[string]int{}
	for _, r := range refs {
		o := echostore.ShareOf(ids, r)
		count[o]++
		if o != ids[2] && o != two[r] {
			t.Fatalf("%s moved from %s to %s when a third node joined", r, two[r], o)
		}
	}
	for _, id := range ids {
		if c := count[id]; c < n/4 || c > n*5/12 {
			t.Errorf("three nodes: %s owns %d of %d streams", id, c, len(refs))
		}
	}
	if echostore.ShareOf(nil, refs[0]) != "" {
		t.Error("no nodes: an owner")
	}
	if echostore.ShareOf(ids[:1], refs[0]) != ids[0] {
		t.Error("one node: not its own")
	}
}

// TestNodeID: a data dir gets one id and keeps it (Open reads it back);
// a damaged node-id file is refused with ErrNodeID, by Open too.
func TestNodeID(t *testing.T) {
	dir := t.TempDir()
	id, err := echostore.LoadNodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := echostore.LoadNodeID(dir)
	if err != nil || again != id {
		t.Fatalf("second load: %q, %v; want %q", again, err, id)
	}
	other, err := echostore.LoadNodeID(t.TempDir())
	if err != nil || other == id {
		t.Fatalf("another data dir: %q, %v", other, err)
	}
	n, err := echostore.Open(testCtx(t), echostore.Config{Data: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := n.ID()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got != id {
		t.Fatalf("Open's node id %q, want the data dir's %q", got, id)
	}
	for _, bad := range []string{"", "xyz\n", id[:31] + "\n", "0123456789ABCDEF0123456789ABCDEF\n", id + "\n\n"} {
		if err := os.WriteFile(filepath.Join(dir, echostore.NodeIDFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := echostore.LoadNodeID(dir); !errors.Is(err, echostore.ErrNodeID) {
			t.Errorf("node-id file %q: %v, want ErrNodeID", bad, err)
		}
	}
	if n, err := echostore.Open(testCtx(t), echostore.Config{Data: dir}); !errors.Is(err, echostore.ErrNodeID) {
		if n != nil {
			n.Close(context.Background())
		}
		t.Fatalf("Open over a damaged node-id file: %v, want ErrNodeID", err)
	}
}

// FuzzParseNodeID: any bytes are an id that round-trips or ErrNodeID.
func FuzzParseNodeID(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef\n"))
	f.Add([]byte("0123456789abcdef0123456789abcdef"))
	f.Add([]byte("0123456789abcdef0123456789abcdeg\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := echostore.ParseNodeID(b)
		if err != nil {
			if !errors.Is(err, echostore.ErrNodeID) {
				t.Fatalf("%q: %v", b, err)
			}
			return
		}
		if got, err := echostore.ParseNodeID([]byte(id + "\n")); err != nil || got != id {
			t.Fatalf("%q: %q does not round-trip: %q, %v", b, id, got, err)
		}
	})
}

// TestGroupOnCluster: the heartbeat, the group's list, the stream epoch
// and leaving work on a Redis Cluster (their keys share the {emq} slot);
// nodes on another remote are another group; a node that stops
// heartbeating is out once its heartbeat's TTL has passed.
func TestGroupOnCluster(t *testing.T) {
	ctx := t.Context()
	cl := servers.Cluster(t)
	url := "redis://" + strings.Join(cl.Addrs, ",")
	rdir := t.TempDir()
	member := func(remote string) *echostore.Node {
		t.Helper()
		n := open(t, echostore.Config{Data: t.TempDir(), Redis: url, Remote: "file://" + remote, DeferJobs: true})
		n.JoinGroup("test")
		return n
	}
	refresh := func(n *echostore.Node) *echostore.GroupView {
		t.Helper()
		v, _, err := n.RefreshGroup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b := member(rdir), member(rdir)
	other := member(t.TempDir())
	refresh(a)
	refresh(other)
	v := refresh(b)
	want := []string{a.ID(), b.ID()}
	slices.Sort(want)
	if !slices.Equal(v.Nodes, want) || v.Self != b.ID() {
		t.Fatalf("b sees %v (self %s), want %v", v.Nodes, v.Self, want)
	}
	if s := streamRef(t, "s"); b.Group() != v || b.Owns(s) != (v.Owner(s) == b.ID()) {
		t.Fatalf("b's Group and Owns do not follow its last heartbeat")
	}
	if v := refresh(other); !slices.Equal(v.Nodes, []string{other.ID()}) || v.Group == a.Group().Group {
		t.Fatalf("a node on another remote sees %v in group %s", v.Nodes, v.Group)
	}
	// a and b have one node number: b's check finds a, and its heartbeat
	// reads as a member.
	if got := b.ClashesWith(ctx, v); !got[a.ID()] || len(got) != 1 {
		t.Fatalf("b's node-number check: %v, want a (%s)", got, a.ID())
	}
	ms, err := b.GroupMembers(ctx, v)
	if err != nil || len(ms) != 2 || ms[0].ID != v.Nodes[0] || ms[0].Addr != "test" || ms[0].Started == "" {
		t.Fatalf("b reads the members %+v, %v", ms, err)
	}
	epoch := v.Epoch
	if err := a.Announce(ctx, streamRef(t, "new")); err != nil {
		t.Fatal(err)
	}
	if v, changed, err := b.RefreshGroup(ctx); err != nil || !changed || v.Epoch == epoch {
		t.Fatalf("after a met a stream, b: %+v changed %v, %v", v, changed, err)
	}
	a.LeaveGroup(ctx)
	if v := refresh(b); !slices.Equal(v.Nodes, []string{b.ID()}) {
		t.Fatalf("after a left, b sees %v", v.Nodes)
	}
	if v := a.Group(); v != nil {
		t.Fatalf("a left and still has a view: %+v", v)
	}
	if v, _, err := a.RefreshGroup(ctx); v != nil || err != nil {
		t.Fatalf("a left and heartbeats: %+v, %v", v, err)
	}
	// A node that stops heartbeating (killed) is out after HeartbeatTTL.
	c := member(rdir)
	refresh(c)
	if v := refresh(b); len(v.Nodes) != 2 {
		t.Fatalf("b sees %v, want itself and c", v.Nodes)
	}
	deadline := time.Now().Add(echostore.HeartbeatTTL + 10*time.Second)
	for {
		if v := refresh(b); len(v.Nodes) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c still live %v after its last heartbeat", echostore.HeartbeatTTL+10*time.Second)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestRunSharesTheGroup: two nodes that Run on one Redis and one remote
// are one group: each beat cycles the node's share alone (the streams
// rendezvous hashing gives it), and when one node's Run ends it leaves, so
// that the other cycles every stream from its next beat.
func TestRunSharesTheGroup(t *testing.T) {
	ctx := t.Context()
	remote := "file://" + t.TempDir()
	type member struct {
		node   *echostore.Node
		stop   func()
		mu     sync.Mutex
		folded map[names.StreamRef]int64
	}
	start := func() *member {
		n := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remote, DeferJobs: true})
		m := &member{node: n, folded: map[names.StreamRef]int64{}}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- n.Run(runCtx, echostore.RunOptions{Beat: 5 * time.Millisecond, Addr: "test", BeatOptions: echostore.BeatOptions{
				OnCycle: func(r echostore.CycleReport) {
					m.mu.Lock()
					m.folded[r.Ref] += r.Result.Folded
					m.mu.Unlock()
				}}})
		}()
		var once sync.Once
		m.stop = func() {
			once.Do(func() {
				stop()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		}
		t.Cleanup(m.stop)
		return m
	}
	folded := func(m *member, ref names.StreamRef) int64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.folded[ref]
	}
	// waitFolded waits until m has reported folding want records of ref
	// (the reports follow the cycles of a beat).
	waitFolded := func(m *member, ref names.StreamRef, want int64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for folded(m, ref) < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s reported %d folded after a minute, want %d", ref, m.node.ID(), folded(m, ref), want)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	a, b := start(), start()
	// waitView waits until m's view of the group is exactly nodes.
	waitView := func(m *member, nodes ...string) {
		t.Helper()
		slices.Sort(nodes)
		deadline := time.Now().Add(time.Minute)
		for {
			if v := m.node.Group(); v != nil && slices.Equal(v.Nodes, nodes) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %+v after a minute, want %v", m.node.ID(), m.node.Group(), nodes)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	waitView(a, a.node.ID(), b.node.ID())
	waitView(b, a.node.ID(), b.node.ID())
	ids := []string{a.node.ID(), b.node.ID()}
	refs := make([]names.StreamRef, 16)
	owner := map[string]int{}
	for i := range refs {
		refs[i] = streamRef(t, fmt.Sprintf("s%d", i))
		owner[echostore.ShareOf(ids, refs[i])]++
		for _, m := range []*member{a, b} {
			if err := m.node.Declare(refs[i], echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 1}, TrimAfter: echostore.TrimAfterRemote}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if owner[ids[0]] == 0 || owner[ids[1]] == 0 {
		t.Skipf("the streams all fell to one node (%v); the test needs both shares", owner)
	}
	// waitBounded waits until every stream is archived up to its window.
	waitBounded := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for _, ref := range refs {
			for {
				st, err := a.node.Status(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				if st.Archived == want && st.Live == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %d archived, %d live after a minute; want %d and 1", ref, st.Archived, st.Live, want)
				}
				select {
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
	for _, ref := range refs {
		appendN(t, a.node, ref, 5)
	}
	waitBounded(4)
	for _, ref := range refs {
		mine, other := a, b
		if echostore.ShareOf(ids, ref) == b.node.ID() {
			mine, other = b, a
		}
		waitFolded(mine, ref, 4)
		if folded(mine, ref) != 4 || folded(other, ref) != 0 {
			t.Errorf("%s: its owner folded %d, the other node %d; want 4 and 0", ref, folded(mine, ref), folded(other, ref))
		}
	}
	// a's Run ends: it leaves, and b cycles a's share too.
	a.stop()
	if v := a.node.Group(); v != nil {
		t.Fatalf("a's Run ended and a still has a view: %+v", v)
	}
	waitView(b, b.node.ID())
	for _, ref := range refs {
		appendN(t, b.node, ref, 5)
	}
	waitBounded(9)
	for _, ref := range refs {
		if echostore.ShareOf(ids, ref) == a.node.ID() {
			waitFolded(b, ref, 5)
			if folded(b, ref) != 5 || folded(a, ref) != 4 {
				t.Errorf("%s of a's share: b folded %d after a left, a %d in all; want 5 and 4", ref, folded(b, ref), folded(a, ref))
			}
		}
	}
}
