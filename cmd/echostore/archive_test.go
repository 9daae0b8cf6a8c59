package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/echostore/echostore/internal/testserver"

	"github.com/echostore/echostore/archive"
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
	// The cycle's fold (a local commit) and its push were announced on the
	// volume's LSN lane, for followers blocked on it.
	lane, err := testserver.Do(context.Background(), r.Addr, "XRANGE", "emq:{vol.archive.q.s}:lane:lsn", "-", "+")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind\ncommit\nlsn\n1", "kind\npush\nlsn\n1"} {
		if !strings.Contains(lane, want) {
			t.Fatalf("LSN lane lacks %q:\n%s", want, lane)
		}
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
	// No --remote: the default file://<data>/remote has nothing to pull.
	_, _, err := run(t, "", append(other, "stream", "read", "q", "s")...)
	if !errors.Is(err, archive.ErrNoVolume) || !strings.Contains(err.Error(), "archive.q.s") {
		t.Fatalf("merge-read on a node without the volume nor a remote: %v, want a clear ErrNoVolume", err)
	}
	if _, _, err := run(t, "", append(other, "archive", "status", "q", "s")...); !errors.Is(err, archive.ErrNoVolume) {
		t.Fatalf("status on a node without the volume nor a remote: %v, want ErrNoVolume", err)
	}
	// A remote the volume was never pushed to.
	empty := append(other, "--remote", "file://"+filepath.Join(dir, "empty"))
	if _, _, err := run(t, "", append(empty, "stream", "read", "q", "s")...); !errors.Is(err, archive.ErrNoVolume) || !strings.Contains(err.Error(), "no commit of archive.q.s") {
		t.Fatalf("merge-read with an empty remote: %v, want ErrNoVolume", err)
	}
	if out, _, err := run(t, "", append(other, "volume", "ls")...); err != nil || out != "[]\n" {
		t.Fatalf("a failed pull left a volume in the data dir: %q %v", out, err)
	}
}

// A fresh data dir with the writer's remote pulls the archive volume and
// serves the whole history, byte-identical to the live read before any
// cycle; pages are fetched lazily (also by a read-only read after a pull
// that fetched none), and a volume left behind by later cycles is pulled
// again.
func TestCLIMergeReadPullsMissingVolume(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	rem := []string{"--redis", r.URL, "--remote", "file://" + filepath.Join(dir, "remote")}
	at := func(data string, args ...string) []string {
		return append(append(append([]string{}, rem...), "--data", filepath.Join(dir, data)), args...)
	}
	appendN := func(n int) {
		for i := range n {
			if _, _, err := run(t, "", at("w", "stream", "append", "q", "s", fmt.Sprintf("n=%d", i), "x=y")...); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(30)
	liveBefore, _, err := run(t, "", at("w", "stream", "read", "q", "s", "--live-only")...)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "", at("w", "archive", "cycle", "q", "s", "--keep", "4", "--trim-after", "remote")...); err != nil {
		t.Fatal(err)
	}
	got, _, err := run(t, "", at("fresh", "stream", "read", "q", "s")...)
	if err != nil {
		t.Fatal(err)
	}
	if got != liveBefore {
		t.Fatalf("merge-read on a fresh data dir:\n%s\nwant\n%s", got, liveBefore)
	}
	rev, _, err := run(t, "", at("fresh", "stream", "read", "q", "s", "--reverse")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := lines(liveBefore); !slices.Equal(lines(rev), slicesReversed(want)) {
		t.Fatalf("reverse merge-read after the pull: %q", rev)
	}
	// status pulls (no page is fetched); the read-only read that follows
	// faults the pages in from the remote.
	out, _, err := run(t, "", at("status", "archive", "status", "q", "s")...)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil || st["archived"] != 26.0 || st["live"] != 4.0 {
		t.Fatalf("status on a fresh data dir: %s %v", out, err)
	}
	if got, _, err := run(t, "", at("status", "stream", "read", "q", "s", "--archive-only")...); err != nil || got != strings.Join(lines(liveBefore)[:26], "\n")+"\n" {
		t.Fatalf("archive-only read after status pulled: %v\n%s", err, got)
	}
	// More history folded and pushed by the writer: the reader's copy is
	// behind the seam cache and is pulled again.
	appendN(10)
	all, _, err := run(t, "", at("w", "stream", "read", "q", "s")...)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "", at("w", "archive", "cycle", "q", "s", "--keep", "2", "--trim-after", "remote")...); err != nil {
		t.Fatal(err)
	}
	got, _, err = run(t, "", at("fresh", "stream", "read", "q", "s")...)
	if err != nil {
		t.Fatal(err)
	}
	if got != all || len(lines(got)) != 40 {
		t.Fatalf("merge-read with a volume behind the seam cache: %d lines, want 40 identical", len(lines(got)))
	}
}

func slicesReversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
