package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
		o := ShareOf(ids[:2], r)
		if o2 := ShareOf([]string{ids[1], ids[0]}, r); o2 != o {
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
		o := ShareOf(ids, r)
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
	if ShareOf(nil, refs[0]) != "" {
		t.Error("no nodes: an owner")
	}
	if ShareOf(ids[:1], refs[0]) != ids[0] {
		t.Error("one node: not its own")
	}
}

// TestNodeID: a data dir gets one id and keeps it; a damaged node-id file
// is refused with ErrNodeID.
func TestNodeID(t *testing.T) {
	dir := t.TempDir()
	id, err := loadNodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := loadNodeID(dir)
	if err != nil || again != id {
		t.Fatalf("second load: %q, %v; want %q", again, err, id)
	}
	other, err := loadNodeID(t.TempDir())
	if err != nil || other == id {
		t.Fatalf("another data dir: %q, %v", other, err)
	}
	for _, bad := range []string{"", "xyz\n", id[:31] + "\n", "0123456789ABCDEF0123456789ABCDEF\n", id + "\n\n"} {
		if err := os.WriteFile(filepath.Join(dir, NodeIDFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadNodeID(dir); !errors.Is(err, ErrNodeID) {
			t.Errorf("node-id file %q: %v, want ErrNodeID", bad, err)
		}
	}
}

// FuzzParseNodeID: any bytes are an id that round-trips or ErrNodeID.
func FuzzParseNodeID(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef\n"))
	f.Add([]byte("0123456789abcdef0123456789abcdef"))
	f.Add([]byte("0123456789abcdef0123456789abcdeg\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseNodeID(b)
		if err != nil {
			if !errors.Is(err, ErrNodeID) {
				t.Fatalf("%q: %v", b, err)
			}
			return
		}
		if got, err := parseNodeID([]byte(id + "\n")); err != nil || got != id {
			t.Fatalf("%q: %q does not round-trip: %q, %v", b, id, got, err)
		}
	})
}
