package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
)

// TestCLIVolumeCheckpointGC: after every page was rewritten and pushed again,
// a checkpoint references only the newer segment; gc deletes the older one,
// and a fresh follower still reads the newest bytes.
func TestCLIVolumeCheckpointGC(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	remoteURL := "file://" + filepath.Join(a, "remote")
	commitTo(t, a, "vol.gc", 100, "old")
	volumeJSON(t, "--data", a, "volume", "push", "vol.gc")
	commitTo(t, a, "vol.gc", 100, "new")
	volumeJSON(t, "--data", a, "volume", "push", "vol.gc")

	m := volumeJSON(t, "--data", a, "volume", "checkpoint", "vol.gc")
	if m["checkpoint_lsn"] != 3.0 {
		t.Fatalf("checkpoint: %v", m)
	}
	// Within a grace longer than the checkpoint's age nothing is the horizon.
	m = volumeJSON(t, "--data", a, "volume", "gc", "vol.gc", "--min-age", "0s", "--grace", "1h")
	if m["horizon"] != 0.0 || m["objects_removed"] != 0.0 {
		t.Fatalf("gc within the grace: %v", m)
	}
	m = volumeJSON(t, "--data", a, "volume", "gc", "vol.gc", "--min-age", "0s")
	if m["horizon"] != 3.0 || m["segments_deleted"] != 1.0 || m["segments_kept"] != 1.0 ||
		m["segment_bytes"].(float64) <= 0 || m["objects_removed"] != 1.0 || m["bytes_removed"] != m["segment_bytes"] {
		t.Fatalf("gc: %v", m)
	}
	out, _, err := run(t, "", "--data", a, "volume", "gc", "vol.gc", "--min-age", "0s", "--trim-log", "--text")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"volume vol.gc: horizon LSN 3, 1 segments kept", "segments", "commits (tombstoned)", "checkpoint markers", "total"} {
		if !strings.Contains(out, want) {
			t.Fatalf("gc --text lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`commits \(tombstoned\)\s+2\s+[1-9]\d*`).MatchString(out) {
		t.Fatalf("gc --text: want 2 commits tombstoned with their bytes:\n%s", out)
	}

	volumeJSON(t, "--data", b, "--remote", remoteURL, "volume", "pull", "vol.gc")
	ctx := context.Background()
	st, err := graft.Open(ctx, filepath.Join(b, "graft"), graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs := openRemote(t, remoteURL)
	st.AttachRemote(rs)
	v, err := st.Volume(ctx, volName("vol.gc"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for _, i := range []uint64{0, 57, 99} {
		p, err := snap.Get(ctx, i)
		if err != nil {
			t.Fatalf("page %d after gc: %v", i, err)
		}
		if !strings.HasPrefix(string(p), "new") {
			t.Fatalf("page %d after gc = %.12q…, want the newest bytes", i, p)
		}
	}

	if _, stderr, err := run(t, "", "--data", a, "volume", "gc", "no.such"); err == nil || !strings.Contains(stderr+err.Error(), "no commits on the remote") {
		t.Fatalf("gc of a missing volume: %v %s", err, stderr)
	}
	if _, _, err := run(t, "", "--data", a, "volume", "checkpoint", "bad:name"); err == nil || !strings.Contains(err.Error(), "invalid name") {
		t.Fatalf("checkpoint of a bad name: %v", err)
	}
}

func openRemote(t *testing.T, url string) remote.Store {
	t.Helper()
	rs, err := remote.Open(context.Background(), url, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}
