package graft

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/graft/remote"
)

// benchPages commits n pages of 4 KiB (half random, so zstd halves them)
// at indexes base.. in commits of at most 4,096 pages.
func benchPages(b testing.TB, v *Volume, base uint64, n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, base))
	for start := 0; start < n; start += 4096 {
		txn := v.Begin()
		for i := start; i < min(n, start+4096); i++ {
			p := make([]byte, 4096)
			for j := 0; j < 2048; j += 8 {
				u := rng.Uint64()
				for k := 0; k < 8; k++ {
					p[j+k] = byte(u >> (8 * k))
				}
			}
			if err := txn.Put(base+uint64(i), p); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := txn.Commit(context.Background(), Unsynced); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPush: push 16 MiB of new 4 KiB pages (one local commit) per
// op, to file:// and MinIO; MB/s is raw page bytes.
func BenchmarkPush(b *testing.B) {
	const pages = 4096
	for _, name := range []string{"file", "minio"} {
		b.Run(name, func(b *testing.B) {
			var rs remote.Store
			if name == "file" {
				rs = openRemote(b, "file://"+b.TempDir())
			} else {
				rs = benchMinIO(b)
			}
			st, err := Open(context.Background(), b.TempDir(), Options{Remote: rs})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			v := mustCreate(b, st, "push")
			b.SetBytes(pages * 4096)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				benchPages(b, v, uint64(i)*pages, pages, uint64(i))
				b.StartTimer()
				if _, err := v.Push(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPushSmall: push one local commit of one 100-byte page per op
// to file:// (an inline commit: one conditional PUT), the shape of a sync
// enqueue's batch, with the sync point synced and lazy (one fsync fewer).
// The local commit is outside the timer; the push is SetPending (synced),
// the PUT and the sync point.
func BenchmarkPushSmall(b *testing.B) {
	for _, mode := range []string{"synced", "lazy"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			rs := openRemote(b, "file://"+b.TempDir())
			st, err := Open(ctx, b.TempDir(), Options{Remote: rs})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			st.lazySyncPoint = mode == "lazy"
			v := mustCreate(b, st, "push")
			page := make([]byte, 100)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				txn := v.Begin()
				page[0] = byte(i)
				if err := txn.Put(uint64(i%64), page); err != nil {
					b.Fatal(err)
				}
				if _, err := txn.Commit(ctx, Unsynced); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := v.Push(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchMinIO(b *testing.B) remote.Store {
	m := servers.MinIO(b)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	name := "bench-" + strconv.FormatInt(bucketSeq.Add(1), 10)
	if err := m.CreateBucket(context.Background(), name); err != nil {
		b.Fatal(err)
	}
	return openRemote(b, m.URL(name))
}

// BenchmarkColdFollower: a volume of ECHOSTORE_BENCH_COLD_MB MiB (default
// 256) of 4 KiB pages is pushed to file:// once; each op is a fresh
// follower (its own store on disk) that pulls, reads one page (the first
// read: one ranged GET of one frame) and then hydrates the whole volume.
// Reported: pull-ms, first-read-ms, hydrate-ms, hydrate-MB/s.
func BenchmarkColdFollower(b *testing.B) {
	mb := 256
	if s := os.Getenv("ECHOSTORE_BENCH_COLD_MB"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			mb = n
		}
	}
	ctx := context.Background()
	pages := mb << 8 // 256 pages of 4 KiB per MiB
	rs := openRemote(b, "file://"+b.TempDir())
	w, err := Open(ctx, b.TempDir(), Options{Remote: rs})
	if err != nil {
		b.Fatal(err)
	}
	wv := mustCreate(b, w, "cold")
	for start := 0; start < pages; start += 65536 { // push 256 MiB at a time
		benchPages(b, wv, uint64(start), min(65536, pages-start), 1)
		if _, err := wv.Push(ctx); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	var pull, first, hydrate time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := Open(ctx, b.TempDir(), Options{Remote: rs})
		if err != nil {
			b.Fatal(err)
		}
		v := mustCreate(b, st, "cold")
		t0 := time.Now()
		if _, err := v.Pull(ctx, nil); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		snap, err := v.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := snap.Get(ctx, uint64(pages/2)); err != nil {
			b.Fatal(err)
		}
		snap.Close()
		t2 := time.Now()
		if err := v.Hydrate(ctx, nil); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		pull, first, hydrate = pull+t1.Sub(t0), first+t2.Sub(t1), hydrate+t3.Sub(t2)
		b.StopTimer()
		st.Close()
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(pull.Milliseconds())/n, "pull-ms")
	b.ReportMetric(float64(first.Microseconds())/n/1000, "first-read-ms")
	b.ReportMetric(float64(hydrate.Milliseconds())/n, "hydrate-ms")
	b.ReportMetric(float64(mb)*n/hydrate.Seconds(), "hydrate-MB/s")
}
