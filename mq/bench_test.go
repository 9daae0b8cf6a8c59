package mq

// Hot paths beside their raw Redis commands, from the same client in the
// same run (docs/BENCHMARKS.md has the figures):
//
//	go test -run='^$' -bench='Append|Read' -benchmem -count=5 ./mq/
//
// Every op is one record, so ns/op compare across rows. BenchmarkEnqueue's
// op is one job.

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
	"github.com/redis/rueidis"
)

func mqBenchClient(b *testing.B) *Client {
	b.Helper()
	return plain(b, Options{})
}

// xaddCmd is a raw XADD of fields with a server id.
func xaddCmd(c *Client, key string, fs []Field) rueidis.Completed {
	args := []string{"*"}
	for _, f := range fs {
		args = append(args, f.Name, f.Value)
	}
	return c.rdb.B().Arbitrary("XADD").Keys(key).Args(args...).Build()
}

func BenchmarkAppend(b *testing.B) {
	c := mqBenchClient(b)
	ctx := context.Background()
	fs := benchFields()
	key := func() (string, string) {
		q := fmt.Sprintf("bench.%d", benchKeySeq.Add(1))
		return q, StreamKey(mustRef(b, q, "s"))
	}
	b.Run("single/raw-xadd", func(b *testing.B) {
		_, k := key()
		for b.Loop() {
			if err := c.rdb.Do(ctx, xaddCmd(c, k, fs)).Error(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("single/append", func(b *testing.B) {
		q, _ := key()
		ref := mustRef(b, q, "s")
		for b.Loop() {
			if _, err := c.Append(ctx, ref, fs...); err != nil {
				b.Fatal(err)
			}
		}
	})
	// 64 records a round trip: 64 pipelined XADDs, or one AppendBatch
	// (one script call).
	b.Run("batch64/raw-xadd-pipelined", func(b *testing.B) {
		_, k := key()
		cmds := make(rueidis.Commands, 64)
		for done := 0; done < b.N; done += 64 {
			n := min(64, b.N-done)
			for i := range n {
				cmds[i] = xaddCmd(c, k, fs)
			}
			for _, r := range c.rdb.DoMulti(ctx, cmds[:n]...) {
				if err := r.Error(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("batch64/append-batch", func(b *testing.B) {
		q, _ := key()
		ref := mustRef(b, q, "s")
		batch := make([][]Field, 64)
		for i := range batch {
			batch[i] = fs
		}
		for done := 0; done < b.N; done += 64 {
			n := min(64, b.N-done)
			if _, err := c.AppendBatch(ctx, ref, batch[:n]); err != nil {
				b.Fatal(err)
			}
		}
	})
	// 16 concurrent callers on one stream: the client pipelines them.
	// Appends whose ids arrive out of mint order are re-minted.
	b.Run("parallel16/raw-xadd", func(b *testing.B) {
		_, k := key()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.rdb.Do(ctx, xaddCmd(c, k, fs)).Error(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("parallel16/append", func(b *testing.B) {
		q, _ := key()
		ref := mustRef(b, q, "s")
		before := c.Stats().Remints
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Append(ctx, ref, fs...); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(c.Stats().Remints-before)/float64(b.N), "remints/op")
	})
}

func BenchmarkRead(b *testing.B) {
	c := mqBenchClient(b)
	ctx := context.Background()
	q := fmt.Sprintf("bench.%d", benchKeySeq.Add(1))
	ref := mustRef(b, q, "s")
	const total = 8192
	batch := make([][]Field, total)
	for i := range batch {
		batch[i] = benchFields()
	}
	if _, err := c.AppendBatch(ctx, ref, batch); err != nil {
		b.Fatal(err)
	}
	key := StreamKey(ref)
	// One page of 512 per round trip; ns/op is per record.
	b.Run("page512/raw-xrange", func(b *testing.B) {
		start := "-"
		for done := 0; done < b.N; {
			msgs, err := c.rdb.Do(ctx, c.rdb.B().Xrange().Key(key).Start(start).End("+").Count(512).Build()).ToArray()
			if err != nil {
				b.Fatal(err)
			}
			done += len(msgs)
			start = "-"
			if len(msgs) == 512 {
				last, _ := msgs[511].ToArray()
				xid, _ := last[0].ToString()
				start = "(" + xid
			}
		}
	})
	b.Run("page512/cursor", func(b *testing.B) {
		cur, _ := c.NewCursor(ref, xid.Min, xid.Max, false)
		for done := 0; done < b.N; {
			if cur.Done() {
				cur, _ = c.NewCursor(ref, xid.Min, xid.Max, false)
			}
			p, err := cur.Next(ctx, 512)
			if err != nil {
				b.Fatal(err)
			}
			done += len(p.Records)
		}
	})
	b.Run("page512/read-json", func(b *testing.B) {
		// Read and render every record as the CLI prints it.
		var buf []byte
		for done := 0; done < b.N; {
			for rec, err := range c.Read(ctx, ref, xid.Min, xid.Max, min(b.N-done, total), false) {
				if err != nil {
					b.Fatal(err)
				}
				buf = AppendJSON(buf[:0], rec)
				done++
			}
		}
	})
}

// BenchmarkEnqueue: a batch of 64 jobs, as the accept tier dispatches a
// committed batch, through one EnqueueBatch (one script call), through 64
// concurrent Enqueue calls (a goroutine each; the client pipelines them),
// or through 64 Enqueue calls one after another. Every op is one job;
// cpu-ns/op is the CPU time (user and system) of this process, the client,
// per job: what a batch costs the rest of a node, redis-server aside;
// redis-us/op is Redis's own time per job (INFO commandstats).
//
//	go test -run='^$' -bench=Enqueue -benchmem -count=5 ./mq/
func BenchmarkEnqueue(b *testing.B) {
	c := mqBenchClient(b)
	ctx := context.Background()
	batch := make([]Job, 64)
	for i := range batch {
		batch[i] = Job{Fields: benchFields()}
	}
	run := func(b *testing.B, send func(q names.Queue, jobs []Job)) {
		q := mustQueue(b, fmt.Sprintf("bench.%d", benchKeySeq.Add(1)))
		cpu, redis := cpuTime(), redisUsec(b, c)
		for done := 0; done < b.N; done += len(batch) {
			send(q, batch[:min(len(batch), b.N-done)])
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric((redisUsec(b, c)-redis)/float64(b.N), "redis-us/op")
	}
	b.Run("batch64/enqueue-batch", func(b *testing.B) {
		run(b, func(q names.Queue, jobs []Job) {
			if _, err := c.EnqueueBatch(ctx, q, jobs); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("batch64/enqueue-concurrent", func(b *testing.B) {
		run(b, func(q names.Queue, jobs []Job) {
			var wg sync.WaitGroup
			for _, job := range jobs {
				wg.Go(func() {
					if _, err := c.Enqueue(ctx, q, job); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		})
	})
	b.Run("batch64/enqueue-sequential", func(b *testing.B) {
		run(b, func(q names.Queue, jobs []Job) {
			for _, job := range jobs {
				if _, err := c.Enqueue(ctx, q, job); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// cpuTime returns the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
