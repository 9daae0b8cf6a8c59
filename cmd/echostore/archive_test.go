package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore/brand"
)

func TestCLIArchiveCycleStatusRead(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	g := []string{"--redis", r.URL, "--data", data}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }

	var ids []string
	for i := range 20 {
		out, _, err := run(t, "", cmd("stream", "append", "q", "s", fmt.Sprintf("n=%d", i))...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	liveBefore, _, err := run(t, "", cmd("stream", "read", "q", "s", "--live-only")...)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "", cmd("archive", "cycle", "q", "s", "--keep", "5")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"folded":15,"trimmed":15,"watermark":%q}`+"\n", ids[14]); out != want {
		t.Fatalf("cycle printed %q, want %q", out, want)
	}
	out, _, err = run(t, "", cmd("archive", "status", "q", "s")...)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st["watermark"] != ids[14] || st["archived"] != 15.0 || st["live"] != 5.0 || st["volume"] != "archive.q.s" || st["lsn"] != 1.0 {
		t.Fatalf("status %s", out)
	}
	// The merge-read prints exactly what the live read printed before the
	// cycle: the same bytes from archive and live tail.
	merged, _, err := run(t, "", cmd("stream", "read", "q", "s")...)
	if err != nil {
		t.Fatal(err)
	}
	if merged != liveBefore {
		t.Fatalf("merge-read differs from the live read before the cycle:\n%s\nwant\n%s", merged, liveBefore)
	}
	out, _, err = run(t, "", cmd("stream", "read", "q", "s", "--from", ids[13], "--to", ids[16], "--reverse")...)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(out); len(got) != 4 || !strings.Contains(got[0], ids[16]) || !strings.Contains(got[3], ids[13]) {
		t.Fatalf("range read %q", out)
	}
	// --archive-only works with Redis down.
	r.Stop()
	out, _, err = run(t, "", cmd("stream", "read", "q", "s", "--archive-only", "--limit", "2")...)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(out); len(got) != 2 || got[0] != lines(liveBefore)[0] {
		t.Fatalf("archive-only read with Redis down: %q", out)
	}
}

func TestCLIArchiveCycleTrimAfterRemote(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	g := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--remote", "file://" + filepath.Join(dir, "remote")}
	cmd := func(args ...string) []string { return append(append([]string{}, g...), args...) }
	var ids []string
	for i := range 8 {
		out, _, err := run(t, "", cmd("stream", "append", "q", "s", fmt.Sprintf("n=%d", i))...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	out, _, err := run(t, "", cmd("archive", "cycle", "q", "s", "--keep", "2", "--trim-after", "remote")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"folded":6,"trimmed":6,"watermark":%q}`+"\n", ids[5]); out != want {
		t.Fatalf("cycle printed %q, want %q", out, want)
	}
	out, _, err = run(t, "", cmd("volume", "info", "archive.q.s")...)
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); err != nil || info["remote_lsn"] != 1.0 {
		t.Fatalf("volume info after a trim-after remote cycle: %s %v", out, err)
	}
	if _, _, err := run(t, "", cmd("archive", "cycle", "q", "s", "--keep", "1", "--trim-after", "nowhere")...); err == nil {
		t.Fatal("--trim-after nowhere accepted")
	}
	if _, err := brand.EVT.Parse(ids[0]); err != nil {
		t.Fatal(err)
	}
}

func TestCLIMergeReadRefusesMissingVolume(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	folds := []string{"--redis", r.URL, "--data", filepath.Join(dir, "a")}
	other := []string{"--redis", r.URL, "--data", filepath.Join(dir, "b")}
	for range 3 {
		if _, _, err := run(t, "", append(folds, "stream", "append", "q", "s", "k=v")...); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := run(t, "", append(folds, "archive", "cycle", "q", "s", "--keep", "1")...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "", append(other, "stream", "read", "q", "s")...); err == nil || !strings.Contains(err.Error(), "archive.q.s") {
		t.Fatalf("merge-read on a node without the volume: %v, want a clear error", err)
	}
}
