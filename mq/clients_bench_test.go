package mq

// The client comparison behind the choice of rueidis or go-redis (see
// docs/BENCHMARKS.md): both clients against the same redis-server, on this
// package's hot paths, decoding replies the same way (raw, order-keeping).
//
//	go test -run='^$' -bench=Clients -count=5 ./mq/

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/echostore/echostore/brand"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// benchClient is the part of a client the comparison exercises.
type benchClient interface {
	// script sends one EVALSHA of scriptAppend per args, pipelined.
	script(ctx context.Context, key string, args [][]string) error
	// xrange reads one page and decodes it into records.
	xrange(ctx context.Context, key, start string, count int) ([]Record, error)
	close()
}

type goredisBench struct {
	c   *goredis.Client
	scr *goredis.Script
}

func (g *goredisBench) script(ctx context.Context, key string, args [][]string) error {
	cmds, err := g.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, a := range args {
			ia := make([]any, len(a))
			for i, s := range a {
				ia[i] = s
			}
			g.scr.EvalSha(ctx, p, []string{key}, ia...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range cmds {
		v, err := c.(*goredis.Cmd).Slice()
		if err != nil {
			return err
		}
		if v[0] != "OK" {
			return fmt.Errorf("append: %v", v)
		}
	}
	return nil
}

func (g *goredisBench) xrange(ctx context.Context, key, start string, count int) ([]Record, error) {
	v, err := g.c.Do(ctx, "XRANGE", key, start, "+", "COUNT", count).Slice()
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(v))
	for _, e := range v {
		ev := e.([]any)
		id, err := brand.ParseRedisID(ev[0].(string))
		if err != nil {
			return nil, err
		}
		fv := ev[1].([]any)
		fields := make([]Field, len(fv)/2)
		for i := range fields {
			fields[i] = Field{Name: fv[2*i].(string), Value: fv[2*i+1].(string)}
		}
		out = append(out, Record{ID: id.XID(), Fields: fields})
	}
	return out, nil
}

func (g *goredisBench) close() { g.c.Close() }

type rueidisBench struct {
	c   rueidis.Client
	sha string
}

func (r *rueidisBench) script(ctx context.Context, key string, args [][]string) error {
	cmds := make(rueidis.Commands, len(args))
	for i, a := range args {
		cmds[i] = r.c.B().Evalsha().Sha1(r.sha).Numkeys(1).Key(key).Arg(a...).Build()
	}
	for _, res := range r.c.DoMulti(ctx, cmds...) {
		v, err := res.AsStrSlice()
		if err != nil {
			return err
		}
		if v[0] != "OK" {
			return fmt.Errorf("append: %v", v)
		}
	}
	return nil
}

func (r *rueidisBench) xrange(ctx context.Context, key, start string, count int) ([]Record, error) {
	v, err := r.c.Do(ctx, r.c.B().Xrange().Key(key).Start(start).End("+").Count(int64(count)).Build()).ToArray()
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(v))
	for _, e := range v {
		ev, err := e.ToArray()
		if err != nil {
			return nil, err
		}
		xid, err := ev[0].ToString()
		if err != nil {
			return nil, err
		}
		id, err := brand.ParseRedisID(xid)
		if err != nil {
			return nil, err
		}
		fv, err := ev[1].ToArray()
		if err != nil {
			return nil, err
		}
		fields := make([]Field, len(fv)/2)
		for i := range fields {
			n, _ := fv[2*i].ToString()
			val, _ := fv[2*i+1].ToString()
			fields[i] = Field{Name: n, Value: val}
		}
		out = append(out, Record{ID: id.XID(), Fields: fields})
	}
	return out, nil
}

func (r *rueidisBench) close() { r.c.Close() }

var benchKeySeq atomic.Int64

func benchFields() []Field {
	return []Field{
		{Name: "type", Value: "order.created"},
		{Name: "order", Value: "ord_0001234567"},
		{Name: "amount", Value: "1299"},
		{Name: "note", Value: "a short, ordinary payload of a few dozen bytes"},
	}
}

