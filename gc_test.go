package echostore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

// bucketUsage lists bucket (under prefix) straight from MinIO's S3 API and
// returns its objects and bytes.
func bucketUsage(t *testing.T, mi *testserver.MinIO, bucket, prefix string) (objects int, bytes int64) {
	t.Helper()
	p := s3.NewListObjectsV2Paginator(mi.S3(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("list bucket %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			objects++
			bytes += aws.ToInt64(o.Size)
		}
	}
	return objects, bytes
}

// gcNode opens a node on a fresh data dir over the MinIO bucket remoteURL,
// with the given remote GC grace and no background loop (the test runs the
// passes itself, with Node.RemoteGC).
func gcNode(t *testing.T, remoteURL string, grace time.Duration) *echostore.Node {
	t.Helper()
	n, err := echostore.Open(t.Context(), echostore.Config{Data: filepath.Join(t.TempDir(), "data"), Redis: redisURL,
		Remote: remoteURL, Drivers: drivers.All(), DeferJobs: true, GCGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// fields returns k records numbered from base, each with size bytes of
// hex digits that do not compress below half.
func fields(base, k, size int) [][]echostore.Field {
	out := make([][]echostore.Field, k)
	rng := rand.New(rand.NewPCG(uint64(base), 17))
	for i := range out {
		b := make([]byte, size/2)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[i] = []echostore.Field{{Name: "n", Value: fmt.Sprint(base + i)}, {Name: "pad", Value: hex.EncodeToString(b)}}
	}
	return out
}

// TestRemoteGCKeepsBucketFlat is the flat-bucket soak: a stream with a fixed
// retention count, cycled with trim after remote for 40 rounds of 200
// records of ~600 bytes (300 random bytes as hex: each fold uploads a
// segment), one remote GC
// pass after each round. The bucket's bytes, listed from MinIO itself after
// each round, stop growing once retention starts dropping: rounds 20..40
// never exceed the largest of rounds 5..20 by more than one round's growth.
// A second stream, cycled and then deleted, leaves no object behind; the
// passes after that still succeed.
func TestRemoteGCKeepsBucketFlat(t *testing.T) {
	mi, err := testserver.StartMinIO(t.Context())
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { _ = mi.Stop() })
	for _, kv := range mi.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	const bucket = "gc-flat"
	if err := mi.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	n := gcNode(t, mi.URL(bucket), time.Nanosecond) // no grace: every pass collects all it may
	ref, err := names.ParseStreamRef("gcq", "flat")
	if err != nil {
		t.Fatal(err)
	}
	const rounds, perRound, size, retain = 40, 200, 600, 1000
	opts := echostore.CycleOptions{Window: echostore.Window{Keep: 10}, TrimAfter: echostore.TrimAfterRemote,
		Retain: echostore.Retention{Count: retain}}
	sizes := make([]int64, rounds+1)
	var removed int64
	for r := 1; r <= rounds; r++ {
		if _, err := n.Append(ctx, ref, fields(r*perRound, perRound, size)); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Cycle(ctx, ref, opts); err != nil {
			t.Fatalf("round %d: cycle: %v", r, err)
		}
		pass, err := n.RemoteGC(ctx)
		if err != nil || pass.Failed > 0 {
			t.Fatalf("round %d: remote gc: %+v, %v", r, pass, err)
		}
		for _, v := range pass.Volumes {
			removed += v.BytesRemoved
		}
		var objs int
		objs, sizes[r] = bucketUsage(t, mi, bucket, "")
		t.Logf("round %2d: %3d objects, %8d bytes in the bucket (removed so far %d)", r, objs, sizes[r], removed)
	}
	growth := int64(0) // the largest growth of one round while the archive fills
	for r := 2; r <= 5; r++ {
		growth = max(growth, sizes[r]-sizes[r-1])
	}
	peak := int64(0)
	for r := 5; r <= 20; r++ {
		peak = max(peak, sizes[r])
	}
	for r := 20; r <= rounds; r++ {
		if sizes[r] > peak+growth {
			t.Errorf("round %d: %d bytes in the bucket, above the peak of rounds 5..20 (%d) plus one round's growth (%d)",
				r, sizes[r], peak, growth)
		}
	}
	if removed == 0 {
		t.Fatal("remote gc removed nothing")
	}
	tot := n.GCTotals()
	if tot.Objects[0] == 0 || tot.Bytes[0] == 0 || tot.Objects[1] == 0 {
		t.Fatalf("gc totals %+v: want segments and commits removed", tot)
	}
	t.Logf("flat bucket: rounds 20..%d at most %d bytes, peak of rounds 5..20 %d, one round's growth %d; totals %+v",
		rounds, maxOf(sizes[20:]), peak, growth, tot)

	// A deleted stream leaves nothing behind.
	del, err := names.ParseStreamRef("gcq", "gone")
	if err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if _, err := n.Append(ctx, del, fields(r*perRound, perRound, size)); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Cycle(ctx, del, opts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.RemoteGC(ctx); err != nil {
		t.Fatal(err)
	}
	vol := del.Volume().String()
	if o, _ := bucketUsage(t, mi, bucket, "volumes/"+vol+"/"); o == 0 {
		t.Fatal("the stream to delete has no remote log")
	}
	if _, err := n.Delete(ctx, del); err != nil {
		t.Fatal(err)
	}
	if pass, err := n.RemoteGC(ctx); err != nil || pass.Failed > 0 {
		t.Fatalf("remote gc after the delete: %+v, %v", pass, err)
	}
	for _, prefix := range []string{"volumes/" + vol + "/", "segments/" + vol + "/"} {
		if o, b := bucketUsage(t, mi, bucket, prefix); o != 0 {
			t.Fatalf("deleted stream: %d objects (%d bytes) left under %s", o, b, prefix)
		}
	}
}

func maxOf(s []int64) int64 {
	m := int64(0)
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

// TestRemoteGCBesideWriters: the background GC's checkpoints land between a
// writer's pushes. The accept tier's next sync push meets the checkpoint at
// its LSN, adopts it and pushes on top; a cycle pulls it first. Every sync
// enqueue is acknowledged, the loop's timer runs passes of its own, and the
// remote logs verify from their newest checkpoint.
func TestRemoteGCBesideWriters(t *testing.T) {
	ctx := t.Context()
	remoteURL := "file://" + t.TempDir()
	n, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remoteURL,
		GCEvery: 10 * time.Millisecond, GCGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	q, err := names.ParseQueue("gcjobs")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := names.ParseStreamRef("gcq", "beside")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := n.Enqueue(ctx, q, []byte(fmt.Sprintf(`{"n":%d}`, i)), echostore.EnqueueOptions{Mode: echostore.Sync}); err != nil {
			t.Fatalf("sync enqueue %d: %v", i, err)
		}
		if _, err := n.Append(ctx, ref, fields(i*10, 10, 100)); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 5}, TrimAfter: echostore.TrimAfterRemote,
			Retain: echostore.Retention{Count: 50}}); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if _, err := n.RemoteGC(ctx); err != nil { // a pass of its own between every two writes
			t.Fatal(err)
		}
	}
	if tot := n.GCTotals(); tot.Passes < 20 || tot.Errors != 0 {
		t.Fatalf("gc totals %+v: want ≥ 20 passes and no error", tot)
	}
	vols, err := n.Volumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols.Volumes {
		l, err := remote.NewLog(n.Remote(), v.Volume)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := l.LatestCheckpoint(ctx)
		if err != nil {
			t.Fatalf("volume %s: %v", v.Volume, err)
		}
		st, err := l.State(ctx)
		if err != nil {
			t.Fatalf("volume %s: the log from its checkpoint: %v", v.Volume, err)
		}
		if st.LSN < cp.LSN() || v.RemoteLSN > st.LSN {
			t.Fatalf("volume %s: state at %d, checkpoint %d, the node at remote LSN %d", v.Volume, st.LSN, cp.LSN(), v.RemoteLSN)
		}
	}
	// The archive reads whole from a fresh node (a pull from the checkpoint).
	m, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: remoteURL, DeferJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	got := 0
	for _, err := range m.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != 50+5 {
		t.Fatalf("a fresh node reads %d records, want 55 (50 retained, 5 live)", got)
	}
}

// TestRemoteGCGraceProtectsFollower: a follower node pulls an archive
// volume lazily (pages fault on read); the writer then cycles until
// retention has dropped every record the follower holds, running a remote
// GC pass after each cycle, checkpoints included. With a grace of an hour
// the follower, still at its old LSN, reads every record it pulled: GC
// deleted nothing its state references. The same run with a grace of 1ns
// deletes those segments, and the follower's read fails on the missing
// object: the grace is what keeps it readable.
func TestRemoteGCGraceProtectsFollower(t *testing.T) {
	mi, err := testserver.StartMinIO(t.Context())
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { _ = mi.Stop() })
	for _, kv := range mi.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	opts := echostore.CycleOptions{Window: echostore.Window{Keep: 10}, TrimAfter: echostore.TrimAfterRemote,
		Retain: echostore.Retention{Count: 300}}
	run := func(bucket string, grace time.Duration) (read int, removed int64, err error) {
		ctx := t.Context()
		ref, err := names.ParseStreamRef("gcq", bucket) // a stream of its own in the shared Redis
		if err != nil {
			t.Fatal(err)
		}
		if err := mi.CreateBucket(ctx, bucket); err != nil {
			t.Fatal(err)
		}
		w := gcNode(t, mi.URL(bucket), grace)
		f := gcNode(t, mi.URL(bucket), grace)
		cycle := func(r int) {
			t.Helper()
			if _, err := w.Append(ctx, ref, fields(r*200, 200, 600)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Cycle(ctx, ref, opts); err != nil {
				t.Fatal(err)
			}
			pass, err := w.RemoteGC(ctx)
			if err != nil || pass.Failed > 0 {
				t.Fatalf("remote gc: %+v, %v", pass, err)
			}
			for _, v := range pass.Volumes {
				removed += v.BytesRemoved
			}
		}
		cycle(0)
		cycle(1)
		pulled, err := f.Pull(ctx, ref.Volume(), nil)
		if err != nil {
			t.Fatal(err)
		}
		info, err := f.VolumeInfo(ctx, ref.Volume())
		if err != nil || info.UnfetchedFrames == 0 {
			t.Fatalf("follower after its pull (%+v): %+v, %v: want frames not fetched yet", pulled, info, err)
		}
		for r := 2; r < 6; r++ { // 800 more records: retention drops all the follower holds
			cycle(r)
		}
		for _, err := range f.Read(ctx, ref, echostore.ReadOptions{Side: echostore.ReadArchiveOnly}) {
			if err != nil {
				return read, removed, err
			}
			read++
		}
		return read, removed, nil
	}
	read, removed, err := run("grace-hour", time.Hour)
	if err != nil || read != 300 {
		t.Fatalf("follower within the grace: read %d records, %v; want the 300 it pulled", read, err)
	}
	t.Logf("grace 1h: the follower read its %d records; GC removed %d bytes meanwhile", read, removed)
	read, removed, err = run("grace-none", time.Nanosecond)
	if err == nil {
		t.Fatalf("with no grace the follower read %d records: the test does not reach a deleted object", read)
	}
	t.Logf("grace 1ns: GC removed %d bytes and the follower's read failed after %d records: %v", removed, read, err)
}

// TestRemoteGCRefusesAnotherRemote: a data dir reopened over another
// remote that holds a log of the same volume name: the GC pass fails that
// volume (the identity check of a push) and writes nothing there: no
// checkpoint, no tombstone.
func TestRemoteGCRefusesAnotherRemote(t *testing.T) {
	ctx := t.Context()
	ra, rb := "file://"+t.TempDir(), "file://"+t.TempDir()
	vol, err := names.ParseVolume("vol.gc")
	if err != nil {
		t.Fatal(err)
	}
	pushed := func(data, remoteURL string, body string) *echostore.Node {
		t.Helper()
		n, err := echostore.Open(ctx, echostore.Config{Data: data, Remote: remoteURL})
		if err != nil {
			t.Fatal(err)
		}
		v, err := n.Store().CreateVolume(ctx, vol)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			txn := v.Begin()
			if err := txn.Put(uint64(i), []byte(body)); err != nil {
				t.Fatal(err)
			}
			if _, err := txn.Commit(ctx, graft.Synced); err != nil {
				t.Fatal(err)
			}
			if _, err := n.Push(ctx, vol); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	da := t.TempDir()
	a := pushed(da, ra, "a")
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := pushed(t.TempDir(), rb, "b")
	defer b.Close(context.Background())
	a, err = echostore.Open(ctx, echostore.Config{Data: da, Remote: rb})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	pass, err := a.RemoteGC(ctx)
	if err != nil || pass.Failed != 1 || pass.Checkpoints != 0 {
		t.Fatalf("gc pass over another remote: %+v, %v: want the volume failed, nothing written", pass, err)
	}
	l, err := remote.NewLog(b.Remote(), vol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.LatestCheckpoint(ctx); !errors.Is(err, remote.ErrNoCheckpoint) {
		t.Fatalf("the other remote's log: %v, want no checkpoint", err)
	}
	// Its own node collects it.
	if pass, err := b.RemoteGC(ctx); err != nil || pass.Failed != 0 || pass.Checkpoints != 1 {
		t.Fatalf("gc pass of the remote's own node: %+v, %v", pass, err)
	}
}
