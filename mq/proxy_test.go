package mq

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// dropProxy forwards TCP connections to a Redis server, but for the next
// `drops` script calls (EVALSHA or EVAL) it lets the server execute the
// call, swallows the reply and closes the client's connection: the client
// sees a lost reply for a command that did run.
type dropProxy struct {
	Addr    string
	target  string
	ln      net.Listener
	drops   atomic.Int64
	dropped atomic.Int64
	wg      sync.WaitGroup
}

func startDropProxy(t testing.TB, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *dropProxy) serve() {
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
		var dropNext atomic.Bool
		closeBoth := func() {
			client.Close()
			server.Close()
		}
		p.wg.Add(2)
		go func() { // client → server
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					if bytes.Contains(buf[:n], []byte("EVAL")) && p.drops.Add(-1) >= 0 {
						dropNext.Store(true)
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
				if n > 0 && dropNext.Load() {
					p.dropped.Add(1)
					return // the reply is lost; closeBoth ends the connection
				}
				if n > 0 {
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if err != io.EOF {
						return
					}
					return
				}
			}
		}()
	}
}
