package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/scalebench"
)

// TestWriteScaleKey: the scale figures become the report's "scale" key,
// and every other key of the report is kept as it was.
func TestWriteScaleKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench", "report.json")
	if err := writeScaleKey(path, &scalebench.Report{Streams: 3}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"graft": {"x": 1}, "scale": {"streams": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeScaleKey(path, &scalebench.Report{Streams: 10000, IdleOps: 12.5}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Graft map[string]int    `json:"graft"`
		Scale scalebench.Report `json:"scale"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Graft["x"] != 1 || doc.Scale.Streams != 10000 || doc.Scale.IdleOps != 12.5 {
		t.Fatalf("report after writeScaleKey: %s", b)
	}
}
