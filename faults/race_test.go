package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
)

// TestTwoNodesOneStream runs two nodes (two processes, each its own data
// dir) cycling one stream into one archive volume on a shared file://
// remote and Redis, trim after remote, while records are appended; each is
// SIGKILLed at random moments and restarted. The lease makes one of them
// the volume's writer at a time, the one that takes it over pulls first,
// and the remote log's fence refuses a stale writer. Audit: the merge-read
// of a fresh node (Redis and the remote alone) holds every acknowledged
// record once, in order; then each node must still be able to cycle.
func TestTwoNodesOneStream(t *testing.T) {
	ctx := t.Context()
	red := servers.Redis(t)
	dir := t.TempDir()
	remoteURL := fileURL(filepath.Join(dir, "remote"))
	q := queueName(t)
	var confs []workerConf
	for _, name := range []string{"a", "b"} {
		confs = append(confs, workerConf{nodeConf: nodeConf{Dir: filepath.Join(dir, name), Remote: remoteURL, Redis: red.URL, Chunk: 256},
			Queue: q, Streams: []string{"s"}, Keep: 10, Endure: true})
	}
	live := connect(t, red.URL)
	var mu sync.Mutex
	a := newAcks()
	errs := map[string]int{}
	kills := 0
	var wg sync.WaitGroup
	done := make(chan struct{})
	fail := make(chan error, 2)
	for i, c := range confs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for range 3 {
				p := startWorker(t, c)
				limit := 3 + rng.IntN(25)
				for range limit {
					line, err := p.Next()
					if err != nil {
						fail <- err
						return
					}
					mu.Lock()
					if strings.HasPrefix(line, "E ") {
						errs[errorKind(line)]++
					}
					err = a.add(line)
					mu.Unlock()
					if err != nil {
						fail <- err
						return
					}
				}
				if err := p.Kill(); err != nil {
					fail <- err
					return
				}
				mu.Lock()
				kills++
				for _, line := range p.Rest() {
					a.add(line)
				}
				mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	var acked []brand.ID
	rng := rand.New(rand.NewPCG(9, uint64(time.Now().UnixNano())))
appending:
	for {
		select {
		case <-done:
			break appending
		case err := <-fail:
			t.Fatal(err)
		default:
		}
		ids, err := appendBatch(ctx, live, q, "s", 1+rng.IntN(20), 200)
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, ids...)
		time.Sleep(5 * time.Millisecond) // a steady load
	}
	select {
	case err := <-fail:
		t.Fatal(err)
	default:
	}
	got, err := streamAudit(ctx, red.URL, remoteURL, filepath.Join(t.TempDir(), "fresh"), q, "s", acked, nil)
	if err != nil {
		t.Fatalf("read by a fresh node: %v", err)
	}
	// Each node takes the stream over once more, and is the writer.
	for _, c := range confs {
		n, err := openNode(ctx, c.nodeConf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.arc.Cycle(ctx, mustRef(t, q, "s"), archive.Window{Keep: 1}); err != nil {
			t.Errorf("node %s cannot cycle after the race: %v", filepath.Base(c.Dir), err)
		}
		n.close(context.WithoutCancel(ctx))
	}
	if _, err := streamAudit(ctx, red.URL, remoteURL, filepath.Join(t.TempDir(), "fresh2"), q, "s", acked, nil); err != nil {
		t.Fatalf("read by a fresh node after the last cycles: %v", err)
	}
	var kinds []string
	for k, n := range errs {
		kinds = append(kinds, fmt.Sprintf("%d× %s", n, k))
	}
	sort.Strings(kinds)
	t.Logf("%d kills, %d cycles (folded %d, trimmed %d), %d records read back, none lost; errors retried: %v", kills, a.cycles, a.folded, a.trimmed, got, kinds)
}

// errorKind shortens a worker's error report to its kind.
func errorKind(line string) string {
	for _, k := range []string{"diverged", "conflict", "behind", "lease", "exists", "fence"} {
		if strings.Contains(strings.ToLower(line), k) {
			return k
		}
	}
	if len(line) > 120 {
		return line[:120]
	}
	return line
}
