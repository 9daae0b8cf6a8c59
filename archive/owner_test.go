package archive

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	goldenfile "github.com/echostore/echostore/internal/golden"
	"github.com/echostore/echostore/mq"
)

// wantOwnerError checks that err is an *OwnerError of stream q/s refused
// for volume vol owned by owner, naming both streams and the volume.
func wantOwnerError(t *testing.T, what string, err error, q, s, vol string, owner Owner) {
	t.Helper()
	var oe *OwnerError
	if !errors.Is(err, ErrVolumeOwner) || !errors.As(err, &oe) {
		t.Fatalf("%s: %v, want an *OwnerError (ErrVolumeOwner)", what, err)
	}
	if oe.Queue != q || oe.Stream != s || oe.Volume != vol || oe.Owner != owner {
		t.Fatalf("%s: %+v, want %s/%s refused, volume %s owned by %s", what, oe, q, s, vol, owner)
	}
	for _, n := range []string{q + "/" + s, owner.String(), vol} {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("%s: %q does not name %s", what, err, n)
		}
	}
}

// TestVolumeOwnerCollision: a.b/c and a/b.c share the archive volume
// archive.a.b.c (the names' contract). Once a.b/c has folded, the volume
// records it as its owner, and a cycle (with retention), a merge-read
// (with and without the live tier), a status and a delete of a/b.c are
// refused with an *OwnerError before any side effect: nothing folded,
// dropped or trimmed, no lease taken, a/b.c not registered as archived,
// a.b/c's records intact in both tiers and it still cycles.
func TestVolumeOwnerCollision(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{Chunk: 4})
	base := e.q
	a := &env{t: t, live: e.live, st: e.st, a: e.a, q: base + ".b", s: "c"}
	b := &env{t: t, live: e.live, st: e.st, a: e.a, q: base, s: "b.c"}
	vname := volumeName(a.q, a.s)
	if other := volumeName(b.q, b.s); other != vname {
		t.Fatalf("volumes %s and %s: want the shared name", vname, other)
	}
	owner := Owner{Queue: a.q, Stream: a.s}

	aIDs := a.append(ctx, 20)
	res, err := a.a.Cycle(ctx, a.q, a.s, Window{Keep: 5})
	if err != nil || res.Folded != 15 || res.Trimmed != 15 {
		t.Fatalf("cycle of %s/%s: %+v, %v", a.q, a.s, res, err)
	}
	vol := a.volume(ctx)
	if o, ok, err := VolumeOwner(ctx, vol); err != nil || !ok || o != owner {
		t.Fatalf("owner after the first fold: %v %v %v, want %s", o, ok, err, owner)
	}
	before, err := Frontier(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	bIDs := b.append(ctx, 10)

	unchanged := func(what string) {
		t.Helper()
		v := a.volume(ctx)
		if v == nil {
			t.Fatalf("after %s: the volume is gone", what)
		}
		if st, err := Frontier(ctx, v); err != nil || st != before {
			t.Fatalf("after %s: volume %+v, %v; want %+v", what, st, err, before)
		}
		if got := b.liveIDs(ctx); !slices.Equal(got, bIDs) {
			t.Fatalf("after %s: %s/%s holds %d live records, want its %d", what, b.q, b.s, len(got), len(bIDs))
		}
		if got := a.liveIDs(ctx); !slices.Equal(got, aIDs[15:]) {
			t.Fatalf("after %s: %s/%s live %d records, want 5", what, a.q, a.s, len(got))
		}
		if got := a.archiveIDs(ctx); !slices.Equal(got, aIDs[:15]) {
			t.Fatalf("after %s: archive %d records, want %s/%s's 15", what, len(got), a.q, a.s)
		}
		if reg, err := IsArchived(ctx, e.live, b.q, b.s); err != nil || reg {
			t.Fatalf("after %s: %s/%s registered as archived: %v %v", what, b.q, b.s, reg, err)
		}
		if _, ok, err := GetArchived(ctx, e.live, b.q, b.s); err != nil || ok {
			t.Fatalf("after %s: %s/%s has a seam cache: %v %v", what, b.q, b.s, ok, err)
		}
		if l, err := takeLease(ctx, e.live, b.q, b.s, 0, time.Second); err != nil || l.Held {
			t.Fatalf("after %s: %s/%s's lease: %+v %v", what, b.q, b.s, l, err)
		} else if _, err := releaseLease(ctx, e.live, b.q, b.s, l.Token); err != nil {
			t.Fatal(err)
		}
	}

	res, err = b.a.Cycle(ctx, b.q, b.s, Window{Keep: 2})
	wantOwnerError(t, "cycle", err, b.q, b.s, vname, owner)
	if res.Folded != 0 || res.Trimmed != 0 {
		t.Fatalf("refused cycle: %+v", res)
	}
	unchanged("the cycle")

	ret := &Archiver{opts: e.a.opts, log: e.a.log}
	ret.opts.Retain = Retention{Count: 1}
	_, err = ret.Cycle(ctx, b.q, b.s, Window{Keep: 2})
	wantOwnerError(t, "cycle with retention", err, b.q, b.s, vname, owner)
	unchanged("the cycle with retention")

	for _, src := range []Source{
		{Queue: b.q, Stream: b.s, Live: e.live, Volume: vol},
		{Queue: b.q, Stream: b.s, Volume: vol},
		{Queue: b.q, Stream: b.s, Live: e.live, Volume: vol, Pull: func(context.Context, string) (*graft.Volume, error) {
			t.Fatal("pull called for a volume of another stream")
			return nil, nil
		}},
	} {
		n := 0
		for r, err := range MergeRead(ctx, src, All()) {
			if err == nil {
				t.Fatalf("merge-read of %s/%s served %s", b.q, b.s, brand.EVT.Format(r.ID))
			}
			wantOwnerError(t, "merge-read", err, b.q, b.s, vname, owner)
			n++
		}
		if n != 1 {
			t.Fatalf("merge-read: %d errors, want 1", n)
		}
	}
	if _, err := StreamFrontier(ctx, vol, b.q, b.s); err != nil {
		wantOwnerError(t, "status", err, b.q, b.s, vname, owner)
	} else {
		t.Fatal("status of the other stream succeeded")
	}
	if err := CheckOwner(ctx, vol, b.q, b.s); err == nil {
		t.Fatal("CheckOwner passed the other stream")
	}
	dres, err := b.a.Delete(ctx, b.q, b.s)
	wantOwnerError(t, "delete", err, b.q, b.s, vname, owner)
	if dres.VolumeDropped || dres.LiveEntries != 0 {
		t.Fatalf("refused delete: %+v", dres)
	}
	unchanged("the delete")

	// The fold and the drop check the owner at their commit's base too (a
	// race the checks before them cannot see).
	bo := Owner{Queue: b.q, Stream: b.s}
	_, err = foldAs(ctx, vol, []mq.Record{{ID: brand.Max - 1, Fields: []mq.Field{{Name: "k", Value: "v"}}}}, &bo)
	wantOwnerError(t, "fold", err, b.q, b.s, vname, owner)
	_, _, err = retainAs(ctx, vol, Retention{Count: 1}, time.Now(), &bo)
	wantOwnerError(t, "retain", err, b.q, b.s, vname, owner)
	unchanged("the fold and the drop")

	// The owner goes on as before.
	if st, err := StreamFrontier(ctx, vol, a.q, a.s); err != nil || st != before {
		t.Fatalf("status of the owner: %+v, %v", st, err)
	}
	a.audit(ctx, aIDs)
	more := a.append(ctx, 5)
	if res, err := a.a.Cycle(ctx, a.q, a.s, Window{Keep: 5}); err != nil || res.Folded != 5 {
		t.Fatalf("owner's next cycle: %+v, %v", res, err)
	}
	a.audit(ctx, append(aIDs, more...))
}

