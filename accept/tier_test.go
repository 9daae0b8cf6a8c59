package accept

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// rig is a whole accept tier over one data dir: outbox, graft store,
// replicator on a remote, mq client.
type rig struct {
	out  *Outbox
	gs   *graft.Store
	rep  Replicator
	mqc  *mq.Client
	tier *Tier
}

func openRig(ctx context.Context, dir, remoteURL, redisURL string, k int, topts TierOptions) (*rig, error) {
	mqc, err := mq.Connect(ctx, mq.Options{URL: redisURL})
	if err != nil {
		return nil, err
	}
	r, err := openRigOn(ctx, dir, remoteURL, mqc, k, topts)
	if r != nil {
		r.mqc = mqc
	}
	return r, err
}

// openRigOn opens a rig whose tier dispatches to disp; the rig does not own
// disp (its mqc is nil).
func openRigOn(ctx context.Context, dir, remoteURL string, disp Dispatcher, k int, topts TierOptions) (*rig, error) {
	r := &rig{}
	var err error
	if r.out, err = Open(ctx, filepath.Join(dir, "outbox"), Options{K: k}); err != nil {
		return nil, err
	}
	st, err := remote.Open(ctx, remoteURL, drivers.All()...)
	if err != nil {
		return nil, err
	}
	if r.gs, err = graft.Open(ctx, filepath.Join(dir, "graft"), graft.Options{Remote: st}); err != nil {
		return nil, err
	}
	r.rep = graft.Replication{}
	if r.tier, err = NewTier(ctx, r.out, r.gs, r.rep, disp, topts); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rig) close(ctx context.Context) error {
	r.tier.Close(ctx)
	if r.mqc != nil {
		r.mqc.Close()
	}
	return errors.Join(r.out.Close(ctx), r.gs.Close())
}

// settle drains the tier and waits until the outbox holds nothing: every
// intent committed, pushed, dispatched and marked. Each round drains (every
// intent pending is committed and pushed, and handed to its dispatcher)
// and then waits for the dispatchers (waitDispatched); a round that leaves
// the outbox no smaller fails the test.
func (r *rig) settle(t *testing.T, ctx context.Context) {
	t.Helper()
	for n := r.out.Len(); n > 0; {
		dctx, cancel := context.WithTimeout(ctx, testWait)
		err := r.tier.Drain(dctx)
		cancel()
		if err != nil {
			t.Fatalf("settle: drain with %d intents in the outbox: %v", n, err)
		}
		waitDispatched(t, r.tier)
		left := r.out.Len()
		if left >= n {
			t.Fatalf("settle: the outbox holds %d intents after a drain and every dispatch (%d before)", left, n)
		}
		n = left
	}
}

// remoteJobs opens the remote at url and returns RemoteJobs of volume.
func remoteJobs(ctx context.Context, url, volume string) (map[brand.ID]uint64, error) {
	st, err := remote.Open(ctx, url, drivers.All()...)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return RemoteJobs(ctx, st, volName(volume))
}

