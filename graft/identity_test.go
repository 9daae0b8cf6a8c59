package graft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/remote"
)

// listAll returns every key of the remote.
func listAll(t *testing.T, rs remote.Store) []string {
	t.Helper()
	objs, err := rs.List(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

func wantMismatch(t *testing.T, what string, err error) {
	t.Helper()
	var me *RemoteMismatchError
	if !errors.Is(err, ErrRemoteMismatch) || !errors.As(err, &me) {
		t.Fatalf("%s: %v, want ErrRemoteMismatch", what, err)
	}
}

// TestRemoteMismatch: a data dir pushed to remote A and pointed at an empty
// remote B (finding: push and pull exited 0 with remote_lsn 6 and no object
// in B) refuses push, pull, reset and a page fault with ErrRemoteMismatch,
// changing nothing on either side; B stays empty. A volume never pushed
// pushes to B. Against A everything goes on. file:// and MinIO.
//
//echostore:fault
func TestRemoteMismatch(t *testing.T) {
	for kind, mk := range remotes(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			ra, _ := mk(t)
			rb, _ := mk(t)
			fs := vfs.NewMem()
			s := openMem(t, fs, Options{Remote: ra})
			v := mustCreate(t, s, "vol.m")
			want := bigVolume(t, v, 130, 3)
			for i := 0; i < 5; i++ {
				commitPages(t, v, map[uint64][]byte{0: {byte(i)}}, nil)
				if _, err := v.Push(ctx); err != nil {
					t.Fatal(err)
				}
			}
			want[0] = []byte{4}
			if keys := listAll(t, ra); !bytes.Contains([]byte(keysString(keys)), []byte(IdentityKey)) {
				t.Fatalf("the first push wrote no identity object: %v", keys)
			}
			// A follower of A, with pages still remote.
			f := openMem(t, nil, Options{Remote: ra})
			fv := mustCreate(t, f, "vol.m")
			if _, err := fv.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}

			commitPages(t, v, map[uint64][]byte{1: []byte("unpushed")}, nil)
			before := v.Info()
			s.AttachRemote(rb)
			_, err := v.Push(ctx)
			wantMismatch(t, "push to B", err)
			_, err = v.Pull(ctx, nil)
			wantMismatch(t, "pull from B", err)
			_, err = v.Reset(ctx, true)
			wantMismatch(t, "reset to B", err)
			_, err = v.ResetWith(ctx, ResetOptions{Discard: 1})
			wantMismatch(t, "guarded reset to B", err)
			if got := v.Info(); got != before {
				t.Fatalf("refused operations changed the volume: %+v, was %+v", got, before)
			}
			if keys := listAll(t, rb); len(keys) != 0 {
				t.Fatalf("remote B holds %v after refused operations", keys)
			}
			f.AttachRemote(rb)
			snap, err := fv.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = snap.Get(ctx, 77)
			snap.Close()
			wantMismatch(t, "page fault from B", err)
			wantMismatch(t, "hydrate from B", fv.Hydrate(ctx, nil))

			// A volume never pushed takes B, and B gets an identity.
			nv := mustCreate(t, s, "vol.new")
			commitPages(t, nv, map[uint64][]byte{0: []byte("n")}, nil)
			if _, err := nv.Push(ctx); err != nil {
				t.Fatalf("first push of a new volume to B: %v", err)
			}
			// B now has an identity, still not the one vol.m was pushed to.
			_, err = v.Push(ctx)
			wantMismatch(t, "push to B with an identity", err)

			// Back on A: push, pull and reads go on.
			s.AttachRemote(ra)
			if _, err := v.Push(ctx); err != nil {
				t.Fatalf("push to A: %v", err)
			}
			f.AttachRemote(ra)
			if _, err := fv.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			want[1] = []byte("unpushed")
			got, _ := readVolume(t, fv, fv.Head())
			samePages(t, "follower of A", got, want)
			// The identity survives a reopen of the data dir.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openMem(t, fs, Options{Remote: rb})
			defer s.Close()
			v, err = s.Volume(ctx, volName("vol.m"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Push(ctx)
			wantMismatch(t, "push to B after a reopen", err)
		})
	}
}

func keysString(keys []string) string {
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(k + " ")
	}
	return b.String()
}

