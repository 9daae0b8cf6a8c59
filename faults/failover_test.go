package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/server"
	"github.com/echostore/echostore/xid"
)

// The failover tests run serve nodes as child processes (server.Open and
// Run, as `echostore serve` does) on one Redis and one MinIO bucket, with
// trim_after: remote, and create their streams through one node's API.

// failKeep is the window of the failover tests' streams (their defaults'
// keep): what a bounded stream holds once its records stop coming.
const failKeep = 20

// failBeat is the failover nodes' beat.
const failBeat = 200 * time.Millisecond

// failNodeConf is what a TestServeNodeChild runs (JSON in its argument).
type failNodeConf struct {
	Data, Redis, Remote string
	Node                int
	// Queue and Declared, if set, declare those streams of Queue in the
	// node's configuration.
	Queue    string
	Declared []string
}

// TestServeNodeChild runs one serve node of the failover tests until it is
// killed. It reports "A <addr> <node id> <pid>" once it listens, and "L
// <kind> <stream> …" for the log lines the parent counts: "held" (a
// cycle met another node's lease and waited for it), "pulled" (a cycle
// pulled the volume from the remote first), "adopted" (discovery adopted
// the stream), "failed" (a cycle failed: its error follows).
func TestServeNodeChild(t *testing.T) {
	arg, ok := crashtest.Child("TestServeNodeChild")
	if !ok {
		t.Skip("the child of the failover tests")
	}
	var c failNodeConf
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	log := slog.New(&reportHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})})
	cfg := server.Config{Listen: "127.0.0.1:0", Redis: c.Redis, Data: c.Data, Remote: c.Remote,
		Node: c.Node, Beat: failBeat, Logger: log,
		Defaults: server.StreamConfig{Keep: failKeep, TrimAfter: "remote"}}
	if len(c.Declared) > 0 {
		q := server.QueueConfig{Name: c.Queue}
		for _, st := range c.Declared {
			q.Streams = append(q.Streams, server.StreamConfig{Name: st})
		}
		cfg.Queues = []server.QueueConfig{q}
	}
	s, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	crashtest.Report("A %s %s %d", s.Addr(), s.NodeID(), os.Getpid())
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// reportHandler reports the log lines the failover tests count (see
// TestServeNodeChild) and passes the rest to its handler.
type reportHandler struct{ slog.Handler }

var reportKinds = map[string]string{
	"archive lease held; waiting for it to expire":              "held",
	"archive volume pulled before the cycle":                    "pulled",
	"serve: archived stream discovered in Redis":                "adopted",
	"serve: archive cycle failed; nothing unfolded was trimmed": "failed",
}

func (h *reportHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *reportHandler) Handle(ctx context.Context, r slog.Record) error {
	if kind, ok := reportKinds[r.Message]; ok {
		var stream, errText string
		var walk func(a slog.Attr)
		walk = func(a slog.Attr) {
			switch {
			case a.Value.Kind() == slog.KindGroup:
				for _, g := range a.Value.Group() {
					walk(g)
				}
			case a.Key == "stream":
				stream = a.Value.String()
			case a.Key == "err":
				errText = a.Value.String()
			}
		}
		r.Attrs(func(a slog.Attr) bool { walk(a); return true })
		report("L %s %s %s", kind, stream, errText)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *reportHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &reportHandler{h.Handler.WithAttrs(as)}
}

func (h *reportHandler) WithGroup(name string) slog.Handler {
	return &reportHandler{h.Handler.WithGroup(name)}
}

// failNode is a running serve node of the failover tests.
type failNode struct {
	t      *testing.T
	name   string
	id     string
	base   string
	pid    int
	killed atomic.Bool
	done   chan struct{} // the reader of its reports ended (it died)

	mu     sync.Mutex
	counts map[string]int // "kind stream" → reports
	errs   []string       // the errors of its failed cycles
}

// startFailNode starts a node on data dir data, whose node id file the
// test wrote (so that it knows the ids before the nodes run).
func startFailNode(t *testing.T, name string, c failNodeConf) *failNode {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	p := crashtest.Start(t, "TestServeNodeChild", string(b))
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "A" {
		t.Fatalf("node %s: first report %q", name, line)
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil {
		t.Fatal(err)
	}
	n := &failNode{t: t, name: name, base: "http://" + f[1], id: f[2], pid: pid, done: make(chan struct{}),
		counts: map[string]int{}}
	go func() {
		defer close(n.done)
		for {
			line, err := p.Next()
			if err != nil {
				if !n.killed.Load() {
					t.Logf("node %s ended: %v", name, err)
				}
				return
			}
			f := strings.SplitN(line, " ", 4)
			if len(f) < 3 || f[0] != "L" {
				continue
			}
			n.mu.Lock()
			n.counts[f[1]+" "+f[2]]++
			if f[1] == "failed" && len(f) == 4 {
				n.errs = append(n.errs, f[2]+": "+f[3])
			}
			n.mu.Unlock()
		}
	}()
	// Runs before crashtest's own cleanup: the reader is done with the
	// child's output before crashtest looks at it.
	t.Cleanup(n.kill)
	return n
}

// kill SIGKILLs the node and waits until its reports are read.
func (n *failNode) kill() {
	if n.killed.Swap(true) {
		<-n.done
		return
	}
	if err := syscall.Kill(n.pid, syscall.SIGKILL); err != nil {
		n.t.Errorf("kill node %s: %v", n.name, err)
	}
	<-n.done
}

// count returns the reports of kind for stream.
func (n *failNode) count(kind, stream string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counts[kind+" "+stream]
}

// cycleErrors returns the errors of the node's failed cycles.
func (n *failNode) cycleErrors() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.errs...)
}

