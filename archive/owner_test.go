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
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// wantOwnerError checks that err is an *OwnerError of stream q/s refused
// for volume vol owned by owner, naming both streams and the volume.
func wantOwnerError(t *testing.T, what string, err error, ref names.StreamRef, vol string, owner names.StreamRef) {
	t.Helper()
	var oe *OwnerError
	if !errors.Is(err, ErrVolumeOwner) || !errors.As(err, &oe) {
		t.Fatalf("%s: %v, want an *OwnerError (ErrVolumeOwner)", what, err)
	}
	if oe.Queue != ref.Queue().String() || oe.Stream != ref.Stream().String() || oe.Volume != vol || oe.Owner != owner {
		t.Fatalf("%s: %+v, want %s refused, volume %s owned by %s", what, oe, ref, vol, owner)
	}
	for _, n := range []string{ref.String(), owner.String(), vol} {
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
	vname := a.ref().Volume().String()
	if other := b.ref().Volume().String(); other != vname {
		t.Fatalf("volumes %s and %s: want the shared name", vname, other)
	}
	owner := mustRef(t, a.q, a.s)

	aIDs := a.append(ctx, 20)
	res, err := a.a.Cycle(ctx, a.ref(), Window{Keep: 5})
	if err != nil || res.Folded != 15 || res.Trimmed != 15 {
		t.Fatalf("cycle of %s: %+v, %v", a.ref(), res, err)
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
			t.Fatalf("after %s: %s holds %d live records, want its %d", what, b.ref(), len(got), len(bIDs))
		}
		if got := a.liveIDs(ctx); !slices.Equal(got, aIDs[15:]) {
			t.Fatalf("after %s: %s live %d records, want 5", what, a.ref(), len(got))
		}
		if got := a.archiveIDs(ctx); !slices.Equal(got, aIDs[:15]) {
			t.Fatalf("after %s: archive %d records, want %s's 15", what, len(got), a.ref())
		}
		if reg, err := IsArchived(ctx, e.live, b.ref()); err != nil || reg {
			t.Fatalf("after %s: %s registered as archived: %v %v", what, b.ref(), reg, err)
		}
		if _, ok, err := GetArchived(ctx, e.live, b.ref()); err != nil || ok {
			t.Fatalf("after %s: %s has a seam cache: %v %v", what, b.ref(), ok, err)
		}
		if l, err := takeLease(ctx, e.live, b.ref(), 0, time.Second); err != nil || l.Held {
			t.Fatalf("after %s: %s's lease: %+v %v", what, b.ref(), l, err)
		} else if _, err := releaseLease(ctx, e.live, b.ref(), l.Token); err != nil {
			t.Fatal(err)
		}
	}

	res, err = b.a.Cycle(ctx, b.ref(), Window{Keep: 2})
	wantOwnerError(t, "cycle", err, b.ref(), vname, owner)
	if res.Folded != 0 || res.Trimmed != 0 {
		t.Fatalf("refused cycle: %+v", res)
	}
	unchanged("the cycle")

	ret := &Archiver{opts: e.a.opts, log: e.a.log}
	ret.opts.Retain = Retention{Count: 1}
	_, err = ret.Cycle(ctx, b.ref(), Window{Keep: 2})
	wantOwnerError(t, "cycle with retention", err, b.ref(), vname, owner)
	unchanged("the cycle with retention")

	for _, src := range []Source{
		{Ref: b.ref(), Live: e.live, Volume: vol},
		{Ref: b.ref(), Volume: vol},
		{Ref: b.ref(), Live: e.live, Volume: vol, Pull: func(context.Context, string) (*graft.Volume, error) {
			t.Fatal("pull called for a volume of another stream")
			return nil, nil
		}},
	} {
		n := 0
		for r, err := range MergeRead(ctx, src, All()) {
			if err == nil {
				t.Fatalf("merge-read of %s served %s", b.ref(), mq.FormatID(r.ID, mq.IDBranded))
			}
			wantOwnerError(t, "merge-read", err, b.ref(), vname, owner)
			n++
		}
		if n != 1 {
			t.Fatalf("merge-read: %d errors, want 1", n)
		}
	}
	if _, err := StreamFrontier(ctx, vol, b.ref()); err != nil {
		wantOwnerError(t, "status", err, b.ref(), vname, owner)
	} else {
		t.Fatal("status of the other stream succeeded")
	}
	if err := CheckOwner(ctx, vol, b.ref()); err == nil {
		t.Fatal("CheckOwner passed the other stream")
	}
	dres, err := b.a.Delete(ctx, b.ref())
	wantOwnerError(t, "delete", err, b.ref(), vname, owner)
	if dres.VolumeDropped || dres.LiveEntries != 0 {
		t.Fatalf("refused delete: %+v", dres)
	}
	unchanged("the delete")

	// The fold and the drop check the owner at their commit's base too (a
	// race the checks before them cannot see).
	bo := mustRef(t, b.q, b.s)
	_, _, err = foldAs(ctx, vol, []mq.Record{{ID: (brand.Max - 1).XID(), Fields: []mq.Field{{Name: "k", Value: "v"}}}}, &bo, 0)
	wantOwnerError(t, "fold", err, b.ref(), vname, owner)
	_, _, err = retainAs(ctx, vol, Retention{Count: 1}, time.Now(), &bo)
	wantOwnerError(t, "retain", err, b.ref(), vname, owner)
	unchanged("the fold and the drop")

	// The owner goes on as before.
	if st, err := StreamFrontier(ctx, vol, a.ref()); err != nil || st != before {
		t.Fatalf("status of the owner: %+v, %v", st, err)
	}
	a.audit(ctx, aIDs)
	more := a.append(ctx, 5)
	if res, err := a.a.Cycle(ctx, a.ref(), Window{Keep: 5}); err != nil || res.Folded != 5 {
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
	vol, err := e.st.CreateVolume(ctx, e.ref().Volume())
	if err != nil {
		t.Fatal(err)
	}
	var old []mq.Record
	for r, err := range e.live.Read(ctx, e.ref(), xid.Min, all[4].XID(), 0, false) {
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
	if _, err := StreamFrontier(ctx, vol, e.ref()); err != nil {
		t.Fatal(err)
	}
	res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 2})
	if err != nil || res.Folded != 3 || res.Trimmed != 8 {
		t.Fatalf("cycle: %+v, %v", res, err)
	}
	if o, ok, err := VolumeOwner(ctx, vol); err != nil || !ok || o != mustRef(t, e.q, e.s) {
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
	vol, err := s.Volume(ctx, volName("archive.q.s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := VolumeOwner(ctx, vol); err != nil || ok {
		t.Fatalf("owner of the golden volume: %v %v, want none", ok, err)
	}
	for _, o := range []names.StreamRef{mustRef(t, "q", "s"), mustRef(t, "other", "stream")} {
		if err := CheckOwner(ctx, vol, o); err != nil {
			t.Fatalf("a volume without an owner refused %s: %v", o, err)
		}
	}
	recs := goldenRecords()
	next := mq.Record{ID: (brandOf(t, recs[2].ID) + 1).XID(), Fields: []mq.Field{{Name: "k", Value: "v"}}}
	st, _, err := foldAs(ctx, vol, []mq.Record{next}, ptr(mustRef(t, "q", "s")), 0)
	if err != nil || st.Pages != 4 || st.W != next.ID {
		t.Fatalf("fold: %+v, %v", st, err)
	}
	if o, ok, err := VolumeOwner(ctx, vol); err != nil || !ok || o != mustRef(t, "q", "s") {
		t.Fatalf("owner after the fold: %v %v %v", o, ok, err)
	}
	checkReads(t, vol, append(recs, next))
	err = CheckOwner(ctx, vol, mustRef(t, "q.s", "x"))
	var oe *OwnerError
	if !errors.As(err, &oe) || oe.Owner != mustRef(t, "q", "s") {
		t.Fatalf("another stream: %v", err)
	}
}

// TestOwnerValue: the metadata value round-trips and anything else is
// ErrCorrupt.
func TestOwnerValue(t *testing.T) {
	o := mustRef(t, "a.b", "c")
	if got, err := decodeOwner(encodeOwner(o)); err != nil || got != o || string(encodeOwner(o)) != "a.b/c" {
		t.Fatalf("%q → %v, %v", encodeOwner(o), got, err)
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
	vname := a.ref().Volume().String()
	aIDs := a.append(ctx, 12)
	if res, err := a.a.Cycle(ctx, a.ref(), Window{Keep: 2}); err != nil || res.Folded != 10 || res.Trimmed != 10 {
		t.Fatalf("cycle of %s: %+v, %v", a.ref(), res, err)
	}
	logN, segN := remoteObjects(t, rs, vname)
	if logN == 0 {
		t.Fatal("nothing pushed")
	}
	bIDs := b.append(ctx, 3)
	_, err := b.a.Delete(ctx, b.ref())
	wantOwnerError(t, "delete with the remote", err, b.ref(), vname, mustRef(t, a.q, a.s))
	if l, s := remoteObjects(t, rs, vname); l != logN || s != segN {
		t.Fatalf("remote objects %d/%d after the refused delete, want %d/%d", l, s, logN, segN)
	}
	if got := b.liveIDs(ctx); !slices.Equal(got, bIDs) {
		t.Fatalf("%s live: %d records, want 3", b.ref(), len(got))
	}
	a.audit(ctx, aIDs)
}
