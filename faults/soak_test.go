package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// soakK is the accept tier's loss window in the soak.
const soakK = 64

// soakFigures are what a soak did; it prints them at its end.
type soakFigures struct {
	mu                                    sync.Mutex
	appended, unknown, appendErrs         int
	workerKills, redisRestarts, minioDown int
	claims, followerPulls, followerErrs   int
}

// TestSoak runs mixed load against a real redis-server (AOF, appendfsync
// always) and a real MinIO for ECHOSTORE_SOAK (a duration, e.g. 10m; unset:
// skipped): this process appends records to two streams, claims and
// acknowledges jobs and follows the archive volumes from the bucket into a
// data dir of its own, while a worker child process cycles the streams
// (fold, push, then trim: trim after remote) and enqueues jobs, one in three
// sync. Faults come at random: the worker is SIGKILLed and restarted, Redis
// is SIGKILLed and restarted, MinIO is SIGKILLed and restarted after an
// outage. At the end a fresh node settles what is left and the audit runs:
// every acknowledged record once in each stream's merge-read from a fresh
// data dir (Redis and the bucket alone), every acknowledged sync job in the
// bucket, every job of the bucket dispatched from exactly one job-stream
// entry, and acknowledged async jobs lost at most K per worker kill.
func TestSoak(t *testing.T) {
	env := os.Getenv("ECHOSTORE_SOAK")
	if env == "" {
		t.Skip("set ECHOSTORE_SOAK to a duration (make soak)")
	}
	dur, err := time.ParseDuration(env)
	if err != nil {
		t.Fatalf("ECHOSTORE_SOAK=%q: %v", env, err)
	}
	ctx := t.Context()
	red, err := testserver.StartRedis(ctx, testserver.RedisConfig{AOF: true})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { red.Stop() })
	mi, remoteURL := ownMinIO(t, "soak")
	dir := t.TempDir()
	const q = "soak"
	streams := []string{"events", "audit"}
	conf := workerConf{nodeConf: nodeConf{Dir: dir, Remote: remoteURL, Redis: red.URL, K: soakK, Tier: true, Chunk: 200},
		Queue: q, Streams: streams, Keep: 40, Enqueue: 3, Endure: true}

	var fig soakFigures
	a := newAcks()
	acked := map[string][]brand.ID{}
	unknown := map[string][]brand.ID{}
	d := deliveries{}
	load, stop := context.WithTimeout(ctx, dur)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	live := connect(t, red.URL)

	// The worker: killed at a random moment 2–8 s after it starts, then
	// started again.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
		for load.Err() == nil {
			p := startWorker(t, conf)
			deadline := time.Now().Add(time.Duration(2000+rng.IntN(6000)) * time.Millisecond)
			for time.Now().Before(deadline) && load.Err() == nil {
				line, err := p.Next()
				if err != nil {
					errc <- err
					return
				}
				fig.mu.Lock()
				err = a.add(line)
				fig.mu.Unlock()
				if err != nil {
					errc <- err
					return
				}
			}
			if err := p.Kill(); err != nil {
				errc <- err
				return
			}
			fig.mu.Lock()
			for _, line := range p.Rest() {
				if err := a.add(line); err != nil {
					errc <- err
				}
			}
			fig.workerKills++
			fig.mu.Unlock()
		}
	}()

	// The appender.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
		for load.Err() == nil {
			s := streams[rng.IntN(len(streams))]
			ids, err := appendBatch(load, live, q, s, 1+rng.IntN(50), 64)
			var ae *mq.AppendError
			fig.mu.Lock()
			switch {
			case err == nil:
				acked[s] = append(acked[s], ids...)
				fig.appended += len(ids)
			case errors.As(err, &ae):
				acked[s] = append(acked[s], ae.Appended...)
				unknown[s] = append(unknown[s], ae.Unknown...)
				fig.appended += len(ae.Appended)
				fig.unknown += len(ae.Unknown)
				fig.appendErrs++
				if os.Getenv("ECHOSTORE_SOAK_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "append error: appended %d unknown %d: %v\n", len(ae.Appended), len(ae.Unknown), err)
				}
			default:
				fig.appendErrs++
				if os.Getenv("ECHOSTORE_SOAK_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "append error %T: %v\n", err, err)
				}
			}
			fig.mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond) // Redis is down: pace the retries
			} else {
				time.Sleep(time.Duration(2+rng.IntN(8)) * time.Millisecond) // a steady load, not a benchmark
			}
		}
	}()

	// The consumer: claims and acknowledges jobs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for load.Err() == nil {
			ds, err := live.Claim(load, mustQueue(t, q), "soak", 100)
			if err == nil && len(ds) > 0 {
				ids := make([]string, len(ds))
				for i, x := range ds {
					ids[i] = x.EntryID
				}
				_, err = live.Ack(load, mustQueue(t, q), ids...)
			}
			fig.mu.Lock()
			d.add(ds)
			fig.claims += len(ds)
			fig.mu.Unlock()
			if err != nil || len(ds) == 0 {
				time.Sleep(20 * time.Millisecond) // no job yet, or Redis is down
			}
		}
	}()

	// The follower: pulls the archive volumes from the bucket into its own
	// data dir; each one's watermark and remote LSN only go up, and its
	// archive reads strictly increasing.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := follow(load, filepath.Join(t.TempDir(), "follower"), remoteURL, q, streams, &fig); err != nil {
			errc <- err
		}
	}()

	// The faults: every 1–6 s, Redis or MinIO is SIGKILLed and restarted
	// (MinIO after an outage of up to 3 s).
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
		for {
			select {
			case <-load.Done():
				return
			case <-time.After(time.Duration(1000+rng.IntN(5000)) * time.Millisecond):
			}
			if rng.IntN(2) == 0 {
				if err := red.Restart(ctx); err != nil {
					errc <- fmt.Errorf("redis restart: %w", err)
					return
				}
				fig.mu.Lock()
				fig.redisRestarts++
				fig.mu.Unlock()
				continue
			}
			if err := mi.Kill(); err != nil {
				errc <- err
				return
			}
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond) // the outage
			if err := mi.Restart(ctx); err != nil {
				errc <- fmt.Errorf("minio restart: %w", err)
				return
			}
			fig.mu.Lock()
			fig.minioDown++
			fig.mu.Unlock()
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	// Settle: a node on the worker's data dir commits, pushes and dispatches
	// what the last worker left, and folds what is left to fold.
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	n, err := openNode(sctx, conf.nodeConf)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.settle(sctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if _, err := n.arc.Cycle(sctx, mustRef(t, q, s), archive.Window{Keep: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.close(sctx); err != nil {
		t.Fatal(err)
	}

	// The audit.
	total := 0
	for _, s := range streams {
		got, err := streamAudit(sctx, red.URL, remoteURL, filepath.Join(t.TempDir(), "audit-"+s), q, s, acked[s], unknown[s])
		if err != nil {
			t.Fatalf("stream %s: %v", s, err)
		}
		total += got
	}
	rs, err := remote.Open(sctx, remoteURL, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	jobs, err := accept.RemoteJobs(sctx, rs, volName("accept."+q+".0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := drainJobs(sctx, live, q, d); err != nil {
		t.Fatal(err)
	}
	asyncLost, err := jobAudit(jobs, d, a)
	if err != nil {
		t.Fatal(err)
	}
	if asyncLost > soakK*fig.workerKills {
		t.Fatalf("%d acknowledged async jobs lost in %d worker kills, K = %d", asyncLost, fig.workerKills, soakK)
	}
	summary := fmt.Sprintf("soak %v: records appended (acknowledged) %d, outcome unknown %d, append errors %d, read back %d; "+
		"cycles %d (folded %d, trimmed %d); jobs: sync acknowledged %d, async acknowledged %d, in the bucket %d, dispatched %d, claimed %d, async lost %d (bound %d×%d kills); "+
		"faults: worker SIGKILLs %d, Redis SIGKILL+restarts %d, MinIO outages %d; worker errors retried %d; follower pulls %d (failed %d); acknowledged records lost 0, acknowledged sync jobs lost 0",
		dur, fig.appended, fig.unknown, fig.appendErrs, total, a.cycles, a.folded, a.trimmed,
		len(a.sync), len(a.async), len(jobs), len(d), fig.claims, asyncLost, soakK, fig.workerKills,
		fig.workerKills, fig.redisRestarts, fig.minioDown, a.errors, fig.followerPulls, fig.followerErrs)
	fmt.Println(summary)
	t.Log(summary)
	if fig.appended == 0 || len(a.sync) == 0 || len(a.async) == 0 || a.folded == 0 || fig.workerKills == 0 {
		t.Fatalf("the soak did too little to prove anything: %s", summary)
	}
}

// follow pulls the archive volumes of q's streams into dir until ctx ends,
// checking that each volume's watermark and head never go back and that its
// archive reads strictly increasing. Pull errors (MinIO is down) are counted.
func follow(ctx context.Context, dir, remoteURL, q string, streams []string, fig *soakFigures) error {
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
	lastW := map[string]xid.ID{}
	lastHead := map[string]uint64{}
	for ctx.Err() == nil {
		for _, s := range streams {
			name := "archive." + q + "." + s
			v, err := gs.Volume(ctx, volName(name))
			if errors.Is(err, graft.ErrVolumeNotFound) {
				v, err = gs.CreateVolume(ctx, volName(name))
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil // the load ended while the volume was opened
				}
				return err
			}
			_, err = v.Pull(ctx, nil)
			fig.mu.Lock()
			fig.followerPulls++
			if err != nil {
				fig.followerErrs++
			}
			fig.mu.Unlock()
			if err != nil {
				continue
			}
			st, err := archive.Frontier(ctx, v)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("follower %s: %w", name, err)
			}
			if st.W.Less(lastW[name]) {
				return fmt.Errorf("follower %s: watermark went back from %s to %s", name, lastW[name], st.W)
			}
			if h := v.Head(); h < lastHead[name] {
				return fmt.Errorf("follower %s: head went back from %d to %d", name, lastHead[name], h)
			} else {
				lastHead[name] = h
			}
			lastW[name] = st.W
			var prev xid.ID
			for r, err := range archive.Read(ctx, v, xid.Min, xid.Max, false) {
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					fig.mu.Lock()
					fig.followerErrs++ // a page fault while MinIO is down
					fig.mu.Unlock()
					break
				}
				if !prev.Less(r.ID) {
					return fmt.Errorf("follower %s: archive read %s after %s", name, r.ID, prev)
				}
				prev = r.ID
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	return nil
}