// TestRemoteIdentityAdoption: a remote and a volume from before identities
// (no identity object, none recorded) keep working: the next push writes
// the identity and records it; a pull of such a remote records nothing
// until it has one. The same old volume pointed at an empty remote is
// refused (the remote lacks its sync commit).
func TestRemoteIdentityAdoption(t *testing.T) {
	ctx := context.Background()
	ra := openRemote(t, "file://"+t.TempDir())
	rb := openRemote(t, "file://"+t.TempDir())
	s := openMem(t, nil, Options{Remote: ra})
	defer s.Close()
	v := mustCreate(t, s, "vol.old")
	commitPages(t, v, map[uint64][]byte{0: []byte("a")}, nil)
	if _, err := v.Push(ctx); err != nil {
		t.Fatal(err)
	}
	// Make it what an earlier version left: no identity object, no
	// identity in the volume record.
	if err := ra.Delete(ctx, IdentityKey); err != nil {
		t.Fatal(err)
	}
	if err := v.recordRemoteID(ctx, RemoteID{}); err != nil {
		t.Fatal(err)
	}
	s.AttachRemote(ra) // a fresh handle: nothing cached
	f := mustCreate(t, openMem(t, nil, Options{Remote: ra}), "vol.old")
	if _, err := f.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if !f.state.Load().RemoteID.IsZero() {
		t.Fatal("a pull of a remote without identity recorded one")
	}
	commitPages(t, v, map[uint64][]byte{0: []byte("b")}, nil)
	s.AttachRemote(rb)
	_, err := v.Push(ctx)
	wantMismatch(t, "old volume pushed to an empty remote", err)
	if keys := listAll(t, rb); len(keys) != 0 {
		t.Fatalf("remote B holds %v", keys)
	}
	s.AttachRemote(ra)
	if _, err := v.Push(ctx); err != nil {
		t.Fatalf("push of the old volume to its remote: %v", err)
	}
	b, err := ra.Get(ctx, IdentityKey)
	if err != nil {
		t.Fatalf("the push wrote no identity: %v", err)
	}
	in, err := DecodeIdentity(b)
	if err != nil || in.ID != v.state.Load().RemoteID {
		t.Fatalf("identity %+v (%v), volume records %s", in, err, v.state.Load().RemoteID)
	}
	f.s.AttachRemote(ra) // a later process: the follower adopts it
	if _, err := f.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if f.state.Load().RemoteID != in.ID {
		t.Fatal("the follower did not adopt the remote's identity")
	}
}

// TestGoldenIdentityObject: the identity object's 36 bytes, byte for byte
// as docs/REMOTE.md gives them; every truncation and flipped byte is
// ErrCorrupt.
func TestGoldenIdentityObject(t *testing.T) {
	in := Identity{ID: RemoteID{0x5E, 1, 2, 3, 15: 0xED}, Created: time.Unix(0, 1764547200000000001)}
	b := golden(t, "identity.v1.bin", true, EncodeIdentity(in))
	want := append([]byte("ESRI"), 0, 1, 0, 0)
	want = append(want, in.ID[:]...)
	want = binary.BigEndian.AppendUint64(want, 1764547200000000001)
	want = crcBE(want)
	if !bytes.Equal(b, want) || len(b) != 36 {
		t.Fatalf("identity %x, the spec gives %x", b, want)
	}
	got, err := DecodeIdentity(b)
	if err != nil || got.ID != in.ID || !got.Created.Equal(in.Created) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := DecodeIdentity(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
		c := bytes.Clone(b)
		c[n] ^= 0x04
		if _, err := DecodeIdentity(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: %v", n, err)
		}
	}
	zero := crcBE(append(append([]byte("ESRI"), 0, 1, 0, 0), make([]byte, 24)...))
	if _, err := DecodeIdentity(zero); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("zero id: %v", err)
	}
}

