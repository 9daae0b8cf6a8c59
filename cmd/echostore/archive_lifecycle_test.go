package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// appendN appends n records to q/s and returns their ids.
func appendN(t *testing.T, cmd func(...string) []string, q, s string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		out, _, err := run(t, "", cmd("stream", "append", q, s, fmt.Sprintf("n=%d", i))...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	return ids
}

// readIDs returns the ids a `stream read` prints.
func readIDs(t *testing.T, cmd func(...string) []string, args ...string) []string {
	t.Helper()
	out, _, err := run(t, "", cmd(append([]string{"stream", "read"}, args...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range lines(out) {
		_, rest, _ := strings.Cut(l, `"id":"`)
		id, _, _ := strings.Cut(rest, `"`)
		ids = append(ids, id)
	}
	return ids
}

// TestCLIArchiveDeleteRemoteAndTakeover: two data dirs share one file://
// remote. The second node's cycle pulls what the first folded and folds on
// top. A delete with the remote removes the volume's remote log; a delete
// from a data dir without the remote keeps it, and a cycle that would start
// a new volume over it refuses, naming the delete that clears it.
func TestCLIArchiveDeleteRemoteAndTakeover(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	rem := filepath.Join(dir, "remote")
	node := func(data string, withRemote bool) func(...string) []string {
		g := []string{"--redis", r.URL, "--data", filepath.Join(dir, data)}
		if withRemote {
			g = append(g, "--remote", "file://"+rem)
		}
		return func(args ...string) []string { return append(append([]string{}, g...), args...) }
	}
	a, b, c := node("a", true), node("b", true), node("c", false)
	ids := appendN(t, a, "q", "s", 10)
	if _, _, err := run(t, "", a("archive", "cycle", "q", "s", "--keep", "4", "--trim-after", "remote")...); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, appendN(t, b, "q", "s", 6)...)
	out, _, err := run(t, "", b("archive", "cycle", "q", "s", "--keep", "4", "--trim-after", "remote")...)
	if want := fmt.Sprintf(`{"folded":6,"trimmed":6,"watermark":%q}`+"\n", ids[11]); err != nil || out != want {
		t.Fatalf("second node's cycle printed %q (%v), want %q", out, err, want)
	}
	if got := readIDs(t, b, "q", "s"); strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("second node reads %d ids, want %d", len(got), len(ids))
	}
	logDir := filepath.Join(rem, "volumes", "archive.q.s", "log")
	if ents, err := os.ReadDir(logDir); err != nil || len(ents) != 2 {
		t.Fatalf("remote log before delete: %d objects, %v", len(ents), err)
	}
	// A delete from a data dir with another remote (its default one,
	// file://<data>/remote) keeps the shared remote log: it deletes
	// nothing in its own.
	out, _, err = run(t, "", c("archive", "delete", "q", "s", "--yes-delete-history")...)
	if err != nil || !strings.HasSuffix(out, `"remote_log_kept":false,"remote_objects":0}`+"\n") {
		t.Fatalf("delete without the remote: %q %v", out, err)
	}
	appendN(t, c, "q", "s", 3)
	_, _, err = run(t, "", node("d", true)("archive", "cycle", "q", "s", "--keep", "1")...)
	if err == nil || !strings.Contains(err.Error(), "archive delete q s --yes-delete-history") {
		t.Fatalf("cycle over the leftover remote log: %v", err)
	}
	// A delete with the remote removes it; then the new stream archives.
	out, _, err = run(t, "", node("d", true)("archive", "delete", "q", "s", "--yes-delete-history")...)
	if err != nil || !strings.Contains(out, `"remote_log_kept":false,"remote_objects":2}`) {
		t.Fatalf("delete with the remote: %q %v", out, err)
	}
	if ents, _ := os.ReadDir(logDir); len(ents) != 0 {
		t.Fatalf("remote log after delete: %d objects", len(ents))
	}
	fresh := appendN(t, node("d", true), "q", "s", 4)
	if _, _, err := run(t, "", node("d", true)("archive", "cycle", "q", "s", "--keep", "1", "--trim-after", "remote")...); err != nil {
		t.Fatal(err)
	}
	if got := readIDs(t, node("d", true), "q", "s"); strings.Join(got, ",") != strings.Join(fresh, ",") {
		t.Fatalf("the re-created stream reads %v, want %v", got, fresh)
	}
}