// claimAll claims every job of q and counts deliveries per id.
func claimAll(ctx context.Context, c *mq.Client, q string) (map[brand.ID]int, error) {
	got := map[brand.ID]int{}
	for {
		ds, err := c.Claim(ctx, qn(q), "audit", 1000)
		if err != nil {
			return nil, err
		}
		if len(ds) == 0 {
			return got, nil
		}
		for _, d := range ds {
			got[d.ID]++
		}
	}
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// newRig opens a rig on a fresh data dir, a file:// remote in it and the
// package's redis-server, closed when the test ends. It returns the rig and
// the remote's URL.
func newRig(t *testing.T, k int, topts TierOptions) (*rig, string) {
	t.Helper()
	ctx := t.Context()
	rd := servers.Redis(t)
	dir := t.TempDir()
	url := fileURL(filepath.Join(dir, "remote"))
	r, err := openRig(ctx, dir, url, rd.URL, k, topts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.close(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	return r, url
}

func TestEnqueueSyncAsync(t *testing.T) {
	ctx := t.Context()
	r, url := newRig(t, 100, TierOptions{AsyncInterval: time.Hour})
	s1, err := r.tier.Enqueue(ctx, qn("jobsA"), 0, []byte(`{"n":1}`), Sync)
	if err != nil {
		t.Fatal(err)
	}
	if s1.LSN != 1 || s1.Volume != "accept.jobsA.0" || s1.Mode != Sync {
		t.Fatalf("receipt %+v", s1)
	}
	a, err := r.tier.Enqueue(ctx, qn("jobsA"), 0, []byte(`{"n":2}`), Async)
	if err != nil || a.LSN != 0 {
		t.Fatalf("async %+v %v", a, err)
	}
	s2, err := r.tier.Enqueue(ctx, qn("jobsA"), 0, []byte(`{"n":3}`), Sync)
	if err != nil {
		t.Fatal(err)
	}
	if s2.LSN != 2 {
		t.Fatalf("second sync at remote LSN %d, want 2", s2.LSN)
	}
	jobs, err := remoteJobs(ctx, url, "accept.jobsA.0")
	if err != nil {
		t.Fatal(err)
	}
	// The async job pending before the second sync rode in its commit.
	if jobs[s1.ID] != 1 || jobs[a.ID] != 2 || jobs[s2.ID] != 2 || len(jobs) != 3 {
		t.Fatalf("remote jobs %v", jobs)
	}
	r.settle(t, ctx)
	got, err := claimAll(ctx, r.mqc, "jobsA")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []brand.ID{s1.ID, a.ID, s2.ID} {
		if got[id] != 1 {
			t.Fatalf("job %s delivered %d times (%v)", brand.JOB.Format(id), got[id], got)
		}
	}
	// A second enqueue of a known id is refused before any side effect.
	if _, err := r.tier.Enqueue(ctx, qn("jobsA"), 0, []byte{0xff}, Async); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	if _, err := r.tier.Enqueue(ctx, names.Queue{}, 0, nil, Async); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no queue: %v", err)
	}
}

// blockingReplicator holds every Push until release is closed, and
// reports each Push as it starts.
type blockingReplicator struct {
	Replicator
	started chan struct{}
	release chan struct{}
}

func (b *blockingReplicator) Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error) {
	b.started <- struct{}{}
	<-b.release
	return b.Replicator.Push(ctx, vol)
}

// TestGroupCommit: while one commit is being pushed, 63 sync callers
// arrive; they are all acknowledged by the next commit, one remote LSN.
func TestGroupCommit(t *testing.T) {
	ctx := t.Context()
	r, _ := newRig(t, 1000, TierOptions{AsyncInterval: time.Hour})
	br := &blockingReplicator{Replicator: r.rep, started: make(chan struct{}, 8), release: make(chan struct{})}
	r.tier.rep = br
	first := make(chan Receipt, 1)
	go func() {
		rc, err := r.tier.Enqueue(ctx, qn("grp"), 0, []byte("first"), Sync)
		if err != nil {
			t.Error(err)
		}
		first <- rc
	}()
	<-br.started // the first commit is landed and held in its push
	const n = 63
	var wg sync.WaitGroup
	lsns := make([]uint64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := r.tier.Enqueue(ctx, qn("grp"), 0, []byte("x"+strconv.Itoa(i)), Sync)
			if err != nil {
				t.Error(err)
			}
			lsns[i] = rc.LSN
		}()
	}
	q, _ := r.tier.queue(ctx, qn("grp"), false)
	// All 63 recorded and pending behind the held push.
	waitIntake(t, q, fmt.Sprintf("%d jobs pending", n), func(in *intake) bool { return len(in.pending) == n })
	close(br.release)
	wg.Wait()
	if rc := <-first; rc.LSN != 1 {
		t.Fatalf("first at %d", rc.LSN)
	}
	for i, l := range lsns {
		if l != 2 {
			t.Fatalf("caller %d acknowledged at remote LSN %d, want 2 (one shared commit)", i, l)
		}
	}
	if h := r.gs; h == nil {
		t.Fatal("no store")
	}
	if q.vol.Head() != 2 {
		t.Fatalf("local head %d, want 2 commits", q.vol.Head())
	}
	// The tier's own account: two commits, of 1 and 63 jobs (recorded
	// before their callers are woken), nothing pending.
	st := r.tier.Stats()
	if len(st) != 1 || st[0].Queue != qn("grp") || st[0].Commits != 2 || !slices.Equal(st[0].Batches, []int{1, n}) || st[0].Pending != 0 || st[0].Sync != 0 {
		t.Fatalf("Stats() = %+v, want grp with 2 commits of [1 %d], none pending", st, n)
	}
}

// The crash test of the two-tier enqueue: a child enqueues sync and async
// jobs and reports "S <id> <lsn>" after each sync ack and "A <id>" after
// each async ack; the parent SIGKILLs it after a random number of reports,
// restarts the tier on the same data dir (recovery re-commits and
// re-dispatches), and audits the remote, the outbox and the job stream.
const tierCrashK = 16