var metricLine = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$`)

// metrics scrapes the node's /metrics: series (name and labels as
// printed) → value.
func (n *failNode) metrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := metricLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out[m[1]+m[2]] = v
	}
	return out, sc.Err()
}

// cycles returns the archive cycles the node ran on q/s that succeeded.
func cyclesOf(m map[string]float64, q, s string) float64 {
	return m[fmt.Sprintf(`echostore_cycles_total{kind="archive",queue=%q,result="ok",stream=%q}`, q, s)]
}

// waitUntil polls cond every 50 ms until it holds, failing the test at the
// deadline with what; it returns how long it took.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return time.Since(start)
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last error: %v)", what, d, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// failLoad appends batches of records round-robin to streams through one
// node's API at a time, keeping the ids each acknowledged.
type failLoad struct {
	q       string
	streams []string
	target  atomic.Pointer[string] // the base URL appended through

	mu      sync.Mutex
	acked   map[string][]string // stream → acknowledged ids, in order
	unknown map[string]bool     // the n of records whose append failed (they may have landed)
	batches int
	stop    chan struct{}
	done    chan struct{}
}

func newFailLoad(q string, streams []string, base string) *failLoad {
	l := &failLoad{q: q, streams: streams, acked: map[string][]string{}, unknown: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	l.target.Store(&base)
	return l
}

// run appends until stopped, 5 records per request, a few hundred a
// second.
func (l *failLoad) run(ctx context.Context) {
	defer close(l.done)
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		s := l.streams[i%len(l.streams)]
		var body bytes.Buffer
		var ns []string
		for j := range 5 {
			n := fmt.Sprintf("%d.%d", i, j)
			ns = append(ns, n)
			fmt.Fprintf(&body, `{"fields":{"n":%q}}`+"\n", n)
		}
		ids, err := postRecords(ctx, client, *l.target.Load()+"/v1/streams/"+l.q+"/"+s, body.Bytes())
		l.mu.Lock()
		l.batches++
		if err != nil {
			for _, n := range ns {
				l.unknown[n] = true
			}
		} else {
			l.acked[s] = append(l.acked[s], ids...)
		}
		l.mu.Unlock()
		time.Sleep(3 * time.Millisecond) // a steady load
	}
}

func (l *failLoad) halt() {
	close(l.stop)
	<-l.done
}

// last returns the newest acknowledged id of each stream.
func (l *failLoad) last() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for s, ids := range l.acked {
		if len(ids) > 0 {
			out[s] = ids[len(ids)-1]
		}
	}
	return out
}

func (l *failLoad) total() (acked, unknown int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ids := range l.acked {
		acked += len(ids)
	}
	return acked, len(l.unknown)
}

func postRecords(ctx context.Context, c *http.Client, url string, body []byte) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("append: %d %s", resp.StatusCode, raw)
	}
	var out struct {
		IDs []string `json:"ids"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out.IDs, nil
}

