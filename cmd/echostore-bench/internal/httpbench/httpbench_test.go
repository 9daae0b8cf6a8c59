package httpbench

import (
	"context"
	"testing"
)

// TestRunSmall runs the suite small: both figures are there, the HTTP
// append with its anchor and goal.
func TestRunSmall(t *testing.T) {
	r, err := Run(context.Background(), Config{Dir: t.TempDir(), Records: 2000, Batch: 500, Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if row := r.Row("pipelined raw XADD to Redis"); row == nil || row.Value <= 0 {
		t.Fatalf("anchor: %+v", row)
	}
	if row := r.Row("HTTP append of JSON lines through serve"); row == nil || row.Anchor == "" || row.Goal == "" || row.Value <= 0 {
		t.Fatalf("HTTP append: %+v", row)
	}
}