func TestEnqueueCrashChild(t *testing.T) {
	arg, ok := crashtest.Child("TestEnqueueCrashChild")
	if !ok {
		t.Skip("child of TestEnqueueCrash")
	}
	parts := strings.SplitN(arg, "|", 3)
	ctx := context.Background()
	r, err := openRig(ctx, parts[0], parts[1], parts[2], tierCrashK, TierOptions{AsyncEvery: 8, AsyncInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				mode := Async
				if (i+w)%3 == 0 {
					mode = Sync
				}
				rc, err := r.tier.Enqueue(ctx, qn("crashq"), 0, []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)), mode)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if mode == Sync {
					crashtest.Report("S %d %d", rc.ID, rc.LSN)
				} else {
					crashtest.Report("A %d", rc.ID)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

//echostore:fault
func TestEnqueueCrash(t *testing.T) {
	if _, ok := crashtest.Child("TestEnqueueCrashChild"); ok {
		return
	}
	ctx := t.Context()
	rd := servers.Redis(t)
	dir := t.TempDir()
	url := fileURL(filepath.Join(dir, "remote"))
	const vol = "accept.crashq.0"
	syncAcked := map[brand.ID]uint64{}
	var asyncAcked []brand.ID
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	for round := range 6 {
		p := crashtest.Start(t, "TestEnqueueCrashChild", dir+"|"+url+"|"+rd.URL)
		stop := 20 + rng.IntN(200)
		var lines []string
		for range stop {
			line, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, p.Rest()...)
		var roundAsync []brand.ID
		for _, l := range lines {
			f := strings.Fields(l)
			id, _ := strconv.ParseUint(f[1], 10, 64)
			if f[0] == "S" {
				lsn, _ := strconv.ParseUint(f[2], 10, 64)
				syncAcked[brand.ID(id)] = lsn
			} else {
				roundAsync = append(roundAsync, brand.ID(id))
			}
		}
		asyncAcked = append(asyncAcked, roundAsync...)

		// Every acknowledged sync job is in the remote at or below the
		// LSN it was acknowledged with, before any recovery runs.
		jobs, err := remoteJobs(ctx, url, vol)
		if err != nil {
			t.Fatal(err)
		}
		for id, lsn := range syncAcked {
			if got, ok := jobs[id]; !ok || got > lsn {
				t.Fatalf("round %d: sync job %s acknowledged at remote LSN %d; remote has it at %d (%v)", round, brand.JOB.Format(id), lsn, got, ok)
			}
		}
		// Recovery: restart the tier; it re-commits and re-dispatches.
		r, err := openRig(ctx, dir, url, rd.URL, tierCrashK, TierOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.settle(t, ctx)
		if err := r.close(ctx); err != nil {
			t.Fatal(err)
		}
		jobs, err = remoteJobs(ctx, url, vol)
		if err != nil {
			t.Fatal(err)
		}
		lost := 0
		for _, id := range roundAsync {
			if _, ok := jobs[id]; !ok {
				lost++
			}
		}
		if lost > tierCrashK {
			t.Fatalf("round %d: %d acknowledged async jobs lost, K = %d", round, lost, tierCrashK)
		}
		t.Logf("round %d: %d reports, %d sync, %d async acknowledged, %d async lost, %d jobs in remote",
			round, len(lines), len(syncAcked), len(roundAsync), lost, len(jobs))
	}
	// The job stream: each job once, under its own id, and every job in
	// the remote is dispatched.
	c, err := mq.Connect(ctx, mq.Options{URL: rd.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := claimAll(ctx, c, "crashq")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := remoteJobs(ctx, url, vol)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("job %s delivered %d times", brand.JOB.Format(id), n)
		}
		if _, ok := jobs[id]; !ok {
			t.Fatalf("job %s dispatched but not in the remote", brand.JOB.Format(id))
		}
	}
	for id := range jobs {
		if got[id] != 1 {
			t.Fatalf("job %s in the remote but dispatched %d times", brand.JOB.Format(id), got[id])
		}
	}
	for id := range syncAcked {
		if got[id] != 1 {
			t.Fatalf("acknowledged sync job %s not dispatched", brand.JOB.Format(id))
		}
	}
}

// TestEnqueueMinIO: sync enqueues against a real S3 server; a follower
// reading only the bucket sees every acknowledged LSN and its jobs.
func TestEnqueueMinIO(t *testing.T) {
	ctx := t.Context()
	rd := servers.Redis(t)
	m := servers.MinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	bucket := fmt.Sprintf("accept-tier-%d", rand.Uint64())
	if err := m.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r, err := openRig(ctx, dir, m.URL(bucket), rd.URL, 100, TierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close(ctx)
	var wg sync.WaitGroup
	receipts := make([]Receipt, 32)
	for i := range receipts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := r.tier.Enqueue(ctx, qn("mq1"), 0, []byte(`{"i":`+strconv.Itoa(i)+`}`), Sync)
			if err != nil {
				t.Error(err)
			}
			receipts[i] = rc
		}()
	}
	wg.Wait()
	jobs, err := remoteJobs(ctx, m.URL(bucket), "accept.mq1.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range receipts {
		if l, ok := jobs[rc.ID]; !ok || l != rc.LSN {
			t.Fatalf("job %s acknowledged at %d, remote has %d %v", brand.JOB.Format(rc.ID), rc.LSN, l, ok)
		}
	}
}

func TestJobPage(t *testing.T) {
	b := EncodeJobPage(42, []byte("hello"))
	id, p, err := DecodeJobPage(b)
	if err != nil || id != 42 || string(p) != "hello" {
		t.Fatalf("%v %q %v", id, p, err)
	}
	for i := range b {
		for bit := range 8 {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			if _, _, err := DecodeJobPage(c); err == nil {
				t.Fatalf("flip at %d.%d decoded", i, bit)
			}
		}
		if _, _, err := DecodeJobPage(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", i, err)
		}
	}
}

// failingReplicator fails every Push while fail is set.
type failingReplicator struct {
	Replicator
	fail atomic.Bool
}

var errRemoteDown = errors.New("remote down")

func (f *failingReplicator) Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error) {
	if f.fail.Load() {
		return remote.SyncPoint{}, errRemoteDown
	}
	return f.Replicator.Push(ctx, vol)
}

// TestRemoteDown: while pushes fail, a sync enqueue gets the error, async
// enqueues are still accepted, and a restarted tier starts anyway; once the
// remote is back, every job reaches the remote once and the job stream once.
//
//echostore:fault
func TestRemoteDown(t *testing.T) {
	ctx := t.Context()
	r, url := newRig(t, 100, TierOptions{AsyncInterval: time.Hour})
	fr := &failingReplicator{Replicator: r.rep}
	r.tier.rep = fr
	var ids []brand.ID
	rc, err := r.tier.Enqueue(ctx, qn("down"), 0, []byte("1"), Sync)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, rc.ID)
	fr.fail.Store(true)
	rc, err = r.tier.Enqueue(ctx, qn("down"), 0, []byte("2"), Sync)
	if !errors.Is(err, errRemoteDown) {
		t.Fatalf("sync enqueue with the remote down: %v", err)
	}
	ids = append(ids, rc.ID) // not acknowledged, but accepted: it arrives at least once
	if err := r.tier.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Restart with the remote still down: it starts, and takes async work.
	if r.tier, err = NewTier(ctx, r.out, r.gs, fr, r.mqc, TierOptions{AsyncInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rc, err = r.tier.Enqueue(ctx, qn("down"), 0, []byte("3"), Async)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, rc.ID)
	fr.fail.Store(false)
	rc, err = r.tier.Enqueue(ctx, qn("down"), 0, []byte("4"), Sync)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, rc.ID)
	r.settle(t, ctx)
	jobs, err := remoteJobs(ctx, url, "accept.down.0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := claimAll(ctx, r.mqc, "down")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 || len(got) != 4 {
		t.Fatalf("remote %v, job stream %v", jobs, got)
	}
	for _, id := range ids {
		if _, ok := jobs[id]; !ok || got[id] != 1 {
			t.Fatalf("job %s: remote %v, claimed %d", brand.JOB.Format(id), ok, got[id])
		}
	}
}

// qn returns queue name s checked; it panics if s is not a valid queue name
// (test names are literals).
func qn(s string) names.Queue {
	q, err := names.ParseQueue(s)
	if err != nil {
		panic(err)
	}
	return q
}

// volName returns volume name s checked; it panics if s is not a valid
// volume name (test names are made valid).
func volName(s string) names.Volume {
	v, err := names.ParseVolume(s)
	if err != nil {
		panic(err)
	}
	return v
}
