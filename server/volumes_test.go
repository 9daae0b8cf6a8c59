package server

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
)

// commitJobs commits n job pages (accept's page layout) to v from page
// index next on.
func commitJobs(t *testing.T, v *graft.Volume, next, n int) {
	t.Helper()
	tx := v.Begin()
	for i := range n {
		j := accept.Job{ID: brand.ID(1000 + next + i), Payload: []byte(`{"n":1}`)}
		if err := tx.Put(uint64(next+i), accept.EncodeJob(j)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.SetMeta("accept.next", []byte{byte(next + n), 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(context.Background(), graft.Synced); err != nil {
		t.Fatal(err)
	}
}

// TestResetVolumeAcceptJobs: a reset of an accept volume whose unpushed
// commits hold 5 jobs (acknowledged, not in the remote) refuses with a
// *graft.DiscardError naming 5 jobs, as the API answers it (409
// would_discard); a wrong count refuses again and changes nothing; the
// right one resets. A reset against another remote is 409 remote_mismatch.
func TestResetVolumeAcceptJobs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := graft.Open(ctx, filepath.Join(dir, "graft"), graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs, err := remote.Open(ctx, "file://"+filepath.Join(dir, "remote"), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	st.AttachRemote(rs)
	v, err := st.CreateVolume(ctx, volName("accept.jobs.0"))
	if err != nil {
		t.Fatal(err)
	}
	commitJobs(t, v, 0, 3)
	if _, err := v.Push(ctx); err != nil {
		t.Fatal(err)
	}
	commitJobs(t, v, 3, 2)
	commitJobs(t, v, 5, 3)
	before := v.Info()
	for _, given := range []uint64{0, 4} {
		out, err := ResetVolume(ctx, v, nil, given)
		var de *graft.DiscardError
		if !errors.As(err, &de) || de.Count != 5 || de.What != WhatJobs || out["dropped"] != uint64(0) {
			t.Fatalf("discard %d: %v, %v; want a refusal naming 5 jobs", given, out, err)
		}
		if status, code := classify(volumeError(err)); status != http.StatusConflict || code != CodeWouldDiscard {
			t.Fatalf("the API answers %d %s, want 409 %s", status, code, CodeWouldDiscard)
		}
		if !strings.Contains(err.Error(), "5 acknowledged jobs not in the remote") || !strings.Contains(err.Error(), "--discard 5") {
			t.Fatalf("message: %v", err)
		}
		if v.Info() != before {
			t.Fatal("a refused reset changed the volume")
		}
	}
	other, err := remote.Open(ctx, "file://"+t.TempDir(), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	st.AttachRemote(other)
	_, err = ResetVolume(ctx, v, nil, 5)
	if status, code := classify(volumeError(err)); !errors.Is(err, graft.ErrRemoteMismatch) || status != http.StatusConflict || code != CodeRemoteMismatch {
		t.Fatalf("reset against another remote: %v (%d %s)", err, status, code)
	}
	st.AttachRemote(rs)
	out, err := ResetVolume(ctx, v, nil, 5)
	if err != nil || out["dropped"] != uint64(2) || out["discarded"] != uint64(5) || v.Head() != 1 {
		t.Fatalf("confirmed reset: %v, %v, head %d", out, err, v.Head())
	}
}
