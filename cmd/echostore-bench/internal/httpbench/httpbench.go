// Package httpbench measures serve's HTTP append beside Redis in the same
// run: records appended as JSON lines through POST /v1/streams/{q}/{s}
// (serve on loopback TCP with a token, one client, one request per batch) against
// the same records XADDed raw to Redis, pipelined one batch per round trip
// on one connection. It is `echostore-bench http`.
package httpbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/resp"
	"github.com/echostore/echostore/server"
)

// Config configures a run.
type Config struct {
	// Dir is the parent of the run's temporary data dir.
	Dir string
	// Records is how many records each run appends (default 100,000).
	Records int
	// Batch is the records per HTTP request and per pipelined round trip
	// (default 1,000).
	Batch int
	// Runs repeats each figure, interleaved; the median is reported
	// (default 5).
	Runs int
	// Command is the command line, for the report.
	Command string
	// Progress, if set, shows the steps.
	Progress *bench.Progress
}

// Steps is the number of progress steps of a run.
func Steps(cfg Config) int { return 1 + cfg.withDefaults().Runs }

func (c Config) withDefaults() Config {
	if c.Records <= 0 {
		c.Records = 100_000
	}
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.Runs <= 0 {
		c.Runs = 5
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	return c
}

// Goal is the least HTTP append ÷ pipelined raw XADD that the run checks.
const Goal = 0.5

// Run measures serve's HTTP append and its anchor.
func Run(ctx context.Context, cfg Config) (*bench.Report, error) {
	cfg = cfg.withDefaults()
	step := func(s string) {
		if cfg.Progress != nil {
			cfg.Progress.Step(s)
		}
	}
	step("start")
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		return nil, fmt.Errorf("bench http: a private redis-server: %w", err)
	}
	defer r.Stop()
	dir, err := os.MkdirTemp(cfg.Dir, "echostore-bench-http-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	// No beat and no background replication while it runs: the figure is
	// the append path's (the appended streams are cycled by no one).
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(tok)
	srv, err := server.Open(ctx, server.Config{Data: data, Redis: r.URL, Remote: "file://" + filepath.Join(dir, "remote"),
		Listen: "127.0.0.1:0", Token: token, Beat: time.Hour, ReplicateEvery: -1, AllowEviction: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, fmt.Errorf("bench http: serve: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx) }()
	defer func() { cancel(); <-done }()
	hc := &http.Client{}
	base := "http://" + srv.Addr().String()
	raw, err := net.Dial("tcp", r.Addr)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	rr := bufio.NewReaderSize(raw, 1<<20)

	// The same records both ways: three small fields each.
	lines := make([][]byte, cfg.Batch)
	cmds := make([][]byte, cfg.Batch)
	for i := range cfg.Batch {
		n := strconv.Itoa(i)
		lines[i] = []byte(`{"fields":{"kind":"order","n":"` + n + `","amount":"12.50"}}` + "\n")
		cmds[i] = []byte("*9\r\n$4\r\nXADD\r\n$%KEY%\r\n$1\r\n*\r\n$4\r\nkind\r\n$5\r\norder\r\n$1\r\nn\r\n$" +
			strconv.Itoa(len(n)) + "\r\n" + n + "\r\n$6\r\namount\r\n$5\r\n12.50\r\n")
	}
	body := bytes.Join(lines, nil)
	batches := cfg.Records / cfg.Batch
	viaHTTP := func(run int) (float64, error) {
		path := fmt.Sprintf("%s/v1/streams/bench/http%d", base, run)
		t0 := time.Now()
		for range batches {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
			if err != nil {
				return 0, err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := hc.Do(req)
			if err != nil {
				return 0, err
			}
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if err != nil {
				return 0, err
			}
			if res.StatusCode != http.StatusOK {
				return 0, fmt.Errorf("bench http: append: %s", res.Status)
			}
		}
		return float64(batches*cfg.Batch) / time.Since(t0).Seconds(), nil
	}
	viaXADD := func(run int) (float64, error) {
		key := fmt.Sprintf("emq:{bench}:stream:raw%d", run)
		var buf []byte
		for _, c := range cmds {
			buf = append(buf, bytes.Replace(c, []byte("$%KEY%\r\n"), []byte("$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n"), 1)...)
		}
		t0 := time.Now()
		for range batches {
			if _, err := raw.Write(buf); err != nil {
				return 0, err
			}
			for range cfg.Batch {
				rep, err := resp.ReadReply(rr, nil)
				if err != nil {
					return 0, err
				}
				if len(rep) > 0 && rep[0] == '-' {
					return 0, fmt.Errorf("bench http: XADD: %s", rep)
				}
			}
		}
		return float64(batches*cfg.Batch) / time.Since(t0).Seconds(), nil
	}
	var h, x []float64
	for i := range cfg.Runs { // interleaved
		step(fmt.Sprintf("appends %d/%d", i+1, cfg.Runs))
		v, err := viaHTTP(i)
		if err != nil {
			return nil, err
		}
		h = append(h, v)
		if v, err = viaXADD(i); err != nil {
			return nil, err
		}
		x = append(x, v)
	}
	rep := bench.NewReport("http", cfg.Command)
	note := fmt.Sprintf("%d records of 3 small fields per run, %d per HTTP request (JSON lines, loopback TCP) and per pipelined round trip (raw XADD *, one connection)", batches*cfg.Batch, cfg.Batch)
	rep.Add("pipelined raw XADD to Redis", "rec/s", x, note)
	rep.Add("HTTP append of JSON lines through serve", "rec/s", h, "")
	rep.Compare("HTTP append of JSON lines through serve", "pipelined raw XADD to Redis", Goal)
	rep.Finish()
	return rep, nil
}
