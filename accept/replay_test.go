package accept

import (
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