// TestVolumeOwnerAdopted: a volume folded before owners were recorded (by
// Fold alone, as older binaries did) has no owner; reads, status and the
// next cycle work on it, and that cycle's first fold records the owner in
// its commit.
func TestVolumeOwnerAdopted(t *testing.T) {
	ctx := testCtx(t)
	e := newEnv(t, servers.Redis(t).URL, Options{})
	all := e.append(ctx, 10)
	vol, err := e.st.CreateVolume(ctx, volumeName(e.q, e.s))
	if err != nil {
		t.Fatal(err)
	}
	var old []mq.Record
	for r, err := range e.live.Read(ctx, e.q, e.s, 0, all[4], 0, false) {
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, r)
	}
	if _, err := Fold(ctx, vol, old); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := VolumeOwner(ctx, vol); err != nil || ok {
		t.Fatalf("owner after Fold: %v %v, want none", ok, err)
	}
	if _, err := StreamFrontier(ctx, vol, e.q, e.s); err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Cycle(ctx, e.q, e.s, Window{Keep: 2})
	if err != nil || res.Folded != 3 || res.Trimmed != 8 {
		t.Fatalf("cycle: %+v, %v", res, err)
	}
	if o, ok, err := VolumeOwner(ctx, vol); err != nil || !ok || o != (Owner{Queue: e.q, Stream: e.s}) {
		t.Fatalf("owner after the cycle: %v %v %v", o, ok, err)
	}
	// Recorded in the fold's own commit, not before it.
	snap, err := vol.SnapshotAt(ctx, res.State.LSN-1)
	if err != nil {
		t.Fatal(err)
	}
	_, ok, err := ownerAt(ctx, snap)
	snap.Close()
	if err != nil || ok {
		t.Fatalf("owner at LSN %d: %v %v, want none", res.State.LSN-1, ok, err)
	}
	e.audit(ctx, all)
}