// benchArgs returns the scriptAppend arguments of one chunk of records
// with the same fields.
func benchArgs(ids []brand.ID, fields []Field) []string {
	recs := make([][]Field, len(ids))
	for i := range recs {
		recs[i] = fields
	}
	return appendArgs(false, ids, recs)
}

func BenchmarkClients(b *testing.B) {
	r := servers.Redis(b)
	ctx := context.Background()
	makers := []struct {
		name string
		make func() (benchClient, error)
	}{
		{"goredis", func() (benchClient, error) {
			c := goredis.NewClient(&goredis.Options{Addr: r.Addr})
			s := goredis.NewScript(scriptAppend)
			if err := s.Load(ctx, c).Err(); err != nil {
				return nil, err
			}
			return &goredisBench{c: c, scr: s}, nil
		}},
		{"rueidis", func() (benchClient, error) {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
			if err != nil {
				return nil, err
			}
			sha, err := c.Do(ctx, c.B().ScriptLoad().Script(scriptAppend).Build()).ToString()
			if err != nil {
				return nil, err
			}
			return &rueidisBench{c: c, sha: sha}, nil
		}},
	}
	fields := benchFields()
	for _, mk := range makers {
		c, err := mk.make()
		if err != nil {
			b.Fatal(err)
		}
		// Pipelined single-record appends: 64 script calls per round trip.
		b.Run("append-pipelined64/"+mk.name, func(b *testing.B) {
			key := fmt.Sprintf("bench:clients:%d", benchKeySeq.Add(1))
			m, _ := brand.NewMinter(0)
			for done := 0; done < b.N; {
				n := min(64, b.N-done)
				args := make([][]string, n)
				for i := range args {
					id, _ := m.Mint()
					args[i] = benchArgs([]brand.ID{id}, fields)
				}
				if err := c.script(ctx, key, args); err != nil {
					b.Fatal(err)
				}
				done += n
			}
		})
		// Single appends from 8 goroutines per core, one stream each: the
		// client pipelines what it can (rueidis does so on its own).
		b.Run("append-parallel16/"+mk.name, func(b *testing.B) {
			b.SetParallelism(8) // 16 callers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench:clients:%d", benchKeySeq.Add(1))
				m, _ := brand.NewMinter(0)
				for pb.Next() {
					id, _ := m.Mint()
					if err := c.script(ctx, key, [][]string{benchArgs([]brand.ID{id}, fields)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		// Chunked appends: 64 records in one script call.
		b.Run("append-chunk64/"+mk.name, func(b *testing.B) {
			key := fmt.Sprintf("bench:clients:%d", benchKeySeq.Add(1))
			m, _ := brand.NewMinter(0)
			for done := 0; done < b.N; {
				n := min(64, b.N-done)
				ids := make([]brand.ID, n)
				for i := range ids {
					ids[i], _ = m.Mint()
				}
				if err := c.script(ctx, key, [][]string{benchArgs(ids, fields)}); err != nil {
					b.Fatal(err)
				}
				done += n
			}
		})
		// XRANGE pages of 512 records, decoded.
		b.Run("xrange512/"+mk.name, func(b *testing.B) {
			key := fmt.Sprintf("bench:clients:%d", benchKeySeq.Add(1))
			m, _ := brand.NewMinter(0)
			for i := 0; i < 4096/64; i++ {
				ids := make([]brand.ID, 64)
				for j := range ids {
					ids[j], _ = m.Mint()
				}
				if err := c.script(ctx, key, [][]string{benchArgs(ids, fields)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			start := "-"
			for i := 0; i < b.N; i++ {
				recs, err := c.xrange(ctx, key, start, 512)
				if err != nil {
					b.Fatal(err)
				}
				if len(recs) < 512 {
					start = "-"
					continue
				}
				start = "(" + recs[len(recs)-1].ID.String()
			}
		})
		c.close()
	}
}
