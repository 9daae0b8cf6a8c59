package faults

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

// restartProxy stands between a client and redis-server and plays a server
// restart at a chosen script call: the call runs, its reply is lost and the
// connection closed (the server died after executing it), and the next
// `loading` script calls are answered with LOADING (the restarted server
// is loading its AOF) without reaching the server.
type restartProxy struct {
	Addr    string
	target  string
	ln      net.Listener
	drops   atomic.Int64
	loading atomic.Int64
	wg      sync.WaitGroup
}

func startRestartProxy(t *testing.T, target string) *restartProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &restartProxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *restartProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		var dropReply atomic.Bool
		var mu sync.Mutex // one writer to the client at a time
		closeBoth := func() { client.Close(); server.Close() }
		p.wg.Add(2)
		go func() { // client → server
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					script := bytes.Contains(buf[:n], []byte("EVAL"))
					if script && !dropReply.Load() && p.drops.Load() == 0 && p.loading.Add(-1) >= 0 {
						mu.Lock()
						_, werr := client.Write([]byte("-LOADING Redis is loading the dataset in memory\r\n"))
						mu.Unlock()
						if werr != nil {
							return
						}
						continue
					}
					if script && p.drops.Add(-1) >= 0 {
						dropReply.Store(true)
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server → client
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && dropReply.Load() {
					return // the reply is lost with the connection
				}
				if n > 0 {
					mu.Lock()
					_, werr := client.Write(buf[:n])
					mu.Unlock()
					if werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// TestAppendReplyLostThenLoading: redis-server dies right after running an
// append (the reply is lost) and the client's retry meets the restarted
// server still loading its AOF. The records are in the stream, so the
// append must not be reported as failed: it succeeds, or its error lists
// them as of unknown outcome. (Found by the soak: the append was reported
// failed with nothing unknown.)
func TestAppendReplyLostThenLoading(t *testing.T) {
	ctx := t.Context()
	red := servers.Redis(t)
	proxy := startRestartProxy(t, red.Addr)
	c := connect(t, "redis://"+proxy.Addr+"/0")
	direct := connect(t, red.URL)
	q, s := queueName(t), "s"
	if _, err := appendBatch(ctx, c, q, s, 3, 8); err != nil { // scripts loaded, connection warm
		t.Fatal(err)
	}
	proxy.drops.Store(1)
	proxy.loading.Store(1)
	ids, err := appendBatch(ctx, c, q, s, 5, 8)
	var in []brand.ID
	for r, rerr := range direct.Read(ctx, q, s, 0, brand.Max, 0, false) {
		if rerr != nil {
			t.Fatal(rerr)
		}
		in = append(in, r.ID)
	}
	if len(in) != 8 {
		t.Fatalf("the stream holds %d records, want 8 (the dropped call ran): %v", len(in), err)
	}
	landed := in[3:]
	var ae *mq.AppendError
	switch {
	case err == nil:
		if !slices.Equal(ids, landed) {
			t.Fatalf("append acknowledged %v, the stream holds %v", ids, landed)
		}
	case errors.As(err, &ae):
		if !slices.Equal(ae.Unknown, landed) || len(ae.Appended) != 0 {
			t.Fatalf("append error says appended %v, unknown %v; the stream holds %v: %v", ae.Appended, ae.Unknown, landed, err)
		}
	default:
		t.Fatalf("append failed without saying which records may be in the stream, and they are: %v", err)
	}
	if proxy.drops.Load() > 0 || proxy.loading.Load() > 0 {
		t.Fatalf("the proxy did not play the restart (drops %d, loading %d left)", proxy.drops.Load(), proxy.loading.Load())
	}
	t.Logf("append after a lost reply and LOADING: %v", err)
}
