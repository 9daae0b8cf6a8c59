package faults

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/internal/faultstore"
	"github.com/echostore/echostore/internal/testserver"
)

// at returns push hooks that run fault once, at the named point, the first
// time the point is reached after armed is set.
func at(point string, armed *atomic.Bool, fault func()) remote.Hooks {
	f := func() {
		if armed.CompareAndSwap(true, false) {
			fault()
		}
	}
	var h remote.Hooks
	switch point {
	case "BeforeSegmentUpload":
		h.BeforeSegmentUpload = f
	case "BetweenUploadAndCommit":
		h.BetweenUploadAndCommit = f
	case "AfterCommitBeforeLocalRecord":
		h.AfterCommitBeforeLocalRecord = f
	}
	return h
}

// outageRun is one in-process node going through an outage: records are
// appended, a sync job acknowledged; then down() breaks a dependency (from
// a push hook, or at once) and a cycle (that leaves one record live) and a
// sync enqueue run into it (the
// cycle must not trim what it could not push; a sync enqueue that fails is
// not acknowledged), async enqueues go on; then up() repairs it, a cycle and
// a sync enqueue must succeed, and the audit runs.
type outageRun struct {
	conf   workerConf
	armed  *atomic.Bool
	down   func(t *testing.T) // called before the faulty cycle (may only arm a hook)
	up     func(t *testing.T)
	during func(t *testing.T, cycleErr, syncErr error)
}

func (o outageRun) run(t *testing.T) {
	ctx := t.Context()
	n, err := openNode(ctx, o.conf.nodeConf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.close(context.WithoutCancel(ctx)) }()
	q, s := o.conf.Queue, o.conf.Streams[0]
	a := newAcks()
	acked := map[string][]brand.ID{}
	// 400 records of 512 bytes: the push carries a segment.
	ids, err := appendBatch(ctx, n.live, q, s, 400, 512)
	if err != nil {
		t.Fatal(err)
	}
	acked[s] = ids
	enqueue := func(mode accept.Mode) error {
		rc, err := n.tier.Enqueue(ctx, mustQueue(t, q), 0, []byte(`{"outage":true}`), mode)
		if err == nil {
			if mode == accept.Sync {
				a.sync[rc.ID] = rc.LSN
			} else {
				a.async[rc.ID] = true
			}
		}
		return err
	}
	if err := enqueue(accept.Sync); err != nil {
		t.Fatal(err)
	}
	o.down(t)
	before, err := n.live.Len(ctx, mustRef(t, q, s))
	if err != nil {
		t.Fatal(err)
	}
	res, cycleErr := n.arc.Cycle(ctx, mustRef(t, q, s), archive.Window{Keep: 1})
	if cycleErr != nil && res.Trimmed != 0 {
		t.Fatalf("the failed cycle trimmed %d records: %v", res.Trimmed, cycleErr)
	}
	if cycleErr != nil {
		if l, err := n.live.Len(ctx, mustRef(t, q, s)); err == nil && l != before {
			t.Fatalf("the failed cycle left %d live records of %d", l, before)
		}
	}
	o.armed.Store(false)
	syncErr := enqueue(accept.Sync)
	for range 20 {
		if err := enqueue(accept.Async); err != nil {
			t.Fatalf("async enqueue during the outage: %v", err)
		}
	}
	o.during(t, cycleErr, syncErr)
	o.up(t)
	if ids, err = appendBatch(ctx, n.live, q, s, 50, 512); err != nil {
		t.Fatal(err)
	}
	acked[s] = append(acked[s], ids...)
	if _, err := n.arc.Cycle(ctx, mustRef(t, q, s), archive.Window{Keep: 10}); err != nil {
		t.Fatalf("cycle after the outage: %v", err)
	}
	if err := enqueue(accept.Sync); err != nil {
		t.Fatalf("sync enqueue after the outage: %v", err)
	}
	if err := n.close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("during the outage: cycle: %v; sync enqueue: %v", cycleErr, syncErr)
	audit(t, ctx, o.conf, acked, nil, a, 0)
}

