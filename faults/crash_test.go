package faults

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
)

// The push's named crash points (remote.Hooks), in push order.
var pushPoints = []string{"BeforeSegmentUpload", "BetweenUploadAndCommit", "AfterCommitBeforeLocalRecord"}

// TestKillAtPushPoints SIGKILLs a node (archive cycles with trim after
// remote, and sync and async enqueues, on one graft store and a file://
// remote) each time a push reaches a named crash point, restarts it on the
// same data dir, and audits: every acknowledged record once in the
// merge-read of a fresh node and of the node's own data dir, every
// acknowledged sync job in the remote, every job dispatched once.
func TestKillAtPushPoints(t *testing.T) {
	for _, point := range pushPoints {
		t.Run(point, func(t *testing.T) { killRounds(t, point, 3) })
	}
}

// TestKillAtRandom is the same node SIGKILLed at random moments of its
// cycles, pushes, accept checkpoints and enqueues.
func TestKillAtRandom(t *testing.T) { killRounds(t, "", 8) }

func killRounds(t *testing.T, point string, rounds int) {
	ctx := t.Context()
	red := servers.Redis(t)
	dir := t.TempDir()
	remoteURL := fileURL(filepath.Join(dir, "remote"))
	q := queueName(t)
	streams := []string{"a", "b"}
	const k = 16
	conf := workerConf{nodeConf: nodeConf{Dir: filepath.Join(dir, "node"), Remote: remoteURL, Redis: red.URL, K: k, Tier: true, Chunk: 16},
		Queue: q, Streams: streams, Keep: 20, Enqueue: 2}
	live := connect(t, red.URL)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	a := newAcks()
	acked := map[string][]brand.ID{}
	kills := 0
	for round := range rounds {
		c := conf
		c.Hook, c.HookSkip = point, rng.IntN(4)
		p := startWorker(t, c)
		limit := 1 + rng.IntN(400)
		cycles := a.cycles
		line := ""
		for i := 0; ; i++ {
			if i%32 == 0 || strings.HasPrefix(line, "C ") {
				// After each cycle, records of 4 KiB: most of the cycles'
				// pushes are over the inline limit, so they upload a segment.
				s := streams[rng.IntN(len(streams))]
				ids, err := appendBatch(ctx, live, q, s, 1+rng.IntN(40), 4096)
				if err != nil {
					t.Fatal(err)
				}
				acked[s] = append(acked[s], ids...)
			}
			var err error
			if line, err = p.Next(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if err := a.add(line); err != nil {
				t.Fatal(err)
			}
			if point == "" && i >= limit || a.hook != "" {
				break
			}
			if a.cycles-cycles > 500 {
				t.Fatalf("round %d: %d cycles, and no push reached %s", round, a.cycles-cycles, point)
			}
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		for _, line := range p.Rest() {
			if err := a.add(line); err != nil {
				t.Fatal(err)
			}
		}
		kills++
		a.hook = ""
	}
	audit(t, ctx, conf, acked, nil, a, kills)
}

// audit settles what a killed node left (a node on its data dir commits,
// pushes and dispatches pending intents and cycles every stream), then
// checks every stream from a fresh data dir (Redis and the remote alone) and
// from the node's own, and the jobs (see jobAudit): async jobs lost at most
// K per kill.
func audit(t *testing.T, ctx context.Context, c workerConf, acked, unknown map[string][]brand.ID, a *acks, kills int) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	c.Hook, c.hooks, c.wrap = "", remote.Hooks{}, nil
	n, err := openNode(sctx, c.nodeConf)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tier {
		if err := n.settle(sctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range c.Streams {
		if _, err := n.arc.Cycle(sctx, mustRef(t, c.Queue, s), archive.Window{Keep: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.close(sctx); err != nil {
		t.Fatal(err)
	}
	records := 0
	for _, s := range c.Streams {
		got, err := streamAudit(sctx, c.Redis, c.Remote, filepath.Join(t.TempDir(), "fresh"), c.Queue, s, acked[s], unknown[s])
		if err != nil {
			t.Fatalf("stream %s, read by a fresh node: %v", s, err)
		}
		if _, err := streamAudit(sctx, c.Redis, c.Remote, filepath.Join(c.Dir, "graft"), c.Queue, s, acked[s], unknown[s]); err != nil {
			t.Fatalf("stream %s, read by the node: %v", s, err)
		}
		records += got
	}
	if !c.Tier {
		t.Logf("%d kills; %d records read back, none lost; %d cycles", kills, records, a.cycles)
		return
	}
	rs, err := remote.Open(sctx, c.Remote, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	jobs, err := accept.RemoteJobs(sctx, rs, volName("accept."+c.Queue+".0"))
	if err != nil {
		t.Fatal(err)
	}
	live := connect(t, c.Redis)
	d := deliveries{}
	if err := drainJobs(sctx, live, c.Queue, d); err != nil {
		t.Fatal(err)
	}
	lost, err := jobAudit(jobs, d, a)
	if err != nil {
		t.Fatal(err)
	}
	if lost > c.K*kills {
		t.Fatalf("%d acknowledged async jobs lost in %d kills, K = %d", lost, kills, c.K)
	}
	t.Logf("%d kills; %d records read back, none lost; %d cycles; jobs: %d sync and %d async acknowledged, %d in the remote, each dispatched once, %d async lost (bound %d)",
		kills, records, a.cycles, len(a.sync), len(a.async), len(jobs), lost, c.K*kills)
}
