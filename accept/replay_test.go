package accept

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/echostore/echostore/brand"
)

// TestReplayAcceptedTwice: an id accepted twice with no commit between is
// corruption, whether the replay runs on the slice of accepted-only blocks
// (the duplicate within one block, or across two) or on the overlay (a
// committed record came first), and an id accepted, committed and accepted
// again is live once.
func TestReplayAcceptedTwice(t *testing.T) {
	acc := func(id uint64) rec {
		return rec{kind: kindAccepted, id: brand.ID(id), queue: qn("q"), payload: []byte("p")}
	}
	com := func(id uint64) rec { return rec{kind: kindCommitted, id: brand.ID(id)} }
	cases := []struct {
		name   string
		blocks [][]rec
		live   int // -1: ErrCorrupt
	}{
		{"fast, one block", [][]rec{{acc(1), acc(2), acc(1)}}, -1},
		{"fast, two blocks", [][]rec{{acc(1), acc(2)}, {acc(3), acc(2)}}, -1},
		{"fast, distinct", [][]rec{{acc(1), acc(2)}, {acc(3)}}, 3},
		{"overlay after a commit", [][]rec{{acc(1), com(1)}, {acc(2), acc(2)}}, -1},
		{"fast then overlay", [][]rec{{acc(1), acc(2)}, {com(9), acc(1)}}, -1},
		{"accept, commit, accept", [][]rec{{acc(1), acc(2)}, {com(1)}, {acc(1)}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			seg := appendSegHeader(nil, 1)
			for i, b := range c.blocks {
				seg = appendBlock(seg, uint64(i+1), b)
			}
			if err := os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o644); err != nil {
				t.Fatal(err)
			}
			o, err := Open(context.Background(), dir, Options{})
			if c.live < 0 {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open: %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close(context.Background())
			if o.Len() != c.live {
				t.Fatalf("%d live, want %d", o.Len(), c.live)
			}
		})
	}
}

// TestReplayDecodesIntoChunk: the blocks that replay decodes straight into
// its chunk of intents (accepted records only, after the segment's first)
// give the intents the records hold: queues that change within a block,
// short and long (past 8 bytes) names, empty and long payloads, delayed
// records; a later block with a commit among its records goes to the
// overlay and leaves nothing of itself in the chunk.
func TestReplayDecodesIntoChunk(t *testing.T) {
	queues := []string{"q", "jobs", "exactly8", "a-longer-queue-name"}
	var blocks [][]rec
	want := map[brand.ID]Intent{}
	id := uint64(0)
	for b := range 6 {
		var recs []rec
		for i := range 40 {
			id++
			in := Intent{ID: brand.ID(id), Queue: qn(queues[(i/7+b)%len(queues)]), Payload: bytes.Repeat([]byte{byte(id)}, (i*13)%70)}
			if i%11 == 5 {
				in.RunAt = int64(1_700_000_000_000 + id)
			}
			recs = append(recs, acceptedRec(in))
			want[in.ID] = in
		}
		if b == 4 {
			// A commit of an earlier id mid-block.
			recs = append(recs[:20:20], append([]rec{{kind: kindCommitted, id: 3}}, recs[20:]...)...)
			delete(want, 3)
		}
		blocks = append(blocks, recs)
	}
	dir := t.TempDir()
	seg := appendSegHeader(nil, 1)
	for i, b := range blocks {
		seg = appendBlock(seg, uint64(i+1), b)
	}
	if err := os.WriteFile(filepath.Join(dir, segName(1)), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := Open(context.Background(), dir, Options{FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	if o.Len() != len(want) {
		t.Fatalf("%d live, want %d", o.Len(), len(want))
	}
	for id, w := range want {
		got, ok := o.Get(id)
		if !ok || got.Queue != w.Queue || !bytes.Equal(got.Payload, w.Payload) || got.RunAt != w.RunAt {
			t.Fatalf("id %d: %+v, %v; want %+v", id, got, ok, w)
		}
	}
}
