package accept

import (
	"slices"
	"testing"
	"time"
)

// TestRecentRing: the ring keeps the latest 16 batch sizes, oldest first.
func TestRecentRing(t *testing.T) {
	var r recent
	if got := r.batches(); len(got) != 0 {
		t.Fatalf("empty ring: %v", got)
	}
	for i := 1; i <= 20; i++ {
		r.add(i, time.Duration(i))
	}
	want := []int{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	if got := r.batches(); !slices.Equal(got, want) || r.commits != 20 || r.lastPush != 20 {
		t.Fatalf("batches %v commits %d last %v, want %v 20 20", got, r.commits, r.lastPush, want)
	}
}
