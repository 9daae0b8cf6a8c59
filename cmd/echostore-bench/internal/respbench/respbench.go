// Package respbench measures the RESP front (package resp) beside Redis
// in the same run: XRANGE and XREAD from 0 of an archived stream through
// the front against the same records kept live and read from Redis
// directly, and the latency GET and XADD gain by passing through the
// front. It is `echostore-bench resp`.
package respbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/resp"
)

// Config configures a run.
type Config struct {
	// Dir is the parent of the run's temporary data dir.
	Dir string
	// Records is the history of the read figures (default 100,000).
	Records int
	// Live is how many of them stay live in the archived stream (default
	// 1,000: 1 %).
	Live int
	// Runs repeats each figure; the median is reported (default 9).
	Runs int
	// Ops is the commands timed per latency run (default 5,000).
	Ops int
	// Command is the command line, for the report.
	Command string
	// Progress, if set, shows the steps.
	Progress *bench.Progress
}

// Steps is the number of progress steps of a run.
func Steps(cfg Config) int { return 2 + 2*cfg.withDefaults().Runs }

func (c Config) withDefaults() Config {
	if c.Records <= 0 {
		c.Records = 100_000
	}
	if c.Live <= 0 {
		c.Live = 1000
	}
	if c.Runs <= 0 {
		c.Runs = 9
	}
	if c.Ops <= 0 {
		c.Ops = 5000
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	return c
}

// conn is a raw RESP connection that reads whole replies.
type conn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

func dial(addr string) (*conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, r: bufio.NewReaderSize(c, 1<<20)}, nil
}

// do sends a command and reads its reply; an error reply is an error.
func (c *conn) do(args ...string) ([]byte, error) {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	if _, err := c.c.Write(b); err != nil {
		return nil, err
	}
	rep, err := resp.ReadReply(c.r, c.buf[:0])
	if err != nil {
		return nil, err
	}
	c.buf = rep[:0]
	if len(rep) > 0 && rep[0] == '-' {
		return nil, fmt.Errorf("%s: %s", args[0], rep)
	}
	return rep, nil
}

// skip reads one reply and discards it, returning its size: the
// measuring client parses as little as it can, so that the figures are
// the servers'.
func skip(r *bufio.Reader) (int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	size := len(line)
	if len(line) < 3 {
		return 0, fmt.Errorf("bad reply line %q", line)
	}
	kind := line[0]
	n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
	switch kind {
	case '$', '=', '!':
		if n < 0 {
			return size, nil
		}
		if _, err := r.Discard(n + 2); err != nil {
			return 0, err
		}
		return size + n + 2, nil
	case '*', '>', '~', '%':
		if kind == '%' {
			n *= 2
		}
		for range max(n, 0) {
			m, err := skip(r)
			if err != nil {
				return 0, err
			}
			size += m
		}
		return size, nil
	case '-':
		return 0, fmt.Errorf("error reply %q", line)
	}
	return size, nil
}

// timed sends a command and skips its reply; the reply's size.
func (c *conn) timed(args ...string) (int, error) {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	if _, err := c.c.Write(b); err != nil {
		return 0, err
	}
	return skip(c.r)
}