// checkRead merge-reads q/s through node n's API: every acknowledged id
// once, in order, and nothing but them and records of unknown outcome.
func checkRead(ctx context.Context, n *failNode, q, s string, acked []string, unknown map[string]bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/v1/streams/"+q+"/"+s+"?limit=0", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("read %s/%s through %s: %d %s", q, s, n.name, resp.StatusCode, b)
	}
	want := map[string]bool{}
	for _, id := range acked {
		want[id] = true
	}
	var prev xid.ID
	got := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			ID     string            `json:"id"`
			Fields map[string]string `json:"fields"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return got, fmt.Errorf("read %s/%s through %s: %q: %w", q, s, n.name, sc.Text(), err)
		}
		x, err := mq.ParseID(rec.ID, false)
		if err != nil {
			return got, err
		}
		if got > 0 && !prev.Less(x) {
			return got, fmt.Errorf("read %s/%s through %s: %s after %s: not in order, or twice", q, s, n.name, rec.ID, prev)
		}
		prev = x
		got++
		switch {
		case want[rec.ID]:
			delete(want, rec.ID)
		case unknown[rec.Fields["n"]]:
		default:
			return got, fmt.Errorf("read %s/%s through %s: %s (n %s) was never appended", q, s, n.name, rec.ID, rec.Fields["n"])
		}
	}
	if err := sc.Err(); err != nil {
		return got, err
	}
	if len(want) > 0 {
		return got, fmt.Errorf("read %s/%s through %s: %d acknowledged records missing", q, s, n.name, len(want))
	}
	return got, nil
}

// failGroup is the test's nodes, Redis and bucket.
type failGroup struct {
	t      *testing.T
	redis  string
	remote string
	live   *mq.Client
	dir    string
	q      string
	ids    map[string]string // name → node id
	// declared are the streams every node's configuration declares (none:
	// the streams are met through the API alone).
	declared []string
}

func newFailGroup(t *testing.T, names ...string) *failGroup {
	t.Helper()
	mi := servers.MinIO(t)
	for _, kv := range mi.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	bucket := fmt.Sprintf("failover-%d-%d", os.Getpid(), queueSeq.Add(1))
	if err := mi.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	red := servers.Redis(t)
	g := &failGroup{t: t, redis: red.URL, remote: mi.URL(bucket), live: connect(t, red.URL), dir: t.TempDir(),
		q: queueName(t), ids: map[string]string{}}
	for i, name := range names {
		// The node ids are the test's, so that it knows each node's share
		// before the nodes run.
		id := fmt.Sprintf("%032x", uint64(i+1)*0x9e3779b97f4a7c15+uint64(os.Getpid()))
		data := filepath.Join(g.dir, name)
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, server.NodeIDFile), []byte(id+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		g.ids[name] = id
	}
	return g
}

func (g *failGroup) start(name string, node int) *failNode {
	n := startFailNode(g.t, name, failNodeConf{Data: filepath.Join(g.dir, name), Redis: g.redis, Remote: g.remote, Node: node,
		Queue: g.q, Declared: g.declared})
	if n.id != g.ids[name] {
		g.t.Fatalf("node %s runs as %s, its node-id file says %s", name, n.id, g.ids[name])
	}
	return n
}

// pick returns stream names of which each node of among gets per: the
// share each would cycle were among the live nodes.
func (g *failGroup) pick(per int, among ...string) (streams []string, owner map[string]string) {
	var ids []string
	byID := map[string]string{}
	for _, name := range among {
		ids = append(ids, g.ids[name])
		byID[g.ids[name]] = name
	}
	owner = map[string]string{}
	have := map[string]int{}
	for i := 0; len(streams) < per*len(among); i++ {
		s := fmt.Sprintf("s%d", i)
		o := byID[echostore.ShareOf(ids, mustRef(g.t, g.q, s))]
		if have[o] < per {
			have[o]++
			streams = append(streams, s)
			owner[s] = o
		}
	}
	return streams, owner
}

// waitNodes waits until every node of ns sees want live nodes.
func (g *failGroup) waitNodes(want int, ns ...*failNode) {
	g.t.Helper()
	ctx := g.t.Context()
	waitUntil(g.t, 30*time.Second, fmt.Sprintf("every node sees %d live nodes", want), func() (bool, error) {
		for _, n := range ns {
			m, err := n.metrics(ctx)
			if err != nil {
				return false, err
			}
			if m["echostore_nodes_live"] != float64(want) {
				return false, nil
			}
		}
		return true, nil
	})
}

// seamW returns the watermark of q/s's seam cache (ok false: none).
func (g *failGroup) seamW(ctx context.Context, s string) (xid.ID, bool, error) {
	seam, ok, err := archive.GetArchived(ctx, g.live, mustRef(g.t, g.q, s))
	return seam.W, ok, err
}

// folded waits until the seam of every stream is at or above marks[s]:
// a cycle folded what was acknowledged up to then.
func (g *failGroup) folded(what string, streams []string, marks map[string]string) time.Duration {
	g.t.Helper()
	ctx := g.t.Context()
	return waitUntil(g.t, 60*time.Second, what, func() (bool, error) {
		for _, s := range streams {
			w, ok, err := g.seamW(ctx, s)
			if err != nil || !ok {
				return false, err
			}
			if m, has := marks[s]; has {
				x, err := mq.ParseID(m, false)
				if err != nil {
					return false, err
				}
				if w.Less(x) {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// bounded waits until every stream holds at most failKeep live entries.
func (g *failGroup) bounded(streams []string) {
	g.t.Helper()
	ctx := g.t.Context()
	waitUntil(g.t, 60*time.Second, "every stream bounded to its window in Redis", func() (bool, error) {
		for _, s := range streams {
			n, err := g.live.Len(ctx, mustRef(g.t, g.q, s))
			if err != nil || n > failKeep {
				return false, err
			}
		}
		return true, nil
	})
}

// sampleLen follows the longest live stream until stop is closed.
func (g *failGroup) sampleLen(ctx context.Context, streams []string, stop chan struct{}) *atomic.Int64 {
	var most atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, s := range streams {
				if n, err := g.live.Len(ctx, mustRef(g.t, g.q, s)); err == nil && n > most.Load() {
					most.Store(n)
				}
			}
		}
	}()
	return &most
}

// audit merge-reads every stream through every node of ns.
func (g *failGroup) audit(l *failLoad, ns ...*failNode) int {
	g.t.Helper()
	ctx := g.t.Context()
	l.mu.Lock()
	defer l.mu.Unlock()
	read := 0
	for _, n := range ns {
		for _, s := range l.streams {
			got, err := checkRead(ctx, n, g.q, s, l.acked[s], l.unknown)
			if err != nil {
				g.t.Fatal(err)
			}
			read += got
		}
	}
	return read
}

// TestFailoverKill runs two and three serve nodes on one Redis and one
// MinIO bucket (trim_after: remote); the streams are created through one
// node's API under load, none declared in a configuration, so that the
// others know them only from Redis. That node is SIGKILLed under load and
// the load goes on through another node. Within the bound (the heartbeat's
// and lease's TTL plus a beat and the takeover's cycle) every stream of its
// share is cycled again by the others (its seam passes what was
// acknowledged before the kill), the takers having pulled its volume from
// the bucket; once the load stops Redis holds each stream's window alone;
// the merge-read of every stream through every surviving node holds every
// acknowledged record once, in order; no cycle failed on a lease lost.
func TestFailoverKill(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) { failoverKill(t, n, false) })
	}
	// The streams declared in every node's configuration: each node cycles
	// its share of them alone, and the others take the killed node's over.
	t.Run("2 nodes declared", func(t *testing.T) { failoverKill(t, 2, true) })
}

func failoverKill(t *testing.T, count int, declare bool) {
	ctx := t.Context()
	all := []string{"a", "b", "c"}[:count]
	g := newFailGroup(t, all...)
	streams, owner := g.pick(3, all...)
	if declare {
		g.declared = streams
	}
	var nodes []*failNode
	for i, name := range all {
		nodes = append(nodes, g.start(name, i+1))
	}
	g.waitNodes(count, nodes...)
	victim, survivors := nodes[0], nodes[1:]
	l := newFailLoad(g.q, streams, victim.base)
	go l.run(ctx)
	stopSample := make(chan struct{})
	most := g.sampleLen(ctx, streams, stopSample)
	// Every stream cycled once, by its node.
	first := g.folded("every stream folded once", streams, nil)
	waitUntil(t, 30*time.Second, "the load's records folded through the first cycles", func() (bool, error) {
		acked, _ := l.total()
		return acked >= 40*len(streams), nil
	})

	victim.kill()
	killed := time.Now()
	marks := l.last() // everything the victim acknowledged
	next := survivors[0].base
	l.target.Store(&next)
	var mine []string
	for _, s := range streams {
		if owner[s] == "a" {
			mine = append(mine, s)
		}
	}
	rto := g.folded("the killed node's streams cycled again by the others", mine, marks)
	rtoAll := g.folded("every stream cycled past what was acknowledged before the kill", streams, marks)
	took := time.Since(killed)
	// A little more load through the survivor, then Redis bounded.
	more := l.last()
	g.folded("the load after the takeover folded", streams, more)
	l.halt()
	g.bounded(streams)
	close(stopSample)
	read := g.audit(l, survivors...)
	acked, unknown := l.total()

	pulled, held := 0, 0
	for _, s := range mine {
		p := 0
		for _, n := range survivors {
			p += n.count("pulled", s)
		}
		if p == 0 && !declare {
			t.Errorf("stream %s of the killed node: no survivor pulled its volume from the bucket before cycling it", s)
		}
		pulled += p
	}
	for _, n := range survivors {
		for _, s := range streams {
			held += n.count("held", s)
		}
		for _, e := range n.cycleErrors() {
			if strings.Contains(e, archive.ErrFenced.Error()) {
				t.Errorf("node %s: a cycle lost its lease: %s", n.name, e)
			}
		}
	}
	t.Logf("%d nodes, %d streams (%d of the killed node's; declared %v); first folds after %v; the killed node's streams cycled again %v after the kill (all streams past the kill's acknowledgements: %v; %v with the settling); bound: heartbeat/lease TTL %v + beat %v + a cycle",
		count, len(streams), len(mine), declare, first.Round(time.Millisecond), rto.Round(time.Millisecond), rtoAll.Round(time.Millisecond),
		took.Round(time.Millisecond), echostore.HeartbeatTTL, failBeat)
	t.Logf("acknowledged %d records (%d of unknown outcome: the batch in flight at the kill), %d read back through %d surviving nodes, none lost; longest live stream %d entries (window %d); %d volume pulls by the takers; %d waits on a lease held by another node",
		acked, unknown, read, len(survivors), most.Load(), failKeep, pulled, held)
}

// TestFailoverRebalance runs two serve nodes on one Redis and one MinIO
// bucket, streams created through the first one's API under load, and
// starts a third: it takes its share (rendezvous hashing over the three
// live nodes) and cycles it, pulling each volume from the bucket first;
// from then on every stream is cycled by exactly one node (the others'
// cycle counters of it do not move) and each node waits on another's
// lease at most while the shares move; the merge-reads of every node are
// complete.
func TestFailoverRebalance(t *testing.T) {
	ctx := t.Context()
	g := newFailGroup(t, "a", "b", "c")
	streams, owner := g.pick(3, "a", "b", "c")
	a, b := g.start("a", 1), g.start("b", 2)
	g.waitNodes(2, a, b)
	l := newFailLoad(g.q, streams, a.base)
	go l.run(ctx)
	g.folded("every stream folded once", streams, nil)

	c := g.start("c", 3)
	joined := time.Now()
	nodes := map[string]*failNode{"a": a, "b": b, "c": c}
	g.waitNodes(3, a, b, c)
	var share []string
	for _, s := range streams {
		if owner[s] == "c" {
			share = append(share, s)
		}
	}
	waitUntil(t, 60*time.Second, "the new node cycles its share", func() (bool, error) {
		m, err := c.metrics(ctx)
		if err != nil {
			return false, err
		}
		for _, s := range share {
			if cyclesOf(m, g.q, s) < 1 {
				return false, nil
			}
		}
		return true, nil
	})
	took := time.Since(joined)
	snap := func() map[string]map[string]float64 {
		out := map[string]map[string]float64{}
		for name, n := range nodes {
			m, err := n.metrics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = map[string]float64{}
			for _, s := range streams {
				out[name][s] = cyclesOf(m, g.q, s)
			}
		}
		return out
	}
	// Let every owner cycle each of its streams a few times: a beat that
	// began before a node saw the join is over by then.
	ownerCycled := func(base map[string]map[string]float64, k float64) func() (bool, error) {
		return func() (bool, error) {
			now := snap()
			for _, s := range streams {
				if now[owner[s]][s] < base[owner[s]][s]+k {
					return false, nil
				}
			}
			return true, nil
		}
	}
	s1 := snap()
	waitUntil(t, 60*time.Second, "every owner cycles its streams", ownerCycled(s1, 2))
	s2 := snap()
	waitUntil(t, 60*time.Second, "every owner cycles its streams again", ownerCycled(s2, 3))
	s3 := snap()
	for _, s := range streams {
		for name := range nodes {
			if name != owner[s] && s3[name][s] != s2[name][s] {
				t.Errorf("stream %s (node %s's share) was cycled by node %s too after the shares settled: %v → %v cycles",
					s, owner[s], name, s2[name][s], s3[name][s])
			}
		}
	}
	for _, s := range share {
		if c.count("pulled", s) == 0 {
			t.Errorf("stream %s: the new node cycled it without pulling its volume from the bucket first", s)
		}
	}
	l.halt()
	g.bounded(streams)
	read := g.audit(l, a, b, c)
	acked, unknown := l.total()
	held := 0
	for name, n := range nodes {
		for _, s := range streams {
			held += n.count("held", s)
		}
		for _, e := range n.cycleErrors() {
			if strings.Contains(e, archive.ErrFenced.Error()) {
				t.Errorf("node %s: a cycle lost its lease: %s", name, e)
			}
		}
	}
	tokens := g.checkLeases(streams, a, b, c)
	moved := len(share)
	t.Logf("the third node took its share of %d of %d streams %v after it started; after that each stream was cycled by its node alone (%v cycles per node between the last two snapshots); %d waits on a lease held by another node while the shares moved; %d lease tokens, each one cycle's; %d acknowledged (%d unknown), %d read back through 3 nodes, none lost",
		moved, len(streams), took.Round(time.Millisecond), diffCycles(s2, s3), held, tokens, acked, unknown, read)
}

func diffCycles(a, b map[string]map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, m := range b {
		for s, v := range m {
			out[name] += v - a[name][s]
		}
	}
	return out
}

// scriptGet reads a string key of a queue (KEYS[1]); "0" if absent.
var scriptGet = mq.NewScript(`return redis.call('GET', KEYS[1]) or '0'`)

// checkLeases checks each stream's lease counter against the cycles the
// nodes of ns (every node that ever cycled the streams) report: a cycle
// takes one token from the counter (INCR) when it takes the lease, and a
// lease is given to one holder at a time, so the tokens handed out before
// the scrape (read before it) are at most the cycles reported plus the one
// cycle that may hold the lease at that moment, and the cycles reported are
// at most the tokens handed out after it. It returns the tokens.
func (g *failGroup) checkLeases(streams []string, ns ...*failNode) int64 {
	g.t.Helper()
	ctx := g.t.Context()
	seq := func(s string) int64 {
		v, err := g.live.Run(ctx, scriptGet, []string{archive.LeaseSeqKey(mustRef(g.t, g.q, s))}, nil).Int()
		if err != nil {
			g.t.Fatalf("lease counter of %s: %v", s, err)
		}
		return v
	}
	var total int64
	for _, s := range streams {
		before := seq(s)
		var cycles float64
		for _, n := range ns {
			m, err := n.metrics(ctx)
			if err != nil {
				g.t.Fatal(err)
			}
			cycles += cyclesOf(m, g.q, s) + m[fmt.Sprintf(`echostore_cycles_total{kind="archive",queue=%q,result="error",stream=%q}`, g.q, s)]
		}
		after := seq(s)
		if float64(before) > cycles+1 || cycles > float64(after) {
			g.t.Errorf("stream %s: %d lease tokens handed out before the nodes' counters were read, %d after, and %v cycles reported: not one token per cycle, one cycle at a time",
				s, before, after, cycles)
		}
		total += after
	}
	return total
}
