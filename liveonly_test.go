package echostore_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// TestLiveOnly: a live-only node needs Redis and nothing else; it neither
// creates nor locks its Data, so it opens beside the node that holds the
// data dir; appends, live reads and claims work; everything that needs the
// data dir fails wrapping ErrLiveOnly before any side effect.
func TestLiveOnly(t *testing.T) {
	ctx := testCtx(t)
	if _, err := echostore.Open(ctx, echostore.Config{LiveOnly: true}); !errors.Is(err, echostore.ErrConfig) {
		t.Fatalf("live-only without Redis: %v, want ErrConfig", err)
	}
	data := t.TempDir()
	holder := open(t, echostore.Config{Data: data, Redis: redisURL, DeferJobs: true})
	absent := filepath.Join(t.TempDir(), "never-created")
	for _, d := range []string{data, absent} {
		n := open(t, echostore.Config{LiveOnly: true, Data: d, Redis: redisURL})
		if _, err := os.Stat(absent); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a live-only node created its Data %s: %v", absent, err)
		}
		ref, err := names.ParseStreamRef("live", "s")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Append(ctx, ref, [][]echostore.Field{{{Name: "a", Value: "b"}}}); err != nil {
			t.Fatalf("append: %v", err)
		}
		live := 0
		for _, err := range n.Read(ctx, ref, echostore.ReadOptions{Side: echostore.ReadLiveOnly}) {
			if err != nil {
				t.Fatalf("live read: %v", err)
			}
			live++
		}
		if _, err := n.QueueStatus(ctx, ref.Queue()); err != nil {
			t.Fatalf("queue status: %v", err)
		}
		if _, err := n.Claim(ctx, ref.Queue(), echostore.ClaimOptions{Consumer: "c"}); err != nil {
			t.Fatalf("claim: %v", err)
		}
		wantLive := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, echostore.ErrLiveOnly) {
				t.Fatalf("%s on a live-only node: %v, want ErrLiveOnly", op, err)
			}
		}
		for _, side := range []echostore.ReadSide{echostore.ReadMerged, echostore.ReadArchiveOnly} {
			for _, err := range n.Read(ctx, ref, echostore.ReadOptions{Side: side}) {
				wantLive("read", err)
			}
		}
		_, err = n.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}})
		wantLive("cycle", err)
		_, err = n.Status(ctx, ref)
		wantLive("status", err)
		_, err = n.Delete(ctx, ref)
		wantLive("delete", err)
		_, err = n.Enqueue(ctx, ref.Queue(), []byte(`1`), echostore.EnqueueOptions{})
		wantLive("enqueue", err)
		wantLive("drain", n.Drain(ctx))
		_, err = n.Volumes(ctx)
		wantLive("volumes", err)
		vol, err := names.ParseVolume("archive.live.s")
		if err != nil {
			t.Fatal(err)
		}
		_, err = n.VolumeInfo(ctx, vol)
		wantLive("volume info", err)
		_, err = n.Push(ctx, vol)
		wantLive("push", err)
		_, err = n.Pull(ctx, vol, nil)
		wantLive("pull", err)
		_, err = n.Reset(ctx, vol, 0)
		wantLive("reset", err)
		_, err = n.Checkpoint(ctx, vol)
		wantLive("checkpoint", err)
		_, err = n.GC(ctx, vol, echostore.GCOptions{})
		wantLive("gc", err)
		if live == 0 {
			t.Fatal("the live read found nothing")
		}
	}
	// The holder's data dir is untouched by what the live-only nodes
	// refused: no archive volume was created.
	vols, err := holder.Volumes(ctx)
	if err != nil || len(vols.Volumes) != 0 {
		t.Fatalf("holder's volumes: %+v, %v; want none", vols, err)
	}
}