// TestMinIOKilledMidPush kills MinIO (SIGKILL) when a push reaches each
// named point, then restarts it: nothing unpushed is trimmed, no sync
// enqueue is acknowledged while it is down, nothing acknowledged is lost
// (async included: no process died), each job is dispatched once.
func TestMinIOKilledMidPush(t *testing.T) {
	for _, point := range pushPoints {
		t.Run(point, func(t *testing.T) {
			mi, url := ownMinIO(t, "outage")
			var armed atomic.Bool
			o := outageRun{armed: &armed}
			o.conf = workerConf{nodeConf: nodeConf{Dir: t.TempDir(), Remote: url, Redis: servers.Redis(t).URL, K: 16, Tier: true, Chunk: 64,
				hooks: at(point, &armed, func() {
					if err := mi.Kill(); err != nil {
						t.Error(err)
					}
				})}, Queue: queueName(t), Streams: []string{"s"}}
			o.down = func(*testing.T) { armed.Store(true) }
			o.during = func(t *testing.T, cycleErr, syncErr error) {
				if armed.Load() {
					t.Fatalf("the cycle's push never reached %s", point)
				}
				if syncErr == nil {
					t.Fatal("a sync enqueue was acknowledged while MinIO was down")
				}
			}
			o.up = func(t *testing.T) {
				if err := mi.Restart(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			o.run(t)
		})
	}
}

// TestRedisRestartedMidCycle SIGKILLs redis-server (AOF, appendfsync
// always) when the cycle's push reaches each named point, which is between
// the fold and the trim, and restarts it at once: the cycle's trim and the
// dispatch of jobs meet a restarted server; nothing is lost or doubled.
func TestRedisRestartedMidCycle(t *testing.T) {
	for _, point := range pushPoints {
		t.Run(point, func(t *testing.T) {
			red, err := testserver.StartRedis(t.Context(), testserver.RedisConfig{AOF: true})
			if err != nil {
				testserver.Unavailable(t, err)
			}
			t.Cleanup(func() { red.Stop() })
			var armed atomic.Bool
			dir := t.TempDir()
			o := outageRun{armed: &armed}
			o.conf = workerConf{nodeConf: nodeConf{Dir: filepath.Join(dir, "node"), Remote: fileURL(filepath.Join(dir, "remote")), Redis: red.URL, K: 16, Tier: true, Chunk: 64,
				hooks: at(point, &armed, func() {
					if err := red.Restart(context.Background()); err != nil {
						t.Error(err)
					}
				})}, Queue: queueName(t), Streams: []string{"s"}}
			o.down = func(*testing.T) { armed.Store(true) }
			o.during = func(t *testing.T, cycleErr, syncErr error) {
				if armed.Load() {
					t.Fatalf("the cycle's push never reached %s", point)
				}
			}
			o.up = func(*testing.T) {}
			o.run(t)
		})
	}
}

// TestRemoteFull runs a node against an object store that refuses every
// write with ENOSPC, then one that breaks in the middle of a push (the
// segment lands, the commit does not): the cycle and the sync enqueue fail
// with an error that says ENOSPC, nothing unpushed is trimmed; once the
// store has room again everything is pushed, nothing lost or doubled.
func TestRemoteFull(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault faultstore.Fault
	}{
		{"every write", faultstore.Writes(faultstore.ErrNoSpace)},
		{"mid push", faultstore.After(1, faultstore.Writes(faultstore.ErrNoSpace))},
		{"outage", faultstore.All(faultstore.ErrOutage)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var fs *faultstore.Store
			var armed atomic.Bool
			dir := t.TempDir()
			o := outageRun{armed: &armed}
			o.conf = workerConf{nodeConf: nodeConf{Dir: filepath.Join(dir, "node"), Remote: fileURL(filepath.Join(dir, "remote")), Redis: servers.Redis(t).URL, K: 16, Tier: true, Chunk: 64,
				wrap: func(st remote.Store) remote.Store { fs = faultstore.New(st); return fs }}, Queue: queueName(t), Streams: []string{"s"}}
			o.down = func(*testing.T) { fs.Set(c.fault) }
			want := syscall.ENOSPC
			o.during = func(t *testing.T, cycleErr, syncErr error) {
				for what, err := range map[string]error{"cycle": cycleErr, "sync enqueue": syncErr} {
					if err == nil {
						t.Fatalf("%s succeeded on a store that refuses writes", what)
					}
					if c.name != "outage" && !errors.Is(err, want) {
						t.Fatalf("%s: the error does not wrap ENOSPC: %v", what, err)
					}
					if c.name == "outage" && !errors.Is(err, faultstore.ErrOutage) {
						t.Fatalf("%s: the error does not wrap the store's: %v", what, err)
					}
				}
				if fs.Failed() == 0 {
					t.Fatal(fmt.Errorf("no call failed"))
				}
			}
			o.up = func(*testing.T) { fs.Set(nil) }
			o.run(t)
		})
	}
}
