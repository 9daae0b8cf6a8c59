package echostore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
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

// TestResetAcceptJobs: a reset of an accept volume whose unpushed commits
// hold 5 jobs (acknowledged, not in the remote) refuses with a
// *graft.DiscardError naming 5 jobs and the flag to repeat; a wrong count
// refuses again and changes nothing; the right one resets. A reset against
// another remote refuses with graft.ErrRemoteMismatch.
func TestResetAcceptJobs(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	node, err := echostore.Open(ctx, echostore.Config{Data: data, Remote: "file://" + filepath.Join(dir, "remote")})
	if err != nil {
		t.Fatal(err)
	}
	vn, err := names.ParseVolume("accept.jobs.0")
	if err != nil {
		t.Fatal(err)
	}
	v, err := node.Store().CreateVolume(ctx, vn)
	if err != nil {
		t.Fatal(err)
	}
	commitJobs(t, v, 0, 3)
	if _, err := node.Push(ctx, vn); err != nil {
		t.Fatal(err)
	}
	commitJobs(t, v, 3, 2)
	commitJobs(t, v, 5, 3)
	before := v.Info()
	for _, given := range []uint64{0, 4} {
		_, err := node.Reset(ctx, vn, given)
		var de *graft.DiscardError
		if !errors.As(err, &de) || de.Count != 5 || de.What != echostore.WhatJobs || !errors.Is(err, graft.ErrWouldDiscard) {
			t.Fatalf("discard %d: %v; want a refusal naming 5 jobs", given, err)
		}
		if !strings.Contains(err.Error(), "5 acknowledged jobs not in the remote") || !strings.Contains(err.Error(), "--discard 5") {
			t.Fatalf("message: %v", err)
		}
		if v.Info() != before {
			t.Fatal("a refused reset changed the volume")
		}
	}
	res, err := node.Reset(ctx, vn, 5)
	if err != nil || res.Dropped != 2 || res.Discarded != 5 || v.Head() != 1 {
		t.Fatalf("confirmed reset: %+v, %v, head %d", res, err, v.Head())
	}
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The same data dir pointed at another (empty) remote.
	other, err := echostore.Open(ctx, echostore.Config{Data: data, Remote: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Reset(ctx, vn, 0); !errors.Is(err, graft.ErrRemoteMismatch) {
		t.Fatalf("reset against another remote: %v, want ErrRemoteMismatch", err)
	}
}
