package mq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// redisUsec returns the total usec Redis spent in every command so far
// (INFO commandstats).
func redisUsec(b *testing.B, c *Client) float64 {
	s, err := c.rdb.Do(context.Background(), c.rdb.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(s, "\n") {
		i := strings.Index(line, "usec=")
		if i < 0 || strings.HasPrefix(line, "cmdstat_info") || strings.HasPrefix(line, "cmdstat_config") {
			continue
		}
		v := line[i+5:]
		v = v[:strings.IndexByte(v, ',')]
		f, _ := strconv.ParseFloat(v, 64)
		total += f
	}
	return total
}

// BenchmarkChunkPath compares one chunk of 256 (16, 1) records appended through
// the append script (ScriptAppend), as mq's transaction (appendTx), as a
// bare WATCH, XINFO, SISMEMBER then MULTI/XADD…/EXEC on a dedicated
// connection (the shape of a WATCH-based append, without its checks), and
// as pipelined raw XADD *. redis-us/rec is Redis's own time per record
// (INFO commandstats, every command but INFO and CONFIG; EXEC's time
// includes its XADDs, which are counted again on their own: read the
// per-command lines of INFO commandstats for the split).
//
//	go test -run='^$' -bench=ChunkPath -count=3 ./mq/
func BenchmarkChunkPath(b *testing.B) {
	for _, n := range []int{256, 16, 1} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchChunkPath(b, n) })
	}
}

func benchChunkPath(b *testing.B, n int) {
	c := mqBenchClient(b)
	sc := plain(b, Options{ScriptAppend: true})
	ctx := context.Background()
	fs := benchFields()
	recs := make([][]Field, n)
	for i := range recs {
		recs[i] = fs
	}
	run := func(b *testing.B, f func(q string)) {
		q := fmt.Sprintf("bench.%d", benchKeySeq.Add(1))
		c.rdb.Do(ctx, c.rdb.B().ConfigResetstat().Build())
		start := redisUsec(b, c)
		recsDone := 0
		for b.Loop() {
			f(q)
			recsDone += n
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(recsDone), "ns/rec")
		b.ReportMetric((redisUsec(b, c)-start)/float64(recsDone), "redis-us/rec")
	}
	b.Run("script", func(b *testing.B) {
		run(b, func(q string) {
			if _, err := sc.AppendBatch(ctx, mustRef(b, q, "s"), recs); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("tx", func(b *testing.B) {
		run(b, func(q string) {
			if _, err := c.AppendBatch(ctx, mustRef(b, q, "s"), recs); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("watch-multi", func(b *testing.B) {
		run(b, func(q string) {
			ref := mustRef(b, q, "s")
			key := StreamKey(ref)
			set, member := ArchivedRegistry(ref)
			ids := make([]string, n)
			err := c.rdb.Dedicated(func(d rueidis.DedicatedClient) error {
				rs := d.DoMulti(ctx, d.B().Watch().Key(key, set).Build(),
					d.B().XinfoStream().Key(key).Build(),
					d.B().Sismember().Key(set).Member(member).Build())
				for i := range ids {
					id, _ := c.minter.Mint()
					ids[i] = id.RedisID()
				}
				_ = rs
				cmds := make(rueidis.Commands, 0, n+2)
				cmds = append(cmds, d.B().Multi().Build())
				for i, r := range recs {
					x := d.B().Xadd().Key(key).Id(ids[i]).FieldValue()
					for _, f := range r {
						x = x.FieldValue(f.Name, f.Value)
					}
					cmds = append(cmds, x.Build())
				}
				cmds = append(cmds, d.B().Exec().Build())
				for _, r := range d.DoMulti(ctx, cmds...) {
					if err := r.Error(); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("raw-xadd", func(b *testing.B) {
		run(b, func(q string) {
			k := StreamKey(mustRef(b, q, "s"))
			cmds := make(rueidis.Commands, n)
			for i := range cmds {
				cmds[i] = xaddCmd(c, k, fs)
			}
			for _, r := range c.rdb.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
