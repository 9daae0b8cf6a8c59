package archive

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/echostore/echostore/graft"
)

// TestDeleteArchivedStream: Delete drops the volume and the stream's live
// keys, keeps the token counter and leaves a sibling stream alone; a
// refused drop (open snapshot) or a held lease deletes nothing; a Redis
// step that fails after the drop leaves a seam cache that reads refuse
// (ErrNoVolume), and a second Delete finishes the job.
func TestDeleteArchivedStream(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{LeaseTTL: time.Second, LeaseWait: time.Millisecond})
	all := e.append(ctx, 50)
	if _, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 10}); err != nil {
		t.Fatal(err)
	}
	sib := &env{t: t, live: e.live, st: e.st, a: e.a, q: e.q, s: "sibling"}
	sibAll := sib.append(ctx, 20)
	if _, err := e.a.Cycle(ctx, mustRef(t, sib.q, sib.s), Window{Keep: 5}); err != nil {
		t.Fatal(err)
	}
	untouched := func(what string) {
		t.Helper()
		if got := ids(t, MergeRead(ctx, e.source(ctx), All())); !slices.Equal(got, all) {
			t.Fatalf("%s: merge-read has %d ids, want %d", what, len(got), len(all))
		}
		if ok, err := IsArchived(ctx, e.live, e.ref()); err != nil || !ok {
			t.Fatalf("%s: IsArchived = %v, %v", what, ok, err)
		}
		if l, err := takeLease(ctx, e.live, e.ref(), 0, time.Minute); err != nil || l.Held {
			t.Fatalf("%s: the lease was not released: %+v, %v", what, l, err)
		} else if _, err := releaseLease(ctx, e.live, e.ref(), l.Token); err != nil {
			t.Fatal(err)
		}
	}

	// An open snapshot refuses the drop: nothing deleted.
	snap, err := e.volume(ctx).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Delete(ctx, e.ref()); !errors.Is(err, graft.ErrVolumeInUse) {
		t.Fatalf("Delete with a snapshot open: %v, want graft.ErrVolumeInUse", err)
	}
	snap.Close()
	untouched("after a refused drop")

	// A lease held by another (a running driver): nothing deleted.
	held, err := takeLease(ctx, e.live, e.ref(), 0, time.Minute)
	if err != nil || held.Held {
		t.Fatal(held, err)
	}
	if _, err := e.a.Delete(ctx, e.ref()); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("Delete with the lease held: %v, want ErrLeaseHeld", err)
	}
	if _, err := releaseLease(ctx, e.live, e.ref(), held.Token); err != nil {
		t.Fatal(err)
	}
	untouched("after a held lease")

	// The lease is lost between the drop and the Redis step: the volume is
	// gone, the live keys stay, and reads refuse rather than serve the live
	// tail alone.
	var thief int64
	e.a.afterDrop = func(token int64) {
		if _, err := releaseLease(ctx, e.live, e.ref(), token); err != nil {
			t.Error(err)
		}
		l, err := takeLease(ctx, e.live, e.ref(), 0, time.Minute)
		if err != nil || l.Held {
			t.Error(l, err)
		}
		thief = l.Token
	}
	if _, err := e.a.Delete(ctx, e.ref()); !errors.Is(err, ErrFenced) {
		t.Fatalf("Delete that lost its lease: %v, want ErrFenced", err)
	}
	e.a.afterDrop = nil
	if e.volume(ctx) != nil {
		t.Fatal("the volume survived the drop")
	}
	for _, err := range MergeRead(ctx, e.source(ctx), All()) {
		if !errors.Is(err, ErrNoVolume) {
			t.Fatalf("read after a half delete: %v, want ErrNoVolume", err)
		}
		break
	}
	if _, err := releaseLease(ctx, e.live, e.ref(), thief); err != nil {
		t.Fatal(err)
	}

	// Run again: finishes the Redis part.
	res, err := e.a.Delete(ctx, e.ref())
	if err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if res.VolumeDropped || res.LiveEntries != 10 || res.Token <= thief || res.Volume != e.ref().Volume().String() {
		t.Fatalf("second Delete: %+v (thief's token %d)", res, thief)
	}
	if n, err := e.live.Len(ctx, e.ref()); err != nil || n != 0 {
		t.Fatalf("live entries after delete: %d, %v", n, err)
	}
	if _, ok, err := GetArchived(ctx, e.live, e.ref()); err != nil || ok {
		t.Fatalf("seam cache after delete: %v, %v", ok, err)
	}
	if ok, err := IsArchived(ctx, e.live, e.ref()); err != nil || ok {
		t.Fatalf("IsArchived after delete: %v, %v", ok, err)
	}
	if got := ids(t, MergeRead(ctx, e.source(ctx), All())); len(got) != 0 {
		t.Fatalf("read after delete: %d ids", len(got))
	}
	// Tokens keep increasing after the delete.
	l, err := takeLease(ctx, e.live, e.ref(), 0, time.Minute)
	if err != nil || l.Held || l.Token <= res.Token {
		t.Fatalf("lease after delete: %+v, %v; want a token above %d", l, err, res.Token)
	}
	if _, err := releaseLease(ctx, e.live, e.ref(), l.Token); err != nil {
		t.Fatal(err)
	}
	// The sibling is whole.
	if got := ids(t, MergeRead(ctx, sib.source(ctx), All())); !slices.Equal(got, sibAll) {
		t.Fatalf("sibling: %d ids, want %d", len(got), len(sibAll))
	}
	// The name starts afresh: a new stream archives into a new volume.
	fresh := e.append(ctx, 8)
	if fresh[0] <= all[len(all)-1] {
		t.Fatalf("new append %v at or below the old top %v", fresh[0], all[len(all)-1])
	}
	res2, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 3})
	if err != nil || res2.Folded != 5 || res2.State.Pages != 5 {
		t.Fatalf("cycle after delete: %+v, %v", res2, err)
	}
	if got := ids(t, MergeRead(ctx, e.source(ctx), All())); !slices.Equal(got, fresh) {
		t.Fatalf("read of the re-created stream: %d ids, want %d", len(got), len(fresh))
	}
}
