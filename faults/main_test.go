package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
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

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var queueSeq atomic.Int64

var notName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// queueName returns a queue name unique to the test.
func queueName(t testing.TB) string {
	n := notName.ReplaceAllString(t.Name(), "_")
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("%s-%d-%d", n, os.Getpid(), queueSeq.Add(1))
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

func connect(t testing.TB, url string) *mq.Client {
	t.Helper()
	c, err := mq.Connect(t.Context(), mq.Options{URL: url, Logger: quietLog(), RetryBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

// ownMinIO starts a MinIO of the test's own (one it may kill and restart),
// sets the environment its S3 clients read, and creates bucket; it returns
// the server and the bucket's remote URL.
func ownMinIO(t *testing.T, bucket string) (*testserver.MinIO, string) {
	t.Helper()
	mi, err := testserver.StartMinIO(t.Context())
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { mi.Stop() })
	for _, kv := range mi.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if err := mi.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	return mi, mi.URL(bucket)
}

// node is one echostore node over a data dir: the graft store replicating to
// a remote, the live tier, the archiver (trim after remote) and the accept
// tier. It is what `echostore serve` runs, built from the public packages.
type node struct {
	rs   remote.Store
	gs   *graft.Store
	live *mq.Client
	arc  *archive.Archiver
	out  *accept.Outbox
	tier *accept.Tier
}

type nodeConf struct {
	Dir, Remote, Redis string
	K                  int // the accept tier's loss window
	Hook               string
	HookSkip           int  // calls of Hook's point that pass before it stops the process
	Tier               bool // open the accept tier
	Chunk              int  // records per fold commit (0: the default)

	// In-process nodes only (not passed to a child):
	hooks remote.Hooks                    // replace the named Hook
	wrap  func(remote.Store) remote.Store // wraps the remote (a failing store)
}

// hooks returns the push's fault hooks: the one named lets skip calls pass,
// then stops the process there (it reports "H name" and blocks until killed).
func hooks(name string, skip int) remote.Hooks {
	var calls atomic.Int64
	stop := func(n string) func() {
		if n != name {
			return nil
		}
		return func() {
			if calls.Add(1) <= int64(skip) {
				return
			}
			crashtest.Report("H %s", n)
			select {}
		}
	}
	return remote.Hooks{
		BeforeSegmentUpload:          stop("BeforeSegmentUpload"),
		BetweenUploadAndCommit:       stop("BetweenUploadAndCommit"),
		AfterCommitBeforeLocalRecord: stop("AfterCommitBeforeLocalRecord"),
	}
}

func openNode(ctx context.Context, c nodeConf) (n *node, err error) {
	n = &node{}
	defer func() {
		if err != nil {
			n.close(context.WithoutCancel(ctx))
			n = nil
		}
	}()
	if n.rs, err = remote.Open(ctx, c.Remote, drivers.All()...); err != nil {
		return n, err
	}
	if c.wrap != nil {
		n.rs = c.wrap(n.rs)
	}
	h := hooks(c.Hook, c.HookSkip)
	if c.Hook == "" {
		h = c.hooks
	}
	if n.gs, err = graft.Open(ctx, filepath.Join(c.Dir, "graft"), graft.Options{Remote: n.rs, RemoteHooks: h}); err != nil {
		return n, err
	}
	if n.live, err = mq.Connect(ctx, mq.Options{URL: c.Redis, Logger: quietLog(), RetryBackoff: 20 * time.Millisecond}); err != nil {
		return n, err
	}
	if n.arc, err = archive.New(archive.Options{Store: n.gs, Live: n.live, Logger: quietLog(), Chunk: c.Chunk,
		LeaseTTL: 400 * time.Millisecond, TrimAfter: archive.TrimAfterRemote, Pusher: graft.Replication{}}); err != nil {
		return n, err
	}
	if !c.Tier {
		return n, nil
	}
	if n.out, err = accept.Open(ctx, filepath.Join(c.Dir, "outbox"), accept.Options{K: c.K, Logger: quietLog()}); err != nil {
		return n, err
	}
	n.tier, err = accept.NewTier(ctx, n.out, n.gs, graft.Replication{}, n.live,
		accept.TierOptions{AsyncEvery: 8, AsyncInterval: 5 * time.Millisecond, Logger: quietLog()})
	return n, err
}

func (n *node) close(ctx context.Context) error {
	var errs []error
	if n.tier != nil {
		errs = append(errs, n.tier.Close(ctx))
	}
	if n.out != nil {
		errs = append(errs, n.out.Close(ctx))
	}
	if n.live != nil {
		n.live.Close()
	}
	if n.gs != nil {
		errs = append(errs, n.gs.Close())
	}
	if n.rs != nil {
		errs = append(errs, n.rs.Close())
	}
	return errors.Join(errs...)
}

// settle drains the accept tier until the outbox holds nothing: every
// intent committed, pushed, dispatched and marked. It gives up at ctx's end.
func (n *node) settle(ctx context.Context) error {
	for n.out.Len() > 0 {
		if err := n.tier.Drain(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("settle: %d intents left: %w", n.out.Len(), ctx.Err())
		case <-time.After(time.Millisecond): // the dispatcher runs behind the drain
		}
	}
	return nil
}

// workerConf is what a worker child does (JSON in its crashtest argument).
type workerConf struct {
	nodeConf
	Queue   string
	Streams []string
	Keys    []string // streams at Redis keys, cycled after Streams
	Keep    int      // most records a cycle leaves live (random 0..Keep)
	Enqueue int      // enqueuing goroutines (0: none)
	Endure  bool     // errors are reported ("E …") and retried, not fatal
}

// runWorker is the body of a worker child: it opens a node and runs cycles
// over its streams and enqueues (one in three sync) until it is killed,
// reporting "C stream folded trimmed" after each cycle, "S id lsn" after each
// sync acknowledgement and "A id" after each async one.
func runWorker(t *testing.T, arg string) {
	var c workerConf
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var n *node
	for {
		var err error
		if n, err = openNode(ctx, c.nodeConf); err == nil {
			break
		}
		if !c.Endure {
			t.Fatal(err)
		}
		report("E open: %v", err)
		time.Sleep(50 * time.Millisecond) // an outage: try again
	}
	crashtest.Report("R")
	fail := func(what string, err error) {
		if !c.Endure {
			report("F %s: %v", what, err)
			os.Exit(3)
		}
		report("E %s: %v", what, err)
		time.Sleep(20 * time.Millisecond) // an outage: try again
	}
	var mu sync.Mutex // one report line at a time
	for w := range c.Enqueue {
		go func() {
			for i := 0; ; i++ {
				mode := accept.Async
				if (i+w)%3 == 0 {
					mode = accept.Sync
				}
				rc, err := n.tier.Enqueue(ctx, mustQueue(t, c.Queue), 0, []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)), mode)
				if err != nil {
					fail("enqueue", err)
					continue
				}
				mu.Lock()
				if mode == accept.Sync {
					crashtest.Report("S %d %d", rc.ID, rc.LSN)
				} else {
					crashtest.Report("A %d", rc.ID)
				}
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	var refs []names.StreamRef
	for _, s := range c.Streams {
		refs = append(refs, mustRef(t, c.Queue, s))
	}
	for _, k := range c.Keys {
		ref, err := names.ParseKeyRef(k)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	for i := 0; ; i++ {
		ref := refs[i%len(refs)]
		var s string // the report's name of the stream
		if ref.IsKey() {
			s = c.Keys[i%len(refs)-len(c.Streams)]
		} else {
			s = ref.Stream().String()
		}
		res, err := n.arc.Cycle(ctx, ref, archive.Window{Keep: int64(rng.IntN(c.Keep + 1))})
		if err != nil {
			fail("cycle "+s, err)
			continue
		}
		mu.Lock()
		crashtest.Report("C %s %d %d", s, res.Folded, res.Trimmed)
		mu.Unlock()
		if res.Folded == 0 {
			time.Sleep(2 * time.Millisecond) // nothing to do: let appends come
		}
	}
}

func report(format string, args ...any) {
	crashtest.Report("%s", strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " "))
}

func TestWorker(t *testing.T) {
	arg, ok := crashtest.Child("TestWorker")
	if !ok {
		t.Skip("the child of the crash and soak tests")
	}
	runWorker(t, arg)
}

// acks are what worker children acknowledged, parsed from their reports.
type acks struct {
	sync    map[brand.ID]uint64 // job → remote LSN it was acknowledged at
	async   map[brand.ID]bool
	cycles  int
	folded  int64
	trimmed int64
	errors  int
	hook    string
}

func newAcks() *acks { return &acks{sync: map[brand.ID]uint64{}, async: map[brand.ID]bool{}} }

// add parses one report line.
func (a *acks) add(line string) error {
	f := strings.Fields(line)
	if len(f) == 0 {
		return fmt.Errorf("empty report")
	}
	switch f[0] {
	case "R":
	case "S", "A":
		id, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return err
		}
		if f[0] == "S" {
			lsn, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil {
				return err
			}
			a.sync[brand.ID(id)] = lsn
		} else {
			a.async[brand.ID(id)] = true
		}
	case "C":
		fo, _ := strconv.ParseInt(f[2], 10, 64)
		tr, _ := strconv.ParseInt(f[3], 10, 64)
		a.cycles++
		a.folded += fo
		a.trimmed += tr
	case "E":
		a.errors++
		if os.Getenv("ECHOSTORE_SOAK_DEBUG") != "" {
			fmt.Fprintln(os.Stderr, "worker:", line)
		}
	case "H":
		a.hook = f[1]
	case "F":
		return fmt.Errorf("worker failed: %s", line)
	default:
		return fmt.Errorf("unknown report %q", line)
	}
	return nil
}

// startWorker starts a worker child with c.
func startWorker(t *testing.T, c workerConf) *crashtest.Process {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return crashtest.Start(t, "TestWorker", string(b))
}

// streamAudit checks one stream as a fresh node sees it, from Redis and the
// remote alone: the merge-read is strictly increasing, holds every
// acknowledged id once, and nothing that was never appended. unknown are
// ids whose append outcome was never learnt (they may or may not be there).
func streamAudit(ctx context.Context, redisURL, remoteURL, dir, q, s string, acked, unknown []brand.ID) (int, error) {
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		return 0, err
	}
	live, err := mq.Connect(ctx, mq.Options{URL: redisURL, Logger: quietLog()})
	if err != nil {
		return 0, err
	}
	defer live.Close()
	rs, err := remote.Open(ctx, remoteURL, drivers.All()...)
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	gs, err := graft.Open(ctx, dir, graft.Options{Remote: rs})
	if err != nil {
		return 0, err
	}
	defer gs.Close()
	name := "archive." + q + "." + s
	pull := func(ctx context.Context, name string) (*graft.Volume, error) {
		v, err := gs.Volume(ctx, volName(name))
		if errors.Is(err, graft.ErrVolumeNotFound) {
			v, err = gs.CreateVolume(ctx, volName(name))
		}
		if err != nil {
			return nil, err
		}
		_, err = v.Pull(ctx, nil)
		return v, err
	}
	var vol *graft.Volume
	if v, err := gs.Volume(ctx, volName(name)); err == nil {
		vol = v
	}
	var got []brand.ID
	for r, err := range archive.MergeRead(ctx, archive.Source{Ref: ref, Live: live, Volume: vol, Pull: pull}, archive.All()) {
		if err != nil {
			return 0, fmt.Errorf("merge-read %s/%s: %w", q, s, err)
		}
		id, err := brand.FromXID(r.ID)
		if err != nil {
			return 0, fmt.Errorf("merge-read %s/%s: record %v: %w", q, s, r.ID, err)
		}
		got = append(got, id)
	}
	return len(got), checkIDs(got, acked, unknown)
}

// checkIDs: got strictly increasing, ⊇ acked, ⊆ acked ∪ unknown.
func checkIDs(got, acked, unknown []brand.ID) error {
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			return fmt.Errorf("read not strictly increasing at %d: %s after %s", i, brand.EVT.Format(got[i]), brand.EVT.Format(got[i-1]))
		}
	}
	have := make(map[brand.ID]bool, len(got))
	for _, id := range got {
		have[id] = true
	}
	lost := 0
	var first brand.ID
	for _, id := range acked {
		if !have[id] {
			if lost == 0 {
				first = id
			}
			lost++
		}
	}
	if lost > 0 {
		return fmt.Errorf("%d acknowledged records lost of %d (first %s)", lost, len(acked), brand.EVT.Format(first))
	}
	known := make(map[brand.ID]bool, len(acked)+len(unknown))
	for _, id := range slices.Concat(acked, unknown) {
		known[id] = true
	}
	var foreign []string
	for i, id := range got {
		if !known[id] {
			foreign = append(foreign, fmt.Sprintf("%d:%s", i, brand.EVT.Format(id)))
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("%d of %d records read were never appended: %s", len(foreign), len(got), strings.Join(foreign[:min(len(foreign), 20)], " "))
	}
	return nil
}

// deliveries counts, per job, the distinct job-stream entries it was
// delivered from: more than one is a job dispatched twice.
type deliveries map[brand.ID]map[string]bool

func (d deliveries) add(ds []mq.Delivery) {
	for _, x := range ds {
		if d[x.ID] == nil {
			d[x.ID] = map[string]bool{}
		}
		d[x.ID][x.EntryID] = true
	}
}

// drainJobs claims and acknowledges every job left in q (also those claimed
// before and never acknowledged) into d.
func drainJobs(ctx context.Context, c *mq.Client, queue string, d deliveries) error {
	q, err := names.ParseQueue(queue)
	if err != nil {
		return err
	}
	rec, err := c.Recover(ctx, q, "audit", time.Nanosecond, 100000)
	if err != nil {
		return err
	}
	d.add(rec.Claimed)
	for _, x := range rec.Claimed {
		if _, err := c.Ack(ctx, q, x.EntryID); err != nil {
			return err
		}
	}
	for {
		ds, err := c.Claim(ctx, q, "audit", 1000)
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			return nil
		}
		d.add(ds)
		ids := make([]string, len(ds))
		for i, x := range ds {
			ids[i] = x.EntryID
		}
		if _, err := c.Ack(ctx, q, ids...); err != nil {
			return err
		}
	}
}