// Run runs the suite.
func Run(ctx context.Context, cfg Config) (*bench.Report, error) {
	cfg = cfg.withDefaults()
	step := func(s string) {
		if cfg.Progress != nil {
			cfg.Progress.Step(s)
		}
	}
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		return nil, fmt.Errorf("bench resp: a private redis-server: %w", err)
	}
	defer r.Stop()
	dir, err := os.MkdirTemp(cfg.Dir, "echostore-bench-resp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: r.URL, Logger: quiet, AllowEviction: true})
	if err != nil {
		return nil, err
	}
	defer node.Close(context.WithoutCancel(ctx))
	front, err := resp.New(resp.Config{Upstream: resp.Upstream{Addr: r.Addr}, Archive: node,
		Lookup: node, Logger: quiet})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go front.Serve(ctx, ln)
	defer front.Close()

	ref, err := names.ParseStreamRef("bench", "archived")
	if err != nil {
		return nil, err
	}
	archived, live := "emq:{bench}:stream:archived", "emq:{bench}:stream:live"
	step("fill")
	direct, err := dial(r.Addr)
	if err != nil {
		return nil, err
	}
	if err := fill(direct, archived, live, cfg.Records); err != nil {
		return nil, err
	}
	step("cycle")
	if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: int64(cfg.Live)}}); err != nil {
		return nil, err
	}
	via, err := dial(ln.Addr().String())
	if err != nil {
		return nil, err
	}
	rep := bench.NewReport("resp", cfg.Command)
	n := float64(cfg.Records)
	rate := func(c *conn, args ...string) func(int) (float64, error) {
		return func(int) (float64, error) {
			t0 := time.Now()
			size, err := c.timed(args...)
			if err != nil {
				return 0, err
			}
			if size < 100 {
				return 0, fmt.Errorf("%s: a short reply", args[0])
			}
			return n / time.Since(t0).Seconds(), nil
		}
	}
	var frontX, redisX, frontR, redisR []float64
	for i := range cfg.Runs { // interleaved: the figure and its anchor share the machine's state
		step(fmt.Sprintf("reads %d/%d", i+1, cfg.Runs))
		for _, m := range []struct {
			dst *[]float64
			f   func(int) (float64, error)
		}{
			{&frontX, rate(via, "XRANGE", archived, "-", "+")},
			{&redisX, rate(direct, "XRANGE", live, "-", "+")},
			{&frontR, rate(via, "XREAD", "STREAMS", archived, "0")},
			{&redisR, rate(direct, "XREAD", "STREAMS", live, "0")},
		} {
			v, err := m.f(i)
			if err != nil {
				return nil, err
			}
			*m.dst = append(*m.dst, v)
		}
	}
	note := fmt.Sprintf("%d records of 3 small fields, %d of them live (the rest archived by one cycle); one command, the whole reply read raw", cfg.Records, cfg.Live)
	rep.Add("Redis XRANGE - + of the records kept live", "rec/s", redisX, note)
	rep.Add("front XRANGE - + of the archived stream", "rec/s", frontX, "")
	rep.Compare("front XRANGE - + of the archived stream", "Redis XRANGE - + of the records kept live", 1.0)
	rep.Add("Redis XREAD STREAMS from 0, records kept live", "rec/s", redisR, "")
	rep.Add("front XREAD STREAMS from 0, archived stream", "rec/s", frontR, "")
	rep.Compare("front XREAD STREAMS from 0, archived stream", "Redis XREAD STREAMS from 0, records kept live", 1.0)

	lat := map[string][][2]float64{} // name → per run (p50, p99) in µs
	for i := range cfg.Runs {
		step(fmt.Sprintf("pass-through %d/%d", i+1, cfg.Runs))
		for _, m := range []struct {
			name string
			c    *conn
			args []string
		}{
			{"GET direct", direct, []string{"GET", "bench:k"}},
			{"GET front", via, []string{"GET", "bench:k"}},
			{"XADD direct", direct, []string{"XADD", "bench:plain", "MAXLEN", "~", "1000", "*", "f", "v"}},
			{"XADD front", via, []string{"XADD", "bench:plain", "MAXLEN", "~", "1000", "*", "f", "v"}},
		} {
			p50, p99, err := latency(m.c, cfg.Ops, m.args)
			if err != nil {
				return nil, err
			}
			lat[m.name] = append(lat[m.name], [2]float64{p50, p99})
		}
	}
	for _, cmd := range []string{"GET", "XADD"} {
		d, f := lat[cmd+" direct"], lat[cmd+" front"]
		col := func(x [][2]float64, k int) []float64 {
			out := make([]float64, len(x))
			for i := range x {
				out[i] = x[i][k]
			}
			return out
		}
		over := make([]float64, len(d))
		over99 := make([]float64, len(d))
		for i := range d {
			over[i], over99[i] = f[i][0]-d[i][0], f[i][1]-d[i][1]
		}
		ops := fmt.Sprintf("%d sequential commands per run on one connection; overhead = through the front − direct, each run", cfg.Ops)
		rep.Add(cmd+" p50, Redis direct", "µs", col(d, 0), ops)
		rep.Add(cmd+" p50, through the front", "µs", col(f, 0), "")
		rep.Add(cmd+" p50 overhead of the front", "µs", over, "")
		rep.Goal(cmd+" p50 overhead of the front", 100, true)
		rep.Add(cmd+" p99, Redis direct", "µs", col(d, 1), "")
		rep.Add(cmd+" p99, through the front", "µs", col(f, 1), "")
		rep.Add(cmd+" p99 overhead of the front", "µs", over99, "")
	}
	rep.Finish()
	return rep, nil
}

// fill XADDs n records to both keys with the same ids, pipelined.
func fill(c *conn, a, b string, n int) error {
	const batch = 1000
	ms := time.Now().UnixMilli() - int64(n)
	for done := 0; done < n; done += batch {
		var buf []byte
		k := min(batch, n-done)
		for i := range k {
			id := strconv.FormatInt(ms+int64(done+i), 10) + "-0"
			num := strconv.Itoa(done + i)
			for _, key := range []string{a, b} {
				buf = append(buf, "*9\r\n$4\r\nXADD\r\n$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n$"+strconv.Itoa(len(id))+"\r\n"+id+
					"\r\n$4\r\nuser\r\n$6\r\nu-1234\r\n$4\r\nkind\r\n$5\r\nclick\r\n$1\r\nn\r\n$"+strconv.Itoa(len(num))+"\r\n"+num+"\r\n"...)
			}
		}
		if _, err := c.c.Write(buf); err != nil {
			return err
		}
		for range 2 * k {
			rep, err := resp.ReadReply(c.r, nil)
			if err != nil {
				return err
			}
			if rep[0] == '-' {
				return fmt.Errorf("XADD: %s", rep)
			}
		}
	}
	return nil
}

// latency times ops sequential commands; p50 and p99 in µs.
func latency(c *conn, ops int, args []string) (float64, float64, error) {
	ds := make([]time.Duration, ops)
	for i := range ops {
		t0 := time.Now()
		if _, err := c.do(args...); err != nil {
			return 0, 0, err
		}
		ds[i] = time.Since(t0)
	}
	slices.Sort(ds)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return us(bench.Percentile(ds, 50)), us(bench.Percentile(ds, 99)), nil
}
