package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore/graft"
)

// commitTo commits n pages of 4 KiB (and a metadata key) to volume vol of
// the data dir's store.
func commitTo(t *testing.T, data, vol string, n int, tag string) {
	t.Helper()
	ctx := context.Background()
	st, err := graft.Open(ctx, filepath.Join(data, "graft"), graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.CreateVolume(ctx, volName(vol))
	if err != nil {
		t.Fatal(err)
	}
	txn := v.Begin()
	for i := 0; i < n; i++ {
		if err := txn.Put(uint64(i), []byte(strings.Repeat(fmt.Sprint(tag, i, "-"), 4096))[:4096]); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.SetMeta("tag", []byte(tag)); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx, graft.Synced); err != nil {
		t.Fatal(err)
	}
}

func volumeJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, stderr, err := run(t, "", args...)
	if err != nil {
		t.Fatalf("%v: %v (%s)", args, err, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %q: %v", args, out, err)
	}
	return m
}

// TestCLIVolume: push from one data dir, pull into another (lazily),
// info, hydrate, ls; a diverged push fails with the way out, and reset
// --to-remote takes it.
func TestCLIVolume(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	remoteURL := "file://" + filepath.Join(a, "remote")
	commitTo(t, a, "vol.x", 200, "a")
	m := volumeJSON(t, "--data", a, "volume", "push", "vol.x")
	if m["remote_lsn"] != 1.0 || m["local_lsn"] != 1.0 || m["volume"] != "vol.x" {
		t.Fatalf("push: %v", m)
	}
	m = volumeJSON(t, "--data", b, "--remote", remoteURL, "volume", "pull", "vol.x")
	if m["remote_lsn"] != 1.0 || m["pages"] != 200.0 || m["bytes"] != 200*4096.0 || m["unfetched_frames"] != 4.0 {
		t.Fatalf("pull: %v", m)
	}
	m = volumeJSON(t, "--data", b, "--remote", remoteURL, "volume", "hydrate", "vol.x")
	if m["unfetched_frames"] != 0.0 || m["frames_fetched"] != 4.0 {
		t.Fatalf("hydrate: %v", m)
	}
	m = volumeJSON(t, "--data", b, "volume", "info", "vol.x")
	for _, k := range []string{"volume", "local_lsn", "remote_lsn", "pages", "bytes"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("info has no %q: %v", k, m)
		}
	}
	out, _, err := run(t, "", "--data", b, "volume", "ls")
	if err != nil || !strings.Contains(out, `"volume":"vol.x"`) {
		t.Fatalf("ls: %q %v", out, err)
	}

	// Both commit; a pushes first; b's push diverges.
	commitTo(t, a, "vol.x", 3, "a2")
	commitTo(t, b, "vol.x", 3, "b2")
	volumeJSON(t, "--data", a, "volume", "push", "vol.x")
	_, stderr, err := run(t, "", "--data", b, "--remote", remoteURL, "volume", "push", "vol.x")
	if err == nil || !strings.Contains(err.Error(), "echostore volume reset vol.x --to-remote") {
		t.Fatalf("diverged push: %v (%s)", err, stderr)
	}
	if _, _, err := run(t, "", "--data", b, "--remote", remoteURL, "volume", "reset", "vol.x"); err == nil || !strings.Contains(err.Error(), "--to-remote") {
		t.Fatalf("reset without --to-remote: %v", err)
	}
	m = volumeJSON(t, "--data", b, "--remote", remoteURL, "volume", "reset", "vol.x", "--to-remote")
	if m["dropped"] != 1.0 || m["remote_lsn"] != 2.0 {
		t.Fatalf("reset: %v", m)
	}
	if _, _, err := run(t, "", "--data", b, "volume", "info", "nope"); err == nil || !strings.Contains(err.Error(), "volume pull nope") {
		t.Fatalf("info of a missing volume: %v", err)
	}
	if _, _, err := run(t, "", "--data", b, "--remote", remoteURL, "volume", "pull", "nope"); err == nil || !strings.Contains(err.Error(), "no commits on the remote") {
		t.Fatalf("pull of a volume the remote does not have: %v", err)
	}
	if out, _, _ := run(t, "", "--data", b, "volume", "ls"); strings.Contains(out, "nope") {
		t.Fatalf("a failed pull created the volume: %s", out)
	}
}
