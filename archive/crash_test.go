package archive

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/internal/crashtest"
)

// TestCrashCycling kills a process that runs cycles in a loop (SIGKILL at
// random moments: the child goes on cycling after each report) while the
// parent appends, restarts it, and finally audits: every appended id is in
// exactly one of archive and live tail, and the merge-read is all of them
// in order.
//
//echostore:fault
func TestCrashCycling(t *testing.T) {
	if arg, ok := crashtest.Child("TestCrashCycling"); ok {
		crashChild(t, arg)
		return
	}
	ctx := testCtx(t)
	url := servers.Redis(t).URL
	dir := t.TempDir()
	e := &env{t: t, live: connect(t, url), q: queueName(t), s: "crash"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var all []brand.ID
	for round := range 6 {
		p := crashtest.Start(t, "TestCrashCycling", strings.Join([]string{url, dir, e.q, e.s}, "|"))
		kill := 1 + rng.IntN(12)
		for i := 0; i < kill; i++ {
			all = append(all, e.append(ctx, 1+rng.IntN(40))...)
			if _, err := p.Next(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d reports", round, kill)
	}
	e.st = openStore(t, dir)
	e.audit(ctx, all)
	// A cycle after the crashes finishes what they left.
	a, _ := New(Options{Store: e.st, Live: e.live, Logger: quietLog(), LeaseTTL: 300 * time.Millisecond})
	e.a = a
	above := len(all) - int(e.archivedCount(ctx))
	if _, err := a.Cycle(ctx, e.ref(), Window{Keep: 3}); err != nil {
		t.Fatal(err)
	}
	if n := len(all) - int(e.archivedCount(ctx)); n != min(3, above) {
		t.Fatalf("after a last cycle %d live above W, want %d", n, min(3, above))
	}
	e.audit(ctx, all)
}

func crashChild(t *testing.T, arg string) {
	parts := strings.Split(arg, "|")
	ctx := context.Background()
	live := connect(t, parts[0])
	st, err := graft.Open(ctx, parts[1], graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, _ := New(Options{Store: st, Live: live, Logger: quietLog(), Chunk: 7, LeaseTTL: 300 * time.Millisecond})
	for i := 0; ; i++ {
		res, err := a.Cycle(ctx, mustRef(t, parts[2], parts[3]), Window{Keep: int64(i % 9)})
		if err != nil {
			t.Fatal(err)
		}
		crashtest.Report("%d %d %d", i, res.Folded, res.Trimmed)
	}
}
