package archive

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

var bucketSeq atomic.Int64

// remotes returns the remotes to test against: file:// and a fresh bucket
// of the package's MinIO.
func remotes() map[string]func(t *testing.T) remote.Store {
	open := func(t *testing.T, u string) remote.Store {
		rs, err := remote.Open(context.Background(), u, drivers.All()...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		return rs
	}
	return map[string]func(t *testing.T) remote.Store{
		"file": func(t *testing.T) remote.Store { return open(t, "file://"+t.TempDir()) },
		"minio": func(t *testing.T) remote.Store {
			m := servers.MinIO(t)
			for _, kv := range m.Env() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
			name = fmt.Sprintf("%.40s-%d", strings.Trim(name, "-"), bucketSeq.Add(1))
			if err := m.CreateBucket(context.Background(), name); err != nil {
				t.Fatal(err)
			}
			return open(t, m.URL(name))
		},
	}
}

// node is one data dir (its own graft store, attached to the shared remote
// when rs is not nil) archiving stream q/s of the shared Redis.
func node(t *testing.T, live *mq.Client, rs remote.Store, q, s string, opts Options) *env {
	st := openStore(t, t.TempDir())
	if rs != nil {
		st.AttachRemote(rs)
		opts.TrimAfter, opts.Pusher = TrimAfterRemote, graft.Replication{}
	}
	opts.Store, opts.Live, opts.Logger = st, live, quietLog()
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, live: live, st: st, a: a, q: q, s: s}
}

