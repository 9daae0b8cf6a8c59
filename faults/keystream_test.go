package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// scriptXAdd adds one entry to KEYS[1] as an application's producer does:
// XADD K * with any bytes.
var scriptXAdd = mq.NewScript(`return {redis.call('XADD', KEYS[1], '*', unpack(ARGV))}`)

// TestKillKeyStreamCycle SIGKILLs a node cycling a stream at a Redis key
// (application ids, entries XADDed with '*' holding bytes that are not
// UTF-8, repeated names and, now and then, an entry larger than an archive
// page) at random moments of its cycles and at the push's crash points,
// restarts it on the same data dir, and after every kill audits what a
// fresh node (Redis and the remote alone) merge-reads: every entry the
// producer was acknowledged, once, in order, byte for byte. At the end,
// after a last cycle, the seam is consistent: the seam cache, the volume's
// frontier in the remote and the node's data dir name the same W, the
// archive ends at W, and the live stream starts above it.
func TestKillKeyStreamCycle(t *testing.T) {
	ctx := t.Context()
	red := servers.Redis(t)
	dir := t.TempDir()
	remoteURL := fileURL(filepath.Join(dir, "remote"))
	key := "orders." + queueName(t) // unique to the run: the pool's Redis outlives it
	conf := workerConf{nodeConf: nodeConf{Dir: filepath.Join(dir, "node"), Remote: remoteURL, Redis: red.URL, Chunk: 4},
		Keys: []string{key}, Keep: 6}
	ref, err := names.ParseKeyRef(key)
	if err != nil {
		t.Fatal(err)
	}
	live := connect(t, red.URL)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	var acked []mq.Record
	produce := func(n int) {
		t.Helper()
		for range n {
			fields := []mq.Field{{Name: "n", Value: fmt.Sprint(len(acked))}, {Name: "bin", Value: string([]byte{0xff, byte(rng.UintN(256)), 0})}}
			switch rng.IntN(16) {
			case 0:
				fields = append(fields, mq.Field{Name: "big", Value: strings.Repeat("x", 1<<20+rng.IntN(1<<20))}) // 2 or 3 pages
			case 1, 2:
				fields = append(fields, mq.Field{Name: "n", Value: "again"}) // a repeated name
			}
			var kv []string
			for _, f := range fields {
				kv = append(kv, f.Name, f.Value)
			}
			got, err := live.Run(ctx, scriptXAdd, []string{key}, kv).Strings()
			if err != nil || len(got) != 1 {
				t.Fatalf("XADD: %q, %v", got, err)
			}
			id, err := xid.Parse(got[0])
			if err != nil {
				t.Fatal(err)
			}
			acked = append(acked, mq.Record{ID: id, Fields: fields})
		}
	}
	produce(30)
	a := newAcks()
	points := append([]string{""}, pushPoints...)
	const rounds = 8
	for round := range rounds {
		c := conf
		c.Hook, c.HookSkip = points[round%len(points)], rng.IntN(3)
		p := startWorker(t, c)
		limit := 1 + rng.IntN(60)
		cycles := a.cycles
		for i := 0; ; i++ {
			line, err := p.Next()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if err := a.add(line); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(line, "C ") && i%3 == 0 {
				produce(1 + rng.IntN(12))
			}
			if c.Hook == "" && i >= limit || a.hook != "" {
				break
			}
			if a.cycles-cycles > 400 {
				t.Fatalf("round %d: %d cycles, and no push reached %s", round, a.cycles-cycles, c.Hook)
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
		a.hook = ""
		if err := keyAudit(ctx, red.URL, remoteURL, filepath.Join(t.TempDir(), "fresh"), ref, acked); err != nil {
			t.Fatalf("after kill %d (hook %q): %v", round+1, c.Hook, err)
		}
	}
	// What the last kill left: the trim passed nothing the remote does not
	// hold, and the seam cache names no W the remote lacks.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := checkSeam(sctx, red.URL, remoteURL, filepath.Join(t.TempDir(), "killed"), ref, acked, false); err != nil {
		t.Fatalf("after the last kill: %v", err)
	}
	// Settle: a node on the killed node's data dir cycles, pushes what a
	// kill left unpushed, and cycles again; then the cache, the remote and
	// the data dir name one W.
	n, err := openNode(sctx, conf.nodeConf)
	if err != nil {
		t.Fatal(err)
	}
	err = func() error {
		defer n.close(sctx)
		if _, err := n.arc.Cycle(sctx, ref, archive.Window{Keep: 3}); err != nil {
			return err
		}
		vol, err := n.gs.Volume(sctx, ref.Volume())
		if err != nil {
			return err
		}
		if _, err := (graft.Replication{}).Push(sctx, vol); err != nil {
			return err
		}
		_, err = n.arc.Cycle(sctx, ref, archive.Window{Keep: 3})
		return err
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSeam(sctx, red.URL, remoteURL, filepath.Join(t.TempDir(), "settled"), ref, acked, true); err != nil {
		t.Fatalf("after the last cycle: %v", err)
	}
	if err := keyAudit(sctx, red.URL, remoteURL, filepath.Join(t.TempDir(), "last"), ref, acked); err != nil {
		t.Fatalf("after the last cycle: %v", err)
	}
	if err := keyAudit(sctx, red.URL, remoteURL, filepath.Join(conf.Dir, "graft"), ref, acked); err != nil {
		t.Fatalf("the node's own data dir: %v", err)
	}
	t.Logf("%d kills; %d entries acknowledged and read back once each, byte for byte, after every kill; %d cycles, %d records folded; the seam consistent",
		rounds, len(acked), a.cycles, a.folded)
}

// keyAudit merge-reads the stream ref as a node with the graft store at
// dir sees it (a new dir: Redis and the remote alone) and compares it with
// acked, the entries the producer was acknowledged, in order.
func keyAudit(ctx context.Context, redisURL, remoteURL, dir string, ref names.StreamRef, acked []mq.Record) error {
	live, err := mq.Connect(ctx, mq.Options{URL: redisURL, Logger: quietLog()})
	if err != nil {
		return err
	}
	defer live.Close()
	rs, err := remote.Open(ctx, remoteURL, drivers.All()...)
	if err != nil {
		return err
	}
	defer rs.Close()
	gs, err := graft.Open(ctx, dir, graft.Options{Remote: rs})
	if err != nil {
		return err
	}
	defer gs.Close()
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
	if v, err := gs.Volume(ctx, ref.Volume()); err == nil {
		vol = v
	}
	i := 0
	for r, err := range archive.MergeRead(ctx, archive.Source{Ref: ref, Live: live, Volume: vol, Pull: pull}, archive.All()) {
		if err != nil {
			return fmt.Errorf("merge-read %s: %w", ref, err)
		}
		if i >= len(acked) {
			return fmt.Errorf("merge-read %s: record %d (%v) beyond the %d acknowledged", ref, i, r.ID, len(acked))
		}
		if r.ID != acked[i].ID || !reflect.DeepEqual(r.Fields, acked[i].Fields) {
			return fmt.Errorf("merge-read %s: record %d is %v (%d fields), want %v (%d fields): lost, duplicated or changed",
				ref, i, r.ID, len(r.Fields), acked[i].ID, len(acked[i].Fields))
		}
		i++
	}
	if i != len(acked) {
		return fmt.Errorf("merge-read %s: %d records, %d acknowledged", ref, i, len(acked))
	}
	return nil
}

// checkSeam checks the seam of ref against the remote and Redis: the seam
// cache's W is at most the remote's (a copy pulled from the remote covers
// it), every acknowledged entry below the live stream's first is at or
// below the cache's W (the trim passed nothing the remote does not hold),
// and the live stream's last-generated id is at least W. settled also
// wants the cache and the remote to name one W, and at most 3 entries live.
func checkSeam(ctx context.Context, redisURL, remoteURL, dir string, ref names.StreamRef, acked []mq.Record, settled bool) error {
	live, err := mq.Connect(ctx, mq.Options{URL: redisURL, Logger: quietLog()})
	if err != nil {
		return err
	}
	defer live.Close()
	seam, ok, err := archive.GetArchived(ctx, live, ref)
	if err != nil || !ok {
		return fmt.Errorf("seam cache: %+v %v %v", seam, ok, err)
	}
	rw, err := remoteFrontier(ctx, remoteURL, dir, ref)
	if err != nil {
		return err
	}
	info, err := live.Info(ctx, ref)
	if err != nil {
		return err
	}
	top, err := xid.Parse(info.TopXID)
	if err != nil {
		return fmt.Errorf("last-generated-id %q: %w", info.TopXID, err)
	}
	first := xid.Max
	if info.Length > 0 {
		if first, err = xid.Parse(info.FirstXID); err != nil {
			return err
		}
	}
	if rw.W.Less(seam.W) || top.Less(seam.W) {
		return fmt.Errorf("the seam cache's W %v is above the remote's %v or the stream's last id %v", seam.W, rw.W, top)
	}
	for _, r := range acked {
		if r.ID.Less(first) && seam.W.Less(r.ID) {
			return fmt.Errorf("entry %v was trimmed (the stream starts at %v) above the seam cache's W %v", r.ID, first, seam.W)
		}
	}
	if settled && (seam.W != rw.W || info.Length > 3) {
		return fmt.Errorf("settled: the seam cache's W %v, the remote's %v, %d entries live", seam.W, rw.W, info.Length)
	}
	return nil
}

// remoteFrontier pulls ref's volume from the remote into a new store at dir
// and returns its archive state.
func remoteFrontier(ctx context.Context, remoteURL, dir string, ref names.StreamRef) (archive.State, error) {
	rs, err := remote.Open(ctx, remoteURL, drivers.All()...)
	if err != nil {
		return archive.State{}, err
	}
	defer rs.Close()
	gs, err := graft.Open(ctx, dir, graft.Options{Remote: rs})
	if err != nil {
		return archive.State{}, err
	}
	defer gs.Close()
	v, err := gs.CreateVolume(ctx, ref.Volume())
	if err != nil {
		return archive.State{}, err
	}
	if _, err := v.Pull(ctx, nil); err != nil {
		return archive.State{}, err
	}
	return archive.Frontier(ctx, v)
}