// TestGoldenArchiveVolumeV1Owner: the checked-in volume of
// TestGoldenArchiveVolumeV1 predates the owner key: it records none, every
// stream passes the check, and the next fold on behalf of q/s records it
// beside the old pages; then another stream is refused.
func TestGoldenArchiveVolumeV1Owner(t *testing.T) {
	ctx := t.Context()
	dir := goldenfile.CopyDir(t, goldenfile.Path("datadir.v1"))
	s, err := graft.Open(ctx, dir, graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	vol, err := s.Volume(ctx, "archive.q.s")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := VolumeOwner(ctx, vol); err != nil || ok {
		t.Fatalf("owner of the golden volume: %v %v, want none", ok, err)
	}
	for _, o := range []Owner{{"q", "s"}, {"other", "stream"}} {
		if err := CheckOwner(ctx, vol, o.Queue, o.Stream); err != nil {
			t.Fatalf("a volume without an owner refused %s: %v", o, err)
		}
	}
	recs := goldenRecords()
	next := mq.Record{ID: recs[2].ID + 1, Fields: []mq.Field{{Name: "k", Value: "v"}}}
	st, err := foldAs(ctx, vol, []mq.Record{next}, &Owner{"q", "s"})
	if err != nil || st.Pages != 4 || st.W != next.ID {
		t.Fatalf("fold: %+v, %v", st, err)
	}
	if o, ok, err := VolumeOwner(ctx, vol); err != nil || !ok || o != (Owner{"q", "s"}) {
		t.Fatalf("owner after the fold: %v %v %v", o, ok, err)
	}
	checkReads(t, vol, append(recs, next))
	err = CheckOwner(ctx, vol, "q.s", "x")
	var oe *OwnerError
	if !errors.As(err, &oe) || oe.Owner != (Owner{"q", "s"}) {
		t.Fatalf("another stream: %v", err)
	}
}

// TestOwnerValue: the metadata value round-trips and anything else is
// ErrCorrupt.
func TestOwnerValue(t *testing.T) {
	o := Owner{Queue: "a.b", Stream: "c"}
	if got, err := decodeOwner(o.encode()); err != nil || got != o || string(o.encode()) != "a.b/c" {
		t.Fatalf("%q → %v, %v", o.encode(), got, err)
	}
	for _, bad := range []string{"", "/", "a", "a/", "/b", "a/b/c", "a:b/c", "a/b c", "../x"} {
		if _, err := decodeOwner([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v, want ErrCorrupt", bad, err)
		}
	}
}

// TestVolumeOwnerCollisionRemote: a data dir with no copy of the shared
// volume asks the remote log before a delete would remove it: a delete of
// a/b.c is refused (*OwnerError) and the log of a.b/c is kept whole.
func TestVolumeOwnerCollisionRemote(t *testing.T) {
	ctx := testCtx(t)
	rs := remotes()["file"](t)
	live := connect(t, servers.Redis(t).URL)
	base := queueName(t)
	a := node(t, live, rs, base+".b", "c", Options{Chunk: 4})
	b := node(t, live, rs, base, "b.c", Options{})
	vname := volumeName(a.q, a.s)
	aIDs := a.append(ctx, 12)
	if res, err := a.a.Cycle(ctx, a.q, a.s, Window{Keep: 2}); err != nil || res.Folded != 10 || res.Trimmed != 10 {
		t.Fatalf("cycle of %s/%s: %+v, %v", a.q, a.s, res, err)
	}
	logN, segN := remoteObjects(t, rs, vname)
	if logN == 0 {
		t.Fatal("nothing pushed")
	}
	bIDs := b.append(ctx, 3)
	_, err := b.a.Delete(ctx, b.q, b.s)
	wantOwnerError(t, "delete with the remote", err, b.q, b.s, vname, Owner{Queue: a.q, Stream: a.s})
	if l, s := remoteObjects(t, rs, vname); l != logN || s != segN {
		t.Fatalf("remote objects %d/%d after the refused delete, want %d/%d", l, s, logN, segN)
	}
	if got := b.liveIDs(ctx); !slices.Equal(got, bIDs) {
		t.Fatalf("%s/%s live: %d records, want 3", b.q, b.s, len(got))
	}
	a.audit(ctx, aIDs)
}
