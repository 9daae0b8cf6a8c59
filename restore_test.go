package echostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// brandText is a record's EVT id.
func brandText(t *testing.T, r echostore.Record) string {
	t.Helper()
	id, err := brand.FromXID(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return brand.EVT.Format(id)
}

// brandJob is a claimed job's JOB id.
func brandJob(_ *testing.T, j echostore.Job) string { return brand.JOB.Format(j.ID) }

var restoreSeq atomic.Int64

// restoreNames returns a queue and stream unique to the test.
func restoreNames(t *testing.T) (names.StreamRef, names.Queue) {
	t.Helper()
	q := fmt.Sprintf("restore%d-%d", os.Getpid(), restoreSeq.Add(1))
	ref, err := names.ParseStreamRef(q, "s")
	if err != nil {
		t.Fatal(err)
	}
	return ref, ref.Queue()
}

// entries lists a directory's entries (nil if it does not exist).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// TestRestore: a node's data dir is deleted; a node opened with
// RestoreEmpty on the same remote and Redis rebuilds the archive volume and
// the node's accept volume lazily (frames left in the remote), leaves
// another node's accept volume alone, and every archived record reads back
// by merge-read, every acknowledged sync job is claimable, and cycles go
// on (pages of 2 KB: each fold is a segment, not inline in its commit).
// The report says what was restored, in JSON with its key order.
func TestRestore(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	data, rurl := filepath.Join(root, "data"), "file://"+filepath.Join(root, "remote")
	ref, q := restoreNames(t)
	_, other := restoreNames(t)

	a, err := echostore.Open(ctx, echostore.Config{Data: data, Redis: redisURL, Remote: rurl})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 5 {
		var batch [][]echostore.Field
		for i := range 40 {
			batch = append(batch, []echostore.Field{{Name: "i", Value: fmt.Sprint(i)}, {Name: "pad", Value: strings.Repeat("p", 2000)}})
		}
		res, err := a.Append(ctx, ref, batch)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.IDs...)
		if _, err := a.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 10}, TrimAfter: echostore.TrimAfterRemote}); err != nil {
			t.Fatal(err)
		}
	}
	jobs := map[string]bool{}
	for i := range 20 {
		rc, err := a.Enqueue(ctx, q, fmt.Appendf(nil, `{"i":%d}`, i), echostore.EnqueueOptions{Mode: echostore.Sync})
		if err != nil {
			t.Fatal(err)
		}
		jobs[rc.ID] = true
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Another node's queue, in the same remote.
	b, err := echostore.Open(ctx, echostore.Config{Data: filepath.Join(root, "other"), Redis: redisURL, Remote: rurl, NodeNumber: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Enqueue(ctx, other, []byte(`{}`), echostore.EnqueueOptions{Mode: echostore.Sync}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(data); err != nil { // the disk is lost
		t.Fatal(err)
	}
	n := open(t, echostore.Config{Data: data, Redis: redisURL, Remote: rurl, Restore: echostore.RestoreEmpty})
	res := n.Restored()
	if res == nil || !res.Restored {
		t.Fatalf("Restored() = %+v, want a restore", res)
	}
	got := map[string]echostore.RestoredVolume{}
	for _, v := range res.Volumes {
		got[v.Volume] = v
	}
	av, acc := ref.Volume().String(), "accept."+q.String()+".0"
	if v := got[av]; v.Kind != "archive" || v.RemoteLSN == 0 || v.Pages != uint64(len(ids)-10) || v.UnfetchedFrames == 0 {
		t.Fatalf("archive volume restored as %+v, want kind archive, its remote LSN, %d pages, frames left in the remote (%+v)", v, len(ids)-10, res)
	}
	if v := got[acc]; v.Kind != "accept" || v.RemoteLSN == 0 {
		t.Fatalf("accept volume restored as %+v (%+v)", v, res)
	}
	otherVol := "accept." + other.String() + ".1"
	if _, ok := got[otherVol]; ok || !slices.ContainsFunc(res.Skipped, func(s echostore.SkippedVolume) bool { return s.Volume == otherVol }) {
		t.Fatalf("another node's accept volume %s: restored or not reported skipped: %+v", otherVol, res)
	}
	if res.Requests == 0 || res.BytesFetched == 0 || res.BytesFetched >= int64(got[av].Bytes) {
		t.Fatalf("report: %d requests, %d bytes fetched; want some, and fewer bytes than the archive's %d (pages stay in the remote)",
			res.Requests, res.BytesFetched, got[av].Bytes)
	}
	if _, err := os.Stat(filepath.Join(data, echostore.RestoreMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore marker left after a complete restore: %v", err)
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(js), `{"data":`) || !strings.Contains(string(js), `"volumes":[{"volume":`) || !strings.Contains(string(js), `"bytes_fetched":`) {
		t.Fatalf("report JSON: %s", js)
	}

	var read []string
	for r, err := range n.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, brandText(t, r))
	}
	if !slices.Equal(read, ids) {
		t.Fatalf("merge-read after the restore: %d records, want the %d appended", len(read), len(ids))
	}
	claimed := map[string]bool{}
	for len(claimed) < len(jobs) {
		cr, err := n.Claim(ctx, q, echostore.ClaimOptions{Count: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(cr.Jobs) == 0 {
			break
		}
		for _, j := range cr.Jobs {
			claimed[brandJob(t, j)] = true
		}
	}
	for id := range jobs {
		if !claimed[id] {
			t.Fatalf("sync job %s acknowledged before the disk loss is not claimable after the restore (%d of %d)", id, len(claimed), len(jobs))
		}
	}
	if _, err := n.Append(ctx, ref, [][]echostore.Field{{{Name: "after", Value: "restore"}}}); err != nil {
		t.Fatal(err)
	}
	cy, err := n.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}, TrimAfter: echostore.TrimAfterRemote})
	if err != nil || cy.Folded != 10 {
		t.Fatalf("cycle after the restore: %+v, %v; want the 10 live records folded", cy, err)
	}
}

// TestRestoreRefuses: a restore into a data dir that holds something, or
// from a remote inside the data dir, is refused with a typed error before
// anything is created; RestoreIfEmpty opens a data dir with a store as it
// is; an unfinished restore is refused by a plain open and finished by a
// restore; RestoreForce into a store pulls what it has and deletes nothing.
func TestRestoreRefuses(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	rurl := "file://" + filepath.Join(root, "remote")

	// A data dir with a stranger's file.
	busy := filepath.Join(root, "busy")
	if err := os.MkdirAll(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []echostore.RestoreMode{echostore.RestoreEmpty, echostore.RestoreIfEmpty} {
		_, err := echostore.Open(ctx, echostore.Config{Data: busy, Remote: rurl, Restore: mode})
		var ne *echostore.NotEmptyError
		if !errors.Is(err, echostore.ErrNotEmpty) || !errors.As(err, &ne) || !slices.Equal(ne.Entries, []string{"notes.txt"}) || ne.Store {
			t.Fatalf("restore (%v) into a data dir with a file: %v, want *NotEmptyError naming notes.txt", mode, err)
		}
		if e := entries(t, busy); !slices.Equal(e, []string{"notes.txt"}) {
			t.Fatalf("a refused restore changed the data dir: %v", e)
		}
	}
	// The default remote, and any remote inside the data dir.
	fresh := filepath.Join(root, "fresh")
	for _, r := range []string{"", "file://" + filepath.Join(fresh, "remote"), "file://" + fresh} {
		if _, err := echostore.Open(ctx, echostore.Config{Data: fresh, Remote: r, Restore: echostore.RestoreEmpty}); !errors.Is(err, echostore.ErrRestoreRemote) {
			t.Fatalf("restore from %q: %v, want ErrRestoreRemote", r, err)
		}
		if e := entries(t, fresh); e != nil {
			t.Fatalf("a refused restore created %v", e)
		}
	}
	// serve's token and socket and lost+found do not count.
	if err := os.MkdirAll(filepath.Join(fresh, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fresh, "serve.token"), []byte("0123456789abcdef0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := echostore.Open(ctx, echostore.Config{Data: fresh, Remote: rurl, Restore: echostore.RestoreEmpty})
	if err != nil {
		t.Fatalf("restore into a data dir with serve.token and lost+found: %v", err)
	}
	if r := n.Restored(); r == nil || !r.Restored || len(r.Volumes) != 0 {
		t.Fatalf("restore from an empty remote: %+v", r)
	}
	v, err := names.ParseVolume("archive.q.s")
	if err != nil {
		t.Fatal(err)
	}
	vol, err := n.Store().CreateVolume(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	txn := vol.Begin()
	if err := txn.Put(1, []byte("pushed")); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx, graft.Synced); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Push(ctx, v); err != nil {
		t.Fatal(err)
	}
	txn = vol.Begin()
	if err := txn.Put(2, []byte("local only")); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx, graft.Synced); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A data dir with a store: refused by RestoreEmpty, opened as it is
	// by RestoreIfEmpty, restored into (nothing deleted) by RestoreForce.
	_, err = echostore.Open(ctx, echostore.Config{Data: fresh, Remote: rurl, Restore: echostore.RestoreEmpty})
	var ne *echostore.NotEmptyError
	if !errors.As(err, &ne) || !ne.Store {
		t.Fatalf("restore into a store: %v, want *NotEmptyError with Store", err)
	}
	n, err = echostore.Open(ctx, echostore.Config{Data: fresh, Remote: rurl, Restore: echostore.RestoreIfEmpty})
	if err != nil {
		t.Fatal(err)
	}
	if r := n.Restored(); r == nil || r.Restored || r.Reason == "" {
		t.Fatalf("RestoreIfEmpty on a store: %+v, want no restore and the reason", r)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n, err = echostore.Open(ctx, echostore.Config{Data: fresh, Remote: rurl, Restore: echostore.RestoreForce})
	if err != nil {
		t.Fatal(err)
	}
	r := n.Restored()
	if len(r.Volumes) != 1 || !r.Volumes[0].Existed {
		t.Fatalf("forced restore: %+v, want the volume pulled in place", r)
	}
	vol, err = n.Store().Volume(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := vol.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := snap.Get(ctx, 2)
	snap.Close()
	if err != nil || string(page) != "local only" {
		t.Fatalf("a forced restore lost the unpushed page: %q, %v", page, err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// An unfinished restore: a plain open refuses, a restore finishes it.
	if err := os.WriteFile(filepath.Join(fresh, echostore.RestoreMarker), []byte("cut short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := echostore.Open(ctx, echostore.Config{Data: fresh, Remote: rurl}); !errors.Is(err, echostore.ErrRestorePending) {
		t.Fatalf("open of an unfinished restore: %v, want ErrRestorePending", err)
	}
	n, err = echostore.Open(ctx, echostore.Config{Data: fresh, Remote: rurl, Restore: echostore.RestoreEmpty})
	if err != nil {
		t.Fatalf("restore finishing an unfinished one: %v", err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(fresh, echostore.RestoreMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker left: %v", err)
	}
}

// TestRestoreLowersSeam: a fold durable only on the lost disk (trim_after:
// local, never pushed) left the stream's seam cache ahead of anything the
// remote holds. The restore lowers the cache to the restored volume and
// says so, so that the stream reads (the records of that fold are lost with
// the disk: trim_after: local trimmed them) and cycles again instead of
// waiting for a pull that has nothing to bring.
func TestRestoreLowersSeam(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	data, rurl := filepath.Join(root, "data"), "file://"+filepath.Join(root, "remote")
	ref, _ := restoreNames(t)
	a, err := echostore.Open(ctx, echostore.Config{Data: data, Redis: redisURL, Remote: rurl, DeferJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for k, ta := range []echostore.TrimAfter{echostore.TrimAfterRemote, echostore.TrimAfterLocal} {
		var batch [][]echostore.Field
		for i := range 50 {
			batch = append(batch, []echostore.Field{{Name: "i", Value: fmt.Sprint(k*50 + i)}})
		}
		res, err := a.Append(ctx, ref, batch)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			kept = append(kept, res.IDs[:45]...) // pushed: survives the disk
		} else {
			kept = append(kept, res.IDs[45:]...) // live: survives in Redis
		}
		if _, err := a.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 5}, TrimAfter: ta}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	n := open(t, echostore.Config{Data: data, Redis: redisURL, Remote: rurl, Restore: echostore.RestoreEmpty, DeferJobs: true})
	res := n.Restored()
	if len(res.Volumes) != 1 || !res.Volumes[0].SeamLowered || res.Volumes[0].Pages != 45 {
		t.Fatalf("restore: %+v, want the archive volume's 45 pushed pages and its seam cache lowered", res)
	}
	var read []string
	for r, err := range n.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatalf("merge-read after the restore: %v", err)
		}
		read = append(read, brandText(t, r))
	}
	if !slices.Equal(read, kept) {
		t.Fatalf("merge-read after the restore: %d records, want the 45 pushed and the 5 live", len(read))
	}
	if _, err := n.Append(ctx, ref, [][]echostore.Field{{{Name: "after", Value: "restore"}}}); err != nil {
		t.Fatal(err)
	}
	if cy, err := n.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}, TrimAfter: echostore.TrimAfterRemote}); err != nil || cy.Folded != 5 {
		t.Fatalf("cycle after the restore: %+v, %v; want the 5 live records folded", cy, err)
	}
}

// TestRestoreFromCheckpoint: a volume with a checkpoint on its remote log
// is restored from that checkpoint (one local LSN, no GET of the commits
// below it), not by replaying its log.
func TestRestoreFromCheckpoint(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	data, rurl := filepath.Join(root, "data"), "file://"+filepath.Join(root, "remote")
	a, err := echostore.Open(ctx, echostore.Config{Data: data, Remote: rurl})
	if err != nil {
		t.Fatal(err)
	}
	v, err := names.ParseVolume("archive.cp.s")
	if err != nil {
		t.Fatal(err)
	}
	vol, err := a.Store().CreateVolume(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	const commits = 40
	for i := range commits {
		txn := vol.Begin()
		if err := txn.Put(uint64(i), fmt.Appendf(nil, "page %d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx, graft.Synced); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Push(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := a.Checkpoint(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	n := open(t, echostore.Config{Data: data, Remote: rurl, Restore: echostore.RestoreEmpty})
	r := n.Restored()
	if len(r.Volumes) != 1 || r.Volumes[0].RemoteLSN != cp.CheckpointLSN || r.Volumes[0].LocalLSN != 1 || r.Volumes[0].Pages != commits {
		t.Fatalf("restore: %+v; want the volume at the checkpoint's LSN %d as one local LSN with %d pages", r, cp.CheckpointLSN, commits)
	}
	if r.Requests >= commits {
		t.Fatalf("restore made %d requests for a log of %d commits with a checkpoint on top: it replayed the log", r.Requests, commits)
	}
	vol, err = n.Store().Volume(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := vol.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for i := range commits {
		if b, err := snap.Get(ctx, uint64(i)); err != nil || string(b) != fmt.Sprintf("page %d", i) {
			t.Fatalf("page %d after the restore: %q, %v", i, b, err)
		}
	}
}

// TestRestoreForceLocked: a forced restore into a data dir another node
// holds fails with ErrDataLocked and leaves no restore marker there (which
// would keep that node's next open out).
func TestRestoreForceLocked(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	data, rurl := filepath.Join(root, "data"), "file://"+filepath.Join(root, "remote")
	open(t, echostore.Config{Data: data, Remote: rurl})
	if _, err := echostore.Open(ctx, echostore.Config{Data: data, Remote: rurl, Restore: echostore.RestoreForce}); !errors.Is(err, echostore.ErrDataLocked) {
		t.Fatalf("forced restore into a held data dir: %v, want ErrDataLocked", err)
	}
	if _, err := os.Stat(filepath.Join(data, echostore.RestoreMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused forced restore left %s: %v", echostore.RestoreMarker, err)
	}
}