// appendBig appends n records with a 4 KiB field, so that a fold's pages
// go to remote segments rather than inline.
func (e *env) appendBig(ctx context.Context, n int) []brand.ID {
	e.t.Helper()
	batch := make([][]mq.Field, n)
	for i := range batch {
		batch[i] = []mq.Field{{Name: "n", Value: fmt.Sprint(i)}, {Name: "pad", Value: strings.Repeat("p", 4096)}}
	}
	got, err := e.live.AppendBatch(ctx, e.ref(), batch)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// remoteObjects counts the objects of volume in rs (log, checkpoints,
// segments).
func remoteObjects(t *testing.T, rs remote.Store, volume string) (log, segments int) {
	t.Helper()
	ctx := context.Background()
	v, err := rs.List(ctx, "volumes/"+volume+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := rs.List(ctx, remote.SegmentPrefix(volume), 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(v), len(sg)
}

// TestDeleteRemoteLog: Delete with a remote attached deletes every object
// of the volume there (log, checkpoints, segments) and nothing of a sibling
// stream's. A delete from a data dir without the remote keeps the remote
// log; a later cycle that would start a new volume over it refuses with a
// *RemoteLogError (nothing folded, trimmed or created), until a delete with
// the remote removes it. Against file:// and MinIO.
func TestDeleteRemoteLog(t *testing.T) {
	for name, mk := range remotes() {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			rs := mk(t)
			live := connect(t, testRedisURL(t))
			q := queueName(t)
			a := node(t, live, rs, q, "gone", Options{Chunk: 20})
			sib := node(t, live, rs, q, "kept", Options{})
			a.appendBig(ctx, 50)
			sib.appendBig(ctx, 10)
			for _, e := range []*env{a, sib} {
				if _, err := e.a.Cycle(ctx, mustRef(t, q, e.s), Window{Keep: 5}); err != nil {
					t.Fatal(err)
				}
			}
			vname := mustRef(t, q, "gone").Volume().String()
			logN, segN := remoteObjects(t, rs, vname)
			sibLog, sibSeg := remoteObjects(t, rs, mustRef(t, q, "kept").Volume().String())
			if logN == 0 || segN == 0 || sibLog == 0 {
				t.Fatalf("before delete: %d log and %d segment objects, sibling %d", logN, segN, sibLog)
			}
			res, err := a.a.Delete(ctx, mustRef(t, q, "gone"))
			if err != nil {
				t.Fatal(err)
			}
			if !res.RemoteDeleted || res.RemoteObjects != logN+segN || !res.VolumeDropped {
				t.Fatalf("delete: %+v, want %d remote objects", res, logN+segN)
			}
			if l, sg := remoteObjects(t, rs, vname); l != 0 || sg != 0 {
				t.Fatalf("after delete the remote still holds %d log and %d segment objects", l, sg)
			}
			if l, sg := remoteObjects(t, rs, mustRef(t, q, "kept").Volume().String()); l != sibLog || sg != sibSeg {
				t.Fatalf("sibling's remote objects %d/%d, were %d/%d", l, sg, sibLog, sibSeg)
			}
			// The name archives afresh over the emptied remote.
			fresh := a.appendBig(ctx, 8)
			if _, err := a.a.Cycle(ctx, mustRef(t, q, "gone"), Window{Keep: 2}); err != nil {
				t.Fatal(err)
			}
			a.audit(ctx, fresh)

			// A delete from a data dir with no remote keeps the remote log.
			local := node(t, live, nil, q, "gone", Options{})
			res, err = local.a.Delete(ctx, mustRef(t, q, "gone"))
			if err != nil || res.RemoteDeleted || res.VolumeDropped {
				t.Fatalf("delete without a remote: %+v %v", res, err)
			}
			l, _ := remoteObjects(t, rs, vname)
			if l == 0 {
				t.Fatal("the remote log went with a delete that had no remote")
			}
			// A new stream of that name on a node with the remote: refused.
			again := node(t, live, rs, q, "gone", Options{})
			again.appendBig(ctx, 6)
			_, err = again.a.Cycle(ctx, mustRef(t, q, "gone"), Window{Keep: 1})
			var rle *RemoteLogError
			if !errors.Is(err, ErrRemoteLogExists) || !errors.As(err, &rle) || rle.Head == 0 || !strings.Contains(err.Error(), "archive delete") {
				t.Fatalf("cycle over a leftover remote log: %v", err)
			}
			if n, _ := live.Len(ctx, mustRef(t, q, "gone")); n != 6 {
				t.Fatalf("refused cycle left %d live entries, want 6", n)
			}
			if _, err := again.st.Volume(ctx, volName(vname)); !errors.Is(err, graft.ErrVolumeNotFound) {
				t.Fatalf("refused cycle created the volume: %v", err)
			}
			if l2, _ := remoteObjects(t, rs, vname); l2 != l {
				t.Fatalf("refused cycle changed the remote: %d objects, were %d", l2, l)
			}
			// A delete with the remote clears it; then the cycle goes ahead.
			if res, err = again.a.Delete(ctx, mustRef(t, q, "gone")); err != nil || !res.RemoteDeleted || res.RemoteObjects != l {
				t.Fatalf("delete with the remote: %+v %v", res, err)
			}
			ids := again.appendBig(ctx, 4)
			if res, err := again.a.Cycle(ctx, mustRef(t, q, "gone"), Window{Keep: 1}); err != nil || res.Folded != 3 {
				t.Fatalf("cycle after the delete: %+v %v", res, err)
			}
			again.audit(ctx, ids)
		})
	}
}

// takeover is two nodes, A and B (each its own data dir), on one file://
// remote and one Redis, archiving stream q/s with leases of ttl, after A
// appended 40 records and cycled them with Keep 10 (30 folded, pushed,
// trimmed).
type takeover struct {
	ctx  context.Context
	live *mq.Client
	ref  names.StreamRef
	a, b *env
	all  []brand.ID
}

func newTakeover(t *testing.T, ttl time.Duration) *takeover {
	t.Helper()
	ctx := testCtx(t)
	rs, err := remote.Open(ctx, "file://"+t.TempDir(), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	live := connect(t, testRedisURL(t))
	q := queueName(t)
	opts := Options{LeaseTTL: ttl, LeaseWait: 5 * time.Second, Chunk: 7}
	tk := &takeover{ctx: ctx, live: live, ref: mustRef(t, q, "s"),
		a: node(t, live, rs, q, "s", opts), b: node(t, live, rs, q, "s", opts)}
	tk.all = tk.a.append(ctx, 40)
	if res, err := tk.a.a.Cycle(ctx, tk.ref, Window{Keep: 10}); err != nil || res.Folded != 30 {
		t.Fatalf("A's cycle: %+v %v", res, err)
	}
	return tk
}

// TestCycleTakeoverPulls: two data dirs share one remote and one Redis.
// Node A folds and pushes, then dies holding the stream's lease. Node B's
// cycle waits for the lease to expire, pulls the volume from the remote
// (it has no copy), and folds on top of A's history: the page sequence and
// W continue, the merge-read from B returns every record once. When A
// comes back, its copy is behind the remote; its cycle pulls B's folds
// first and goes on. Without the pull, B would refuse (ErrVolumeBehind) and
// A would diverge.
func TestCycleTakeoverPulls(t *testing.T) {
	ctx := testCtx(t)
	rs, err := remote.Open(ctx, "file://"+t.TempDir(), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	live := connect(t, testRedisURL(t))
	q := queueName(t)
	opts := Options{LeaseTTL: 300 * time.Millisecond, LeaseWait: 5 * time.Second, Chunk: 7}
	a := node(t, live, rs, q, "s", opts)
	b := node(t, live, rs, q, "s", opts)
	all := a.append(ctx, 40)
	if res, err := a.a.Cycle(ctx, mustRef(t, q, "s"), Window{Keep: 10}); err != nil || res.Folded != 30 {
		t.Fatalf("A's cycle: %+v %v", res, err)
	}
	// A dies holding the lease.
	l, err := takeLease(ctx, live, mustRef(t, q, "s"), 0, opts.LeaseTTL)
	if err != nil || l.Held {
		t.Fatalf("lease: %+v %v", l, err)
	}
	all = append(all, b.append(ctx, 20)...)
	res, err := b.a.Cycle(ctx, mustRef(t, q, "s"), Window{Keep: 10})
	if err != nil {
		t.Fatalf("B's takeover cycle: %v", err)
	}
	if res.Folded != 20 || res.State.Pages != 50 || res.State.W != all[49].XID() || res.Token <= l.Token {
		t.Fatalf("B's takeover cycle: %+v (A's token %d)", res, l.Token)
	}
	if got := b.archiveIDs(ctx); !slices.Equal(got, all[:50]) {
		t.Fatalf("B's archive: %d ids, want A's 30 and its own 20", len(got))
	}
	b.audit(ctx, all)

	// A is back, behind the remote: it pulls B's folds before its own.
	all = append(all, a.append(ctx, 15)...)
	if res, err = a.a.Cycle(ctx, mustRef(t, q, "s"), Window{Keep: 10}); err != nil || res.Folded != 15 || res.State.Pages != 65 {
		t.Fatalf("A's cycle after B's: %+v %v", res, err)
	}
	a.audit(ctx, all)
	if _, err := b.a.Cycle(ctx, mustRef(t, q, "s"), Window{Keep: 10}); err != nil { // and B pulls A's
		t.Fatal(err)
	}
	b.audit(ctx, all)
}

// TestQuietCycleNoRemoteRequest: a stream cycled again and again by the
// same archiver, with nothing new, costs the remote no request (the lease
// tokens follow one another: nobody else cycled in between); once another
// node has cycled and pushed, the next cycle reads the remote head and
// pulls that node's folds before its own.
func TestQuietCycleNoRemoteRequest(t *testing.T) {
	ctx := testCtx(t)
	raw, err := remote.Open(ctx, "file://"+t.TempDir(), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rs := remote.NewCountingStore(raw)
	live := connect(t, testRedisURL(t))
	q := queueName(t)
	opts := Options{LeaseTTL: 300 * time.Millisecond, LeaseWait: 5 * time.Second}
	a := node(t, live, rs, q, "s", opts)
	b := node(t, live, rs, q, "s", opts)
	ref := mustRef(t, q, "s")
	all := a.append(ctx, 30)
	if res, err := a.a.Cycle(ctx, ref, Window{Keep: 10}); err != nil || res.Folded != 20 {
		t.Fatalf("A's first cycle: %+v %v", res, err)
	}
	rs.Reset()
	for i := range 5 {
		if res, err := a.a.Cycle(ctx, ref, Window{Keep: 10}); err != nil || res.Folded != 0 {
			t.Fatalf("A's quiet cycle %d: %+v %v", i, res, err)
		}
	}
	if c := rs.Counts(); c.Total() != 0 {
		t.Fatalf("5 quiet cycles cost the remote %+v, want no request", c)
	}
	all = append(all, b.append(ctx, 15)...)
	if res, err := b.a.Cycle(ctx, ref, Window{Keep: 10}); err != nil || res.Folded != 15 {
		t.Fatalf("B's cycle: %+v %v", res, err)
	}
	rs.Reset()
	all = append(all, a.append(ctx, 5)...)
	res, err := a.a.Cycle(ctx, ref, Window{Keep: 10})
	if err != nil || res.Folded != 5 || res.State.Pages != 40 {
		t.Fatalf("A's cycle after B's: %+v %v", res, err)
	}
	if c := rs.Counts(); c.List == 0 {
		t.Errorf("A's cycle after B's cost %+v: it did not read the remote head", c)
	}
	a.audit(ctx, all)
}

// failPusher is a Pusher whose pushes fail: the cycle folds, pushes
// nothing and trims nothing (a node that lost its lease or died between
// its folds and its push).
type failPusher struct{ graft.Replication }

func (failPusher) Push(context.Context, *graft.Volume) (remote.SyncPoint, error) {
	return remote.SyncPoint{}, errors.New("push refused by the test")
}

// TestCycleHealsStaleFolds: a node whose folds were never pushed (its push
// failed, as when it dies or loses its lease between its folds and its
// push) while another node took the stream over, folded, pushed and
// trimmed, comes back with a copy diverged from the remote. With
// trim-after remote every record its unpushed folds hold is still live or
// in the remote's history (the seam cache names a landed push), so its
// next cycle drops them, pulls and folds on, instead of failing as
// diverged for good. Records that exist only in those folds (above every
// landed push, and trimmed from the stream by another client) make it
// refuse as before, dropping nothing.
func TestCycleHealsStaleFolds(t *testing.T) {
	for _, apptrim := range []bool{false, true} {
		t.Run(fmt.Sprintf("apptrim=%v", apptrim), func(t *testing.T) {
			tk := newTakeover(t, 300*time.Millisecond)
			ctx, live, ref, a, b, all := tk.ctx, tk.live, tk.ref, tk.a, tk.b, tk.all
			b.a.opts.Pusher = failPusher{}
			all = append(all, b.append(ctx, 20)...)
			if res, err := b.a.Cycle(ctx, ref, Window{Keep: 10}); err == nil || res.Folded != 20 || res.Trimmed != 0 {
				t.Fatalf("B's cycle with a failing push: %+v %v", res, err)
			}
			b.a.opts.Pusher = graft.Replication{}
			all = append(all, a.append(ctx, 5)...)
			// A folds all[30..44] (B's folds hold all[30..49]), pushes,
			// trims to all[45]: the seam cache names all[44].
			if res, err := a.a.Cycle(ctx, ref, Window{Keep: 20}); err != nil || res.Folded != 15 {
				t.Fatalf("A's cycle after B's unpushed folds: %+v %v", res, err)
			}
			if apptrim {
				// Another client trims all[45..49]: above every landed
				// push, they exist only in B's unpushed folds now.
				raw(t, live, "XTRIM", mq.StreamKey(ref), "MINID", all[50].XID().String())
			}
			before := b.volume(ctx).Info()
			res, err := b.a.Cycle(ctx, ref, Window{Keep: 10})
			if apptrim {
				var de *graft.DivergedError
				var dis *graft.DiscardError
				if !errors.As(err, &de) || !errors.As(err, &dis) || dis.Count != 5 {
					t.Fatalf("B's cycle over records only its folds hold: %+v %v, want diverged and would-discard", res, err)
				}
				if after := b.volume(ctx).Info(); after.LocalLSN != before.LocalLSN {
					t.Fatalf("B's refused cycle dropped commits: %+v → %+v", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("B's cycle after A's: %+v %v", res, err)
			}
			b.audit(ctx, all)
			all = append(all, b.append(ctx, 12)...)
			if res, err := b.a.Cycle(ctx, ref, Window{Keep: 10}); err != nil || res.Folded != 12 {
				t.Fatalf("B's next cycle: %+v %v", res, err)
			}
			b.audit(ctx, all)
			if _, err := a.a.Cycle(ctx, ref, Window{Keep: 10}); err != nil {
				t.Fatalf("A's cycle after B healed: %v", err)
			}
			a.audit(ctx, all)
		})
	}
}

// hookPusher is graft's replication with before run ahead of each push.
type hookPusher struct {
	graft.Replication
	before func()
}

func (p hookPusher) Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error) {
	if p.before != nil {
		p.before()
	}
	return p.Replication.Push(ctx, vol)
}

// TestCycleAfterLostPushReadsHead: another node's late push (its lease
// ran out while it pushed) lands between this node's pull and its push,
// so this node's push fails as diverged. The next cycle's lease follows
// this node's last one, which alone would let it skip reading the remote
// head; after a failed cycle it reads it anyway, finds its copy diverged,
// heals it, and the stream cycles on, every record once.
func TestCycleAfterLostPushReadsHead(t *testing.T) {
	tk := newTakeover(t, 300*time.Millisecond)
	ctx, ref, a, b, all := tk.ctx, tk.ref, tk.a, tk.b, tk.all
	all = append(all, a.append(ctx, 20)...)
	// A folds 20 and dies before its push.
	a.a.opts.Pusher = failPusher{}
	if res, err := a.a.Cycle(ctx, ref, Window{Keep: 10}); err == nil || res.Folded != 20 {
		t.Fatalf("A's cycle with a failing push: %+v %v", res, err)
	}
	// B takes the stream over; A's push lands after B's pull.
	late := func() {
		if _, err := a.volume(ctx).Push(ctx); err != nil {
			t.Errorf("A's late push: %v", err)
		}
	}
	b.a.opts.Pusher = hookPusher{before: late}
	res, err := b.a.Cycle(ctx, ref, Window{Keep: 10})
	var de *graft.DivergedError
	if !errors.As(err, &de) || res.Trimmed != 0 {
		t.Fatalf("B's cycle under A's late push: %+v %v, want diverged, nothing trimmed", res, err)
	}
	b.a.opts.Pusher = graft.Replication{}
	all = append(all, b.append(ctx, 5)...)
	if res, err = b.a.Cycle(ctx, ref, Window{Keep: 10}); err != nil {
		t.Fatalf("B's next cycle: %+v %v", res, err)
	}
	b.audit(ctx, all)
	a.a.opts.Pusher = graft.Replication{}
	if _, err := a.a.Cycle(ctx, ref, Window{Keep: 10}); err != nil {
		t.Fatalf("A's cycle after B's: %v", err)
	}
	a.audit(ctx, all)
}

// TestCycleSlowPushKeepsLease: a push that takes three times the lease's
// TTL (the first push of a large history) keeps the cycle's lease: another
// node trying to take the stream over meanwhile finds it held, and the
// cycle trims after its push.
func TestCycleSlowPushKeepsLease(t *testing.T) {
	const ttl = 500 * time.Millisecond
	tk := newTakeover(t, ttl)
	ctx, live, ref, a := tk.ctx, tk.live, tk.ref, tk.a
	all := append(tk.all, a.append(ctx, 40)...)
	var during lease
	var derr error
	a.a.opts.Pusher = hookPusher{before: func() {
		time.Sleep(3 * ttl) // longer than the lease, by far
		during, derr = takeLease(ctx, live, ref, 0, ttl)
	}}
	res, err := a.a.Cycle(ctx, ref, Window{Keep: 10})
	if err != nil || res.Folded != 40 || res.Trimmed != 40 {
		t.Fatalf("cycle with a slow push: %+v %v", res, err)
	}
	if derr != nil || !during.Held || during.Token != res.Token {
		t.Fatalf("another node during the push: %+v %v, want the lease held by the cycle's token %d", during, derr, res.Token)
	}
	a.audit(ctx, all)
}

// TestQuietCycleRaisesSeamToPush: folds pushed outside a cycle (a node's
// background replication, or a push after a kill left them unpushed) are
// named by the seam cache after the next cycle, even one with nothing to
// cut: with trim-after remote the cache follows the pushes, and a cycle
// that stopped before its own push left it behind them.
func TestQuietCycleRaisesSeamToPush(t *testing.T) {
	tk := newTakeover(t, 300*time.Millisecond)
	ctx, live, ref, a := tk.ctx, tk.live, tk.ref, tk.a
	a.append(ctx, 20)
	a.a.opts.Pusher = failPusher{}
	if res, err := a.a.Cycle(ctx, ref, Window{Keep: 10}); err == nil || res.Folded != 20 {
		t.Fatalf("cycle with a failing push: %+v %v", res, err)
	}
	a.a.opts.Pusher = graft.Replication{}
	vol := a.volume(ctx)
	if _, err := vol.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := a.a.Cycle(ctx, ref, Window{Keep: 1000}); err != nil || res.Folded != 0 {
		t.Fatalf("quiet cycle: %+v %v", res, err)
	}
	seam, ok, err := GetArchived(ctx, live, ref)
	if err != nil || !ok {
		t.Fatalf("seam cache: %+v %v %v", seam, ok, err)
	}
	st, err := Frontier(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	if seam.W != st.W {
		t.Fatalf("the seam cache names %v, the pushed volume ends at %v", seam.W, st.W)
	}
}
