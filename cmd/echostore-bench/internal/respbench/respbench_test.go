package respbench

import (
	"context"
	"testing"
)

// TestRunSmall runs the suite small: every figure is there, with its
// anchor and goal.
func TestRunSmall(t *testing.T) {
	r, err := Run(context.Background(), Config{Dir: t.TempDir(), Records: 20000, Live: 200, Runs: 1, Ops: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"front XRANGE - + of the archived stream", "front XREAD STREAMS from 0, archived stream"} {
		if row := r.Row(name); row == nil || row.Anchor == "" || row.Value <= 0 {
			t.Fatalf("%s: %+v", name, row)
		}
	}
	for _, name := range []string{"GET p50 overhead of the front", "XADD p50 overhead of the front"} {
		if row := r.Row(name); row == nil || row.Goal == "" {
			t.Fatalf("%s: %+v", name, row)
		}
	}
}