// jobAudit is the end of every job case: each acknowledged sync job in the
// remote at or below its acknowledged LSN, each job of the remote dispatched
// from exactly one job-stream entry and nothing dispatched that the remote
// lacks; acknowledged async jobs missing are counted (the loss window).
func jobAudit(jobs map[brand.ID]uint64, d deliveries, a *acks) (asyncLost int, err error) {
	for id, lsn := range a.sync {
		at, ok := jobs[id]
		if !ok || at > lsn {
			return 0, fmt.Errorf("sync job %s acknowledged at remote LSN %d: remote has it %v at %d", brand.JOB.Format(id), lsn, ok, at)
		}
	}
	for id := range jobs {
		if n := len(d[id]); n != 1 {
			return 0, fmt.Errorf("job %s in the remote dispatched from %d job-stream entries, want 1", brand.JOB.Format(id), n)
		}
	}
	for id := range d {
		if _, ok := jobs[id]; !ok {
			return 0, fmt.Errorf("job %s dispatched but not in the remote", brand.JOB.Format(id))
		}
	}
	for id := range a.async {
		if _, ok := jobs[id]; !ok {
			asyncLost++
		}
	}
	return asyncLost, nil
}

// appendBatch appends n records to q/s, each with a value of pad bytes; ids
// come back only when acknowledged.
func appendBatch(ctx context.Context, c *mq.Client, q, s string, n, pad int) ([]brand.ID, error) {
	batch := make([][]mq.Field, n)
	for i := range batch {
		batch[i] = []mq.Field{{Name: "i", Value: strconv.Itoa(i)}, {Name: "s", Value: s}, {Name: "pad", Value: strings.Repeat("x", pad)}}
	}
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		return nil, err
	}
	return c.AppendBatch(ctx, ref, batch)
}

// waitDispatched drains q's job stream into deliveries until every job id
// of acked (branded text) has reached it, failing after a minute, and
// returns what it drained.
func waitDispatched(t *testing.T, c *mq.Client, q string, acked map[string]bool) deliveries {
	t.Helper()
	d := deliveries{}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := drainJobs(t.Context(), c, q, d); err != nil {
			t.Fatal(err)
		}
		missing := 0
		for id := range acked {
			bid, err := brand.Parse(id)
			if err != nil {
				t.Fatalf("id %q: %v", id, err)
			}
			if len(d[bid.ID]) == 0 {
				missing++
			}
		}
		if missing == 0 {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged jobs never reached the job stream", missing, len(acked))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mustRef returns the StreamRef of stream s of queue q, failing the test if
// the names are not valid.
func mustRef(t testing.TB, q, s string) names.StreamRef {
	t.Helper()
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		t.Fatalf("stream %s/%s: %v", q, s, err)
	}
	return ref
}

// mustQueue returns queue name q checked, failing the test if it is not
// valid.
func mustQueue(t testing.TB, q string) names.Queue {
	t.Helper()
	qq, err := names.ParseQueue(q)
	if err != nil {
		t.Fatalf("queue %s: %v", q, err)
	}
	return qq
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
