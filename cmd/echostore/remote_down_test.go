package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/internal/testserver"
)

// TestArchiveReadRemoteUnavailable: a data dir whose archive pages are
// still in the remote (a pulled follower) reads them with the remote
// down: the read fails with remote.ErrUnavailable, never "corrupt" (it
// said "archive: corrupt"); and a read against a remote folder that does
// not exist does not create it.
func TestArchiveReadRemoteUnavailable(t *testing.T) {
	if _, err := testserver.MinIOBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	ctx := context.Background()
	m, err := testserver.StartMinIO(ctx)
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { m.Stop() })
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if err := m.CreateBucket(ctx, "archive"); err != nil {
		t.Fatal(err)
	}
	r := startRedis(t)
	writer, follower := t.TempDir(), t.TempDir()
	g := []string{"--redis", r.URL, "--data", writer, "--remote", m.URL("archive")}
	var in strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&in, `{"fields":{"k":"%s"}}`+"\n", strings.Repeat(fmt.Sprint(i), 200))
	}
	if _, stderr, err := run(t, in.String(), append(g, "stream", "append", "q", "s", "--jsonl", "-")...); err != nil {
		t.Fatal(err, stderr)
	}
	mustRun(t, g)("archive", "cycle", "q", "s", "--keep", "1", "--trim-after", "remote")
	fg := []string{"--redis", r.URL, "--data", follower, "--remote", m.URL("archive")}
	mustRun(t, fg)("volume", "pull", "archive.q.s")

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, "", append(fg, "stream", "read", "q", "s", "--archive-only")...)
	if !errors.Is(err, remote.ErrUnavailable) || errors.Is(err, archive.ErrCorrupt) || strings.Contains(err.Error(), "corrupt") {
		t.Errorf("archive read with the remote down: %v (%s); want remote.ErrUnavailable, not corrupt", err, stderr)
	}
	if out != "" {
		t.Errorf("archive read with the remote down printed %d bytes", len(out))
	}

	missing := filepath.Join(t.TempDir(), "no", "remote")
	for _, data := range []string{writer, follower} {
		_, _, _ = run(t, "", "--redis", r.URL, "--data", data, "--remote", "file://"+missing, "stream", "read", "q", "s", "--archive-only")
		if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a read with --remote file://%s created it: %v", missing, err)
		}
	}
}
