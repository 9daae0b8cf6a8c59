package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIArchiveDelete: without --yes-delete-history nothing is deleted;
// with it the volume and the live keys go, and status and reads show an
// empty stream; a sibling stream is untouched.
func TestCLIArchiveDelete(t *testing.T) {
	r := startRedis(t)
	g := []string{"--redis", r.URL, "--data", filepath.Join(t.TempDir(), "data")}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	for _, s := range []string{"s", "sib"} {
		for i := range 10 {
			if _, _, err := run(t, "", cmd("stream", "append", "q", s, fmt.Sprintf("n=%d", i))...); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := run(t, "", cmd("archive", "cycle", "q", s, "--keep", "3")...); err != nil {
			t.Fatal(err)
		}
	}
	status := func(s string) string {
		t.Helper()
		out, _, err := run(t, "", cmd("archive", "status", "q", s)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before, sibBefore := status("s"), status("sib")
	if !strings.Contains(before, `"archived":7,"live":3`) {
		t.Fatalf("status before: %s", before)
	}
	readBefore, _, err := run(t, "", cmd("stream", "read", "q", "sib")...)
	if err != nil {
		t.Fatal(err)
	}

	_, _, err = run(t, "", cmd("archive", "delete", "q", "s")...)
	if err == nil || !strings.Contains(err.Error(), "--yes-delete-history") || !strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("delete without the flag: %v", err)
	}
	if got := status("s"); got != before {
		t.Fatalf("status after a refused delete: %s, want %s", got, before)
	}

	out, _, err := run(t, "", cmd("archive", "delete", "q", "s", "--yes-delete-history")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"deleted":true,"volume":"archive.q.s","volume_dropped":true,"live_entries":3,"remote_log_kept":false,"remote_objects":0}` + "\n"; out != want {
		t.Fatalf("delete printed %q, want %q", out, want)
	}
	if got, want := status("s"), `{"watermark":null,"archived":0,"live":0,"volume":"archive.q.s","lsn":0}`+"\n"; got != want {
		t.Fatalf("status after delete: %s, want %s", got, want)
	}
	if out, _, err := run(t, "", cmd("stream", "read", "q", "s")...); err != nil || out != "" {
		t.Fatalf("read after delete: %q, %v", out, err)
	}
	if got := status("sib"); got != sibBefore {
		t.Fatalf("sibling status changed: %s, want %s", got, sibBefore)
	}
	if got, _, err := run(t, "", cmd("stream", "read", "q", "sib")...); err != nil || got != readBefore {
		t.Fatalf("sibling read changed: %v", err)
	}
	// Deleting again: nothing left, still succeeds (the live part is gone,
	// there is no volume).
	out, _, err = run(t, "", cmd("archive", "delete", "q", "s", "--yes-delete-history")...)
	if err != nil || !strings.Contains(out, `"volume_dropped":false,"live_entries":0`) {
		t.Fatalf("second delete: %q, %v", out, err)
	}
}
