package testserver

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// ScriptProxy stands between a Redis client and a redis-server and plays
// faults at script calls: any client write holding "EVAL" (EVAL and
// EVALSHA) or "EXEC" (a transaction, such as mq's append of a chunk as
// MULTI … EXEC: its reply is EXEC's, and a drop loses it whole):
//
//   - DropReplies(n): the next n script calls reach the server and run, but
//     their replies are lost and the client's connection is closed, as when
//     the server or the network dies right after executing them;
//   - AnswerLoading(n): once no drop is pending, the next n script calls are
//     answered "-LOADING …" without reaching the server, as a restarted
//     server still loading its AOF answers.
//
// Everything else is forwarded unchanged. It is an in-memory fake of those
// two faults on top of a real server, for unit-level fault injection.
type ScriptProxy struct {
	// Addr is the proxy's loopback address (host:port).
	Addr    string
	target  string
	ln      net.Listener
	drops   atomic.Int64
	loading atomic.Int64
	dropped atomic.Int64
	onDrop  atomic.Pointer[func()]
	wg      sync.WaitGroup
}

// StartScriptProxy listens on a free loopback port and forwards each
// connection to target; the test's cleanup stops it.
func StartScriptProxy(t testing.TB, target string) *ScriptProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ScriptProxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

// DropReplies makes the next n script calls lose their replies.
func (p *ScriptProxy) DropReplies(n int64) { p.drops.Store(n) }

// AnswerLoading makes the next n script calls after the pending drops be
// answered with LOADING.
func (p *ScriptProxy) AnswerLoading(n int64) { p.loading.Store(n) }

// OnDrop makes f run each time a reply is dropped, after the script ran and
// before the client's connection closes: the client retries only after f
// returns, so f plays what happens to the server in between (a trim, a
// restart).
func (p *ScriptProxy) OnDrop(f func()) { p.onDrop.Store(&f) }

// Dropped returns how many replies were lost so far.
func (p *ScriptProxy) Dropped() int64 { return p.dropped.Load() }

// Pending returns the drops and LOADING answers not yet played.
func (p *ScriptProxy) Pending() (drops, loading int64) { return p.drops.Load(), p.loading.Load() }

// loadingCommand is a script call whose reply is the error a server
// still loading its dataset gives; the commands it stands in for do not run.
const loadingCommand = "*3\r\n$4\r\nEVAL\r\n$74\r\nreturn redis.error_reply('LOADING Redis is loading the dataset in memory')\r\n$1\r\n0\r\n"

// take decrements c if it is positive and reports whether it did.
func take(c *atomic.Int64) bool {
	for {
		n := c.Load()
		if n <= 0 {
			return false
		}
		if c.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (p *ScriptProxy) serve() {
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
		closeBoth := func() { client.Close(); server.Close() }
		p.wg.Add(2)
		go func() { // client → server
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					script := bytes.Contains(buf[:n], []byte("EVAL")) || bytes.Contains(buf[:n], []byte("EXEC"))
					// One LOADING per command of the read: a client
					// pipelines, and answering one for several commands
					// would shift every later reply on the connection.
					cmds := countCommands(buf[:n])
					if script && cmds > 0 && !dropReply.Load() && p.drops.Load() <= 0 && take(&p.loading) {
						// The server itself answers LOADING, in its place
						// among the replies to the commands still in flight
						// on this connection (answered here, it would
						// overtake them).
						if _, werr := server.Write(bytes.Repeat([]byte(loadingCommand), cmds)); werr != nil {
							return
						}
						continue
					}
					if script && take(&p.drops) {
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
					p.dropped.Add(1)
					if f := p.onDrop.Load(); f != nil {
						(*f)()
					}
					return // the reply is lost with the connection
				}
				if n > 0 {
					_, werr := client.Write(buf[:n])
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

// countCommands returns how many whole RESP commands (arrays of bulk
// strings, as clients send them) b holds, or 0 if b is not exactly such a
// sequence (a command split across reads): then nothing is injected.
func countCommands(b []byte) int {
	n := 0
	for len(b) > 0 {
		if b[0] != '*' {
			return 0
		}
		items, rest, ok := respLen(b[1:])
		if !ok {
			return 0
		}
		b = rest
		for range items {
			if len(b) == 0 || b[0] != '$' {
				return 0
			}
			size, rest, ok := respLen(b[1:])
			if !ok || len(rest) < size+2 {
				return 0
			}
			b = rest[size+2:]
		}
		n++
	}
	return n
}

// respLen parses "<digits>\r\n" at the start of b.
func respLen(b []byte) (int, []byte, bool) {
	i := bytes.Index(b, []byte("\r\n"))
	if i <= 0 {
		return 0, nil, false
	}
	v, err := strconv.Atoi(string(b[:i]))
	if err != nil || v < 0 {
		return 0, nil, false
	}
	return v, b[i+2:], true
}