// TestResetGuard: ResetWith counts before it drops: a count above zero
// refuses (a *DiscardError naming the count and the way out), dropping
// nothing; a wrong confirmation refuses again; the right one resets. The
// count sees exactly the unpushed pages.
//
//echostore:fault
func TestResetGuard(t *testing.T) {
	ctx := context.Background()
	rs := openRemote(t, "file://"+t.TempDir())
	s := openMem(t, nil, Options{Remote: rs})
	defer s.Close()
	v := mustCreate(t, s, "vol.g")
	commitPages(t, v, map[uint64][]byte{0: []byte("pushed")}, nil)
	if _, err := v.Push(ctx); err != nil {
		t.Fatal(err)
	}
	commitPages(t, v, map[uint64][]byte{1: []byte("a"), 2: []byte("b")}, nil)
	commitPages(t, v, map[uint64][]byte{2: []byte("c"), 3: []byte("d")}, nil)
	var seen []uint64
	var spans [][2]uint64
	count := func(_ context.Context, u *Unpushed) (uint64, string, error) {
		seen = u.Pages
		spans = append(spans, [2]uint64{u.SyncLSN, u.Head})
		return uint64(len(u.Pages)), "test pages", nil
	}
	before := v.Info()
	for _, given := range []uint64{0, 2, 4} {
		_, err := v.ResetWith(ctx, ResetOptions{Count: count, Discard: given})
		var de *DiscardError
		if !errors.Is(err, ErrWouldDiscard) || !errors.As(err, &de) || de.Count != 3 || de.Given != given {
			t.Fatalf("discard %d: %v, want a *DiscardError of 3", given, err)
		}
		if !bytes.Contains([]byte(err.Error()), []byte("--discard 3")) || !bytes.Contains([]byte(err.Error()), []byte("3 test pages")) {
			t.Fatalf("the error does not name the count and the override: %v", err)
		}
		if v.Info() != before {
			t.Fatalf("a refused reset changed the volume: %+v", v.Info())
		}
	}
	for _, sp := range spans {
		if sp != [2]uint64{1, 3} {
			t.Fatalf("the count saw commits %v, want 1..3", sp)
		}
	}
	if len(seen) != 3 || seen[0] != 1 || seen[2] != 3 {
		t.Fatalf("the count saw pages %v, want [1 2 3]", seen)
	}
	n, err := v.ResetWith(ctx, ResetOptions{Count: count, Discard: 3})
	if err != nil || n != 2 || v.Head() != 1 {
		t.Fatalf("confirmed reset: dropped %d, head %d, %v", n, v.Head(), err)
	}
	// Nothing unpushed: a count of 0 passes, a stale confirmation refuses.
	if _, err := v.ResetWith(ctx, ResetOptions{Count: count, Discard: 3}); !errors.Is(err, ErrWouldDiscard) {
		t.Fatalf("stale --discard: %v", err)
	}
	if _, err := v.ResetWith(ctx, ResetOptions{Count: count}); err != nil {
		t.Fatalf("reset with nothing to drop: %v", err)
	}
}

// TestCheckpointKeepsWriterLocal: `echostore volume checkpoint` (a
// checkpoint built from the log) beside a writer neither turns the
// writer's pages into remote references when it pulls (its reads then work
// without the remote) nor makes its next push diverge, with or without
// unpushed commits; a follower applies it without a new local LSN either.
//
//echostore:fault
func TestCheckpointKeepsWriterLocal(t *testing.T) {
	ctx := context.Background()
	rs := openRemote(t, "file://"+t.TempDir())
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{Remote: rs})
	v := mustCreate(t, s, "vol.c")
	want := bigVolume(t, v, 200, 5)
	if _, err := v.Push(ctx); err != nil {
		t.Fatal(err)
	}
	f := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "vol.c")
	if _, err := f.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	l := mustLog(t, rs, "vol.c")
	if _, err := l.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	head := v.Head()
	sp, err := v.Pull(ctx, nil)
	if err != nil || sp.Remote != 2 {
		t.Fatalf("writer pull after the checkpoint: %+v, %v", sp, err)
	}
	if n, _ := v.Unfetched(ctx); n != 0 || v.Head() != head {
		t.Fatalf("after the checkpoint the writer has %d unfetched frames, head %d (was %d)", n, v.Head(), head)
	}
	fhead := f.Head()
	if _, err := f.Pull(ctx, nil); err != nil || f.Head() != fhead || f.Info().RemoteLSN != 2 {
		t.Fatalf("follower pull of the checkpoint: head %d (was %d), %+v, %v", f.Head(), fhead, f.Info(), err)
	}
	// Unpushed commits, then another checkpoint: the push goes on top.
	commitPages(t, v, map[uint64][]byte{7: []byte("after")}, nil)
	want[7] = []byte("after")
	if _, err := l.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if sp, err := v.Push(ctx); err != nil || sp.Remote != 4 {
		t.Fatalf("push after a checkpoint: %+v, %v", sp, err)
	}
	if _, err := l.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	commitPages(t, v, map[uint64][]byte{8: []byte("later")}, nil)
	want[8] = []byte("later")
	if _, err := v.Pull(ctx, nil); err != nil { // unpushed commits and a checkpoint: no divergence
		t.Fatalf("pull with unpushed commits after a checkpoint: %v", err)
	}
	if _, err := v.Push(ctx); err != nil {
		t.Fatal(err)
	}
	// The writer reads everything with no remote at all.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Options{})
	defer s.Close()
	v, err = s.Volume(ctx, volName("vol.c"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readVolume(t, v, v.Head())
	samePages(t, "writer without its remote", got, want)
	if _, err := f.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = readVolume(t, f, f.Head())
	samePages(t, "follower", got, want)
}
