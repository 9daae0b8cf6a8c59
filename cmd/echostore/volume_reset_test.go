package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/server"
)

// TestCLIVolumeResetGuard: `volume reset --to-remote` of an archive volume
// whose unpushed folds were trimmed from Redis refuses, naming the count
// and --discard, directly and through serve (409 would_discard); the
// records all read afterwards; a wrong --discard refuses again; the right
// one resets, and the stream reads and cycles on.
func TestCLIVolumeResetGuard(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data, remoteURL := filepath.Join(dir, "data"), "file://"+filepath.Join(dir, "remote")
	g := []string{"--redis", r.URL, "--data", data, "--remote", remoteURL}
	cli := mustRun(t, g)
	appendN := func(n int) {
		for i := range n {
			cli("stream", "append", "q", "s", fmt.Sprintf("n=%d", i))
		}
	}
	count := func() int { return len(lines(cli("stream", "read", "q", "s"))) }
	appendN(8)
	cli("archive", "cycle", "q", "s", "--keep", "2", "--trim-after", "remote")
	appendN(5)
	cli("archive", "cycle", "q", "s", "--keep", "2") // local: 5 folded and trimmed, not pushed
	if n := count(); n != 13 {
		t.Fatalf("%d records before the reset, want 13", n)
	}
	reset := func(extra ...string) error {
		_, _, err := run(t, "", append(append(append([]string{}, g...), "volume", "reset", "archive.q.s", "--to-remote"), extra...)...)
		return err
	}
	for _, extra := range [][]string{nil, {"--discard", "4"}} {
		err := reset(extra...)
		if err == nil || !strings.Contains(err.Error(), "would discard 5 archived records no longer in the live stream") ||
			!strings.Contains(err.Error(), "--discard 5") {
			t.Fatalf("reset %v: %v", extra, err)
		}
		if n := count(); n != 13 {
			t.Fatalf("%d records after a refused reset, want 13", n)
		}
	}
	if _, _, err := run(t, "", append(append([]string{}, g...), "volume", "reset", "archive.q.s", "--to-remote", "--discard", "x")...); err == nil {
		t.Fatal("--discard x accepted")
	}

	stop := startServe(t, r.URL, data, remoteURL, "")
	err := reset()
	var se *client.Error
	if !errors.As(err, &se) || se.Status != 409 || se.Code != server.CodeWouldDiscard || !strings.Contains(se.Message, "--discard 5") {
		t.Fatalf("reset through serve: %v", err)
	}
	if err := reset("--discard", "6"); !errors.As(err, &se) || se.Code != server.CodeWouldDiscard {
		t.Fatalf("wrong --discard through serve: %v", err)
	}
	if n := count(); n != 13 {
		t.Fatalf("%d records after refusals through serve, want 13", n)
	}
	out := cli("volume", "reset", "archive.q.s", "--to-remote", "--discard", "5")
	if !strings.Contains(out, `"discarded":5`) || !strings.Contains(out, `"seam_lowered":true`) {
		t.Fatalf("confirmed reset through serve: %s", out)
	}
	stop()
	if n := count(); n != 8 {
		t.Fatalf("%d records after the confirmed reset, want 8 (13 less the 5 discarded)", n)
	}
	appendN(3)
	cli("archive", "cycle", "q", "s", "--keep", "2", "--trim-after", "remote")
	if n := count(); n != 11 {
		t.Fatalf("%d records after the next cycle, want 11", n)
	}
}

// TestCLIRemoteMismatch reproduces finding 2: a data dir pushed to remote
// A and pointed at an empty remote B: push, pull and reset fail with the
// remote mismatch (they printed remote_lsn 6 and exited 0), B stays empty;
// through serve the code is remote_mismatch.
func TestCLIRemoteMismatch(t *testing.T) {
	a := t.TempDir()
	b := filepath.Join(t.TempDir(), "b")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	commitTo(t, a, "vol.m", 10, "a")
	volumeJSON(t, "--data", a, "volume", "push", "vol.m")
	commitTo(t, a, "vol.m", 10, "a2")
	volumeJSON(t, "--data", a, "volume", "push", "vol.m")
	for _, op := range [][]string{{"push"}, {"pull"}, {"reset", "--to-remote"}} {
		args := append([]string{"--data", a, "--remote", "file://" + b, "volume", op[0], "vol.m"}, op[1:]...)
		_, _, err := run(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "is not the volume's remote") {
			t.Fatalf("%v against an empty remote: %v", op, err)
		}
	}
	if ents, _ := os.ReadDir(b); len(ents) != 0 {
		t.Fatalf("remote B holds %d entries", len(ents))
	}
	r := startRedis(t)
	startServe(t, r.URL, a, "file://"+b, "")
	_, _, err := run(t, "", "--data", a, "volume", "push", "vol.m")
	var se *client.Error
	if !errors.As(err, &se) || se.Status != 409 || se.Code != server.CodeRemoteMismatch {
		t.Fatalf("push through serve against B: %v", err)
	}
}

// TestCLICheckpointKeepsWriterLocal reproduces the first half of finding
// 13: after `volume checkpoint` of a writer's own archive volume and its
// next cycle (which pulled the checkpoint in), its pages had turned into
// remote references and its `--archive-only` read failed once the remote
// was gone. Now the cycle adopts the checkpoint and the read works with no
// remote at all.
func TestCLICheckpointKeepsWriterLocal(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data, rdir := filepath.Join(dir, "data"), filepath.Join(dir, "remote")
	g := []string{"--redis", r.URL, "--data", data, "--remote", "file://" + rdir}
	cli := mustRun(t, g)
	for i := range 300 {
		cli("stream", "append", "q", "s", fmt.Sprintf("n=%d", i), "pad="+strings.Repeat("x", 200))
	}
	cli("archive", "cycle", "q", "s", "--keep", "10", "--trim-after", "remote")
	want := cli("stream", "read", "q", "s", "--archive-only")
	if out := cli("volume", "checkpoint", "archive.q.s"); !strings.Contains(out, `"checkpoint_lsn":2`) {
		t.Fatalf("checkpoint: %s", out)
	}
	cli("stream", "append", "q", "s", "n=last")
	cli("archive", "cycle", "q", "s", "--keep", "10", "--trim-after", "remote")
	info := cli("volume", "info", "archive.q.s")
	if !strings.Contains(info, `"unfetched_frames":0`) {
		t.Fatalf("after the checkpoint the writer has remote pages: %s", info)
	}
	if err := os.Rename(rdir, rdir+".away"); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, "", "--data", data, "stream", "read", "q", "s", "--archive-only")
	if err != nil {
		t.Fatalf("archive-only read without the remote: %v (%s)", err, stderr)
	}
	if !strings.HasPrefix(out, want) || len(lines(out)) != len(lines(want))+1 {
		t.Fatalf("archive-only read without the remote: %d lines, want %d", len(lines(out)), len(lines(want))+1)
	}
}
