package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// TestShareLocalVolume: two running servers on one Redis and one remote
// share the archived streams. A stream folded with trim_after: local on a
// node that is not its owner (it was alone when it folded it) stays with
// that node while its volume holds commits the remote lacks: the owner's
// cycles are refused as behind the seam cache and trim nothing, the
// holder's bound the stream. A stream of the owner's share that the other
// node never folded is cycled by the owner alone.
func TestShareLocalVolume(t *testing.T) {
	ctx := t.Context()
	q := queueName(t)
	rdir := t.TempDir()
	cfg := func(streams ...string) Config {
		var ss []StreamConfig
		for _, s := range streams {
			ss = append(ss, StreamConfig{Name: s, Keep: 2, TrimAfter: "local"})
		}
		return Config{Remote: "file://" + filepath.Join(rdir, "remote"), Queues: []QueueConfig{{Name: q, Streams: ss}}}
	}
	// The node ids decide the shares: they are made before the nodes start.
	aData, bData := t.TempDir(), t.TempDir()
	aID, bID := newNodeID(t, aData), newNodeID(t, bData)
	ref := func(s string) names.StreamRef {
		r, err := names.ParseStreamRef(q, s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Stream names of a's share once both run.
	var held, owned string
	for i := 0; held == "" || owned == ""; i++ {
		n := fmt.Sprintf("s%d", i)
		if echostore.ShareOf([]string{aID, bID}, ref(n)) == aID {
			if held == "" {
				held = n
			} else {
				owned = n
			}
		}
	}
	cb := cfg(held, owned)
	cb.Data = bData
	b := start(t, cb)
	appendN := func(e *env, s string, n int) {
		t.Helper()
		var body strings.Builder
		for i := range n {
			fmt.Fprintf(&body, `{"fields":{"i":"%d"}}`+"\n", i)
		}
		if code, out := e.do("POST", "/v1/streams/"+q+"/"+s, "", strings.NewReader(body.String())); code != 200 {
			t.Fatalf("append to %s: %d %s", s, code, out)
		}
	}
	live := func(s string) int64 {
		t.Helper()
		n, err := b.srv.live(t).Len(ctx, ref(s))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// b alone: it folds held (trim_after local: nothing pushed).
	appendN(b, held, 10)
	b.srv.beatNow(ctx)
	if n := live(held); n != 2 {
		t.Fatalf("b alone: %s holds %d live entries, want 2", held, n)
	}
	cf := cfg(held, owned)
	cf.Data = aData
	a := start(t, cf)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v := a.srv.node.Heartbeat(ctx); v != nil && len(v.Nodes) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a does not see b: %+v", a.srv.node.Group())
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.srv.beatNow(ctx) // b's view has a now
	if !a.srv.node.Owns(ref(held)) || b.srv.node.Owns(ref(held)) || !a.srv.node.Owns(ref(owned)) {
		t.Fatalf("shares: a owns %s %v, %s %v; b owns %s %v", held, a.srv.node.Owns(ref(held)), owned, a.srv.node.Owns(ref(owned)), held, b.srv.node.Owns(ref(held)))
	}
	// The console's view of the group, from a: both nodes live, with their
	// heartbeats and addresses, and both streams a's share.
	var nodes NodeList
	if err := json.Unmarshal(a.must("GET", "/v1/nodes", ""), &nodes); err != nil {
		t.Fatal(err)
	}
	if nodes.Group == "" || nodes.Self != aID || len(nodes.Nodes) != 2 {
		t.Fatalf("GET /v1/nodes from a: %+v, want a group of a and b", nodes)
	}
	for _, n := range nodes.Nodes {
		want, addr := []string{}, b.srv.Addr().String()
		if n.ID == aID {
			want, addr = []string{apiPath(ref(held)), apiPath(ref(owned))}, a.srv.Addr().String()
			slices.Sort(want)
		}
		if n.Self != (n.ID == aID) || n.Addr != addr || n.HeartbeatLeftMs <= 0 || n.Started == "" || !slices.Equal(n.Streams, want) || n.StreamsN != len(want) {
			t.Fatalf("GET /v1/nodes from a, node %s: %+v, want address %s and the streams %v", n.ID, n, addr, want)
		}
	}
	appendN(a, held, 10)
	appendN(a, owned, 10)
	a.srv.beatNow(ctx) // held: refused (its volume is b's, unpushed); owned: folded
	if n := live(held); n != 12 {
		t.Fatalf("after a's beat %s holds %d live entries, want 12 (the owner lacks its volume: nothing trimmed)", held, n)
	}
	if n := live(owned); n != 2 {
		t.Fatalf("after a's beat %s holds %d live entries, want 2", owned, n)
	}
	b.srv.beatNow(ctx) // held: b's volume has what the remote lacks; owned: a's
	if n := live(held); n != 2 {
		t.Fatalf("after b's beat %s holds %d live entries, want 2: the node with the volume cycles it", held, n)
	}
	if _, err := b.srv.node.VolumeInfo(ctx, ref(owned).Volume()); !errors.Is(err, graft.ErrVolumeNotFound) {
		t.Fatalf("b's volume of %s: %v, want none (b cycled a's share?)", owned, err)
	}
}

// newNodeID writes a new node id into data dir dir, as the node's first
// Open would, and returns it.
func newNodeID(t *testing.T, dir string) string {
	t.Helper()
	var raw [16]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	if err := os.WriteFile(filepath.Join(dir, NodeIDFile), []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return id
}

// beatNow runs one beat as the node's Run does: a heartbeat, then
// serve's Beat.
func (s *Server) beatNow(ctx context.Context) {
	s.node.Heartbeat(ctx)
	s.Beat(ctx)
}

// outboxLen returns the intents the node's accept outbox holds uncommitted.
func (s *Server) outboxLen() int {
	st, _ := s.node.OutboxStats()
	return st.Live
}
