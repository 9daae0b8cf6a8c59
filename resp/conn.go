package resp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// conn is one client connection and its dedicated upstream connection.
type conn struct {
	s  *Server
	nc net.Conn
	cr *clientReader
	rd *redcon.Reader
	w  *bufio.Writer // to the client; wmu guards it in relay mode
	// wmu orders writes to the client between the command loop and the
	// relay goroutine.
	wmu sync.Mutex

	up net.Conn
	ur *bufio.Reader
	uw *bufio.Writer

	id      Identity
	authed  bool
	proto   int  // 2 or 3
	db      int  // the database the upstream connection has selected
	multi   bool // inside MULTI (as Redis confirmed it)
	doomed  bool // inside MULTI, the front refused a command: EXEC aborts
	pending []post
	buf     []byte // scratch for replies
	big     []byte // the buffer of the replies the front builds (replyBuf)
	relay   *relay // non-nil while pub/sub messages flow (relay mode)

	closeOnce sync.Once
}

// post is what a relayed command's reply changes in the connection's
// state, applied when the reply arrives.
type post struct {
	kind byte // 0 none, 's' SELECT, 'm' MULTI, 'e' EXEC or DISCARD, 'x' EXEC of a doomed MULTI (sent as DISCARD), 'h' HELLO
	n    int
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, proto: 2, db: s.cfg.Upstream.DB}
	c.cr = &clientReader{c: nc, budget: MaxUnauthenticatedInput}
	c.rd = redcon.NewReader(c.cr)
	c.w = bufio.NewWriterSize(nc, 64<<10)
	if s.cfg.Authenticate == nil {
		c.id, c.authed = Identity{Name: "anyone", Scope: ScopeAdmin}, true
		c.cr.budget = -1
	}
	return c
}

// close closes both connections (once).
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.nc.Close()
		if c.up != nil {
			c.up.Close()
		}
	})
}

// serve reads the client's commands until it goes, the upstream fails or
// ctx ends.
func (c *conn) serve(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	defer c.close()
	up, ur, err := c.s.cfg.Upstream.dial(ctx)
	if err != nil {
		c.s.log.Warn("resp: no upstream connection for a client", "client", c.nc.RemoteAddr().String(), "err", err)
		c.w.Write(appendError(nil, "ERR echostore: Redis is unavailable"))
		c.w.Flush()
		return
	}
	c.up, c.ur, c.uw = up, ur, bufio.NewWriterSize(up, 64<<10)
	for {
		cmds, err := c.rd.ReadCommands()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				var ne net.Error
				if !errors.As(err, &ne) {
					c.writeLocal(appendError(nil, "ERR Protocol error: "+err.Error()))
					c.flushClient()
				}
			}
			return
		}
		for _, cmd := range cmds {
			if len(cmd.Args) == 0 {
				continue
			}
			var ok bool
			if c.relay != nil {
				ok = c.relayCommand(ctx, cmd)
			} else {
				ok = c.command(ctx, cmd)
			}
			if !ok {
				c.drain()
				c.flushClient()
				return
			}
		}
		if c.relay == nil {
			if err := c.drain(); err != nil {
				return
			}
		} else if err := c.uw.Flush(); err != nil {
			return
		}
		if err := c.flushClient(); err != nil {
			return
		}
	}
}

// refuse writes a refusal the front made (after the replies still due,
// which the caller drained: c.multi is Redis's): inside MULTI it dooms the
// transaction, as Redis's own refusal of a queued command does.
func (c *conn) refuse(rep []byte) {
	if c.multi {
		c.doomed = true
	}
	c.writeLocal(rep)
}

// writeLocal writes a reply the front made, after the replies still due.
func (c *conn) writeLocal(b []byte) {
	c.wmu.Lock()
	c.w.Write(b)
	c.wmu.Unlock()
}

func (c *conn) flushClient() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.Flush()
}

// forward relays a command's bytes unchanged; its reply is copied by the
// next drain.
func (c *conn) forward(raw []byte, p post) error {
	c.pending = append(c.pending, p)
	_, err := c.uw.Write(raw)
	return err
}

// drain sends the relayed commands and copies their replies, in order, to
// the client, applying what each changes in the connection's state.
func (c *conn) drain() error {
	if len(c.pending) == 0 {
		return nil
	}
	if err := c.uw.Flush(); err != nil {
		return err
	}
	for i, p := range c.pending {
		rep, err := ReadReply(c.ur, c.buf[:0])
		if err != nil {
			c.pending = c.pending[:0]
			return err
		}
		c.buf = rep[:0]
		ok := len(rep) > 0 && rep[0] != '-' && rep[0] != '!'
		switch p.kind {
		case 's':
			if ok {
				c.db = p.n
			}
		case 'm':
			if ok {
				c.multi = true
			}
		case 'e':
			c.multi = false
		case 'x':
			c.multi = false
			rep = appendError(c.buf[:0], "EXECABORT Transaction discarded because of previous errors.")
		case 'h':
			if ok {
				c.proto = p.n
			}
		}
		c.writeLocal(rep)
		c.pending[i] = post{}
	}
	c.pending = c.pending[:0]
	return nil
}

// blocking reports whether a command can block in Redis.
func blocking(name string, args [][]byte) bool {
	switch name {
	case "blpop", "brpop", "brpoplpush", "blmove", "blmpop", "bzpopmin", "bzpopmax", "bzmpop", "wait", "waitaof":
		return true
	case "xread", "xreadgroup":
		for _, a := range args {
			if bytes.EqualFold(a, []byte("block")) {
				return true
			}
		}
	}
	return false
}

// drainWatching is drain for a command that may block in Redis: while it
// waits, a client that hangs up closes the upstream connection (as Redis
// unblocks a client that went away).
func (c *conn) drainWatching() error {
	if err := c.uw.Flush(); err != nil {
		return err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var b [4096]byte
		for {
			n, err := c.nc.Read(b[:])
			if n > 0 {
				c.cr.push(b[:n])
			}
			if err != nil {
				select {
				case <-done: // the deadline below: the wait is over
				default:
					c.cr.fail(err)
					c.up.Close()
				}
				return
			}
		}
	}()
	err := c.drain()
	close(done)
	_ = c.nc.SetReadDeadline(time.Now())
	wg.Wait()
	_ = c.nc.SetReadDeadline(time.Time{})
	return err
}

// command handles one command outside relay mode; false ends the
// connection.
func (c *conn) command(ctx context.Context, cmd redcon.Command) bool {
	args := cmd.Args
	name := lower(args[0])
	switch name {
	case "auth":
		c.drain()
		c.writeLocal(c.auth(args))
		return true
	case "hello":
		return c.hello(args, cmd.Raw)
	case "quit":
		c.drain()
		c.writeLocal(appendSimple(nil, "OK"))
		return false
	case "reset":
		return c.reset(ctx)
	}
	if !c.authed {
		c.drain()
		c.writeLocal(appendError(nil, "NOAUTH Authentication required."))
		return true
	}
	if refused[name] || (name == "client" && len(args) > 1 && bytes.EqualFold(args[1], []byte("reply"))) {
		c.drain()
		c.refuse(appendError(nil, "ERR echostore: "+string(bytes.ToUpper(args[0]))+" is not relayed by the echostore front (docs/RESP.md)"))
		return true
	}
	if rep := c.checkCommand(args); rep != nil {
		c.drain()
		c.refuse(rep)
		return true
	}
	if need := needs(name, args); c.id.Scope < need {
		c.drain()
		c.refuse(appendError(nil, "NOPERM this token ("+c.id.Name+", scope "+c.id.Scope.String()+") cannot run '"+
			name+"': it needs the "+need.String()+" scope"))
		return true
	}
	if rep := c.checkRule(ctx, name, args); rep != nil {
		c.drain()
		c.refuse(rep)
		return true
	}
	if streamRead[name] && c.s.cfg.Archive != nil && c.s.cfg.Lookup != nil {
		if err := c.drain(); err != nil {
			return false
		}
		if !c.multi && c.db == c.s.cfg.Upstream.DB {
			if rep, handled := c.streamCommand(ctx, name, args); handled {
				if rep == nil { // relayed with a blocking wait
					return c.drainWatching() == nil
				}
				c.writeLocal(rep)
				return true
			}
		}
	}
	p := post{}
	switch name {
	case "select":
		if len(args) == 2 {
			if n, err := strconv.Atoi(string(args[1])); err == nil {
				p = post{kind: 's', n: n}
			}
		}
	case "multi":
		p.kind = 'm'
	case "exec", "discard":
		p.kind = 'e'
		if name == "exec" && c.doomed {
			// A command of the transaction was refused as it was queued:
			// Redis aborts such a transaction, so the front does too.
			c.doomed = false
			return c.forward(appendCommand(nil, "DISCARD"), post{kind: 'x'}) == nil
		}
		c.doomed = false
	}
	if err := c.forward(cmd.Raw, p); err != nil {
		return false
	}
	switch {
	case subscribing[name]:
		if err := c.drain(); err != nil {
			return false
		}
		c.startRelay()
	case blocking(name, args):
		return c.drainWatching() == nil
	}
	return true
}

// auth answers AUTH [user] password.
func (c *conn) auth(args [][]byte) []byte {
	if len(args) < 2 || len(args) > 3 {
		return appendError(nil, "ERR wrong number of arguments for 'auth' command")
	}
	if c.s.cfg.Authenticate == nil {
		return appendError(nil, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	}
	user, pass := []byte("default"), args[1]
	if len(args) == 3 {
		user, pass = args[1], args[2]
	}
	id, ok := c.s.cfg.Authenticate(user, pass)
	if !ok {
		c.s.log.Info("resp: AUTH refused", "client", c.nc.RemoteAddr().String())
		return appendError(nil, "WRONGPASS invalid username-password pair or user is disabled.")
	}
	c.id, c.authed = id, true
	c.cr.unbound()
	return appendSimple(nil, "OK")
}

// hello answers HELLO [protover [AUTH user pass] [SETNAME name]]: the
// AUTH part is the front's, the rest goes to Redis, whose reply the client
// gets unchanged.
func (c *conn) hello(args [][]byte, raw []byte) bool {
	if err := c.drain(); err != nil {
		return false
	}
	proto := c.proto
	var fwd [][]byte
	fwd = append(fwd, []byte("HELLO"))
	if len(args) > 1 {
		n, err := strconv.Atoi(string(args[1]))
		if err != nil {
			c.writeLocal(appendError(nil, "ERR Protocol version is not an integer or out of range"))
			return true
		}
		if n < 2 || n > 3 {
			c.writeLocal(appendError(nil, "NOPROTO unsupported protocol version"))
			return true
		}
		proto = n
		fwd = append(fwd, args[1])
	}
	var authArgs [][]byte
	for i := 2; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("auth")) && i+2 < len(args):
			authArgs = [][]byte{args[0], args[i+1], args[i+2]}
			i += 2
		case bytes.EqualFold(args[i], []byte("setname")) && i+1 < len(args):
			fwd = append(fwd, args[i], args[i+1])
			i++
		default:
			c.writeLocal(appendError(nil, "ERR Syntax error in HELLO option '"+string(args[i])+"'"))
			return true
		}
	}
	if authArgs != nil {
		if rep := c.auth(authArgs); rep[0] == '-' {
			c.writeLocal(rep)
			return true
		}
	}
	if !c.authed {
		c.writeLocal(appendError(nil, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"))
		return true
	}
	b := appendArray(nil, len(fwd))
	for _, a := range fwd {
		b = appendBulk(b, a)
	}
	if err := c.forward(b, post{kind: 'h', n: proto}); err != nil {
		return false
	}
	return c.drain() == nil
}

// reset answers RESET: the connection starts over as a new one (a new
// upstream connection, RESP2, database DB, not authenticated if the front
// has tokens).
func (c *conn) reset(ctx context.Context) bool {
	if err := c.drain(); err != nil {
		return false
	}
	up, ur, err := c.s.cfg.Upstream.dial(ctx)
	if err != nil {
		c.writeLocal(appendError(nil, "ERR echostore: Redis is unavailable"))
		return false
	}
	c.up.Close()
	c.up, c.ur, c.uw = up, ur, bufio.NewWriterSize(up, 64<<10)
	c.proto, c.db, c.multi, c.doomed = 2, c.s.cfg.Upstream.DB, false, false
	if c.s.cfg.Authenticate != nil {
		c.id, c.authed = Identity{}, false
		c.cr.bound()
	}
	c.writeLocal(appendSimple(nil, "RESET"))
	return true
}

// subscribing are the commands that put a connection in relay mode.
var subscribing = set("subscribe", "psubscribe", "ssubscribe")

// pubsubCommands are the commands relayed as they are in relay mode.
var pubsubCommands = set("subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "ping")

// relay copies everything Redis sends to the client as it comes, while the
// connection is subscribed: pub/sub messages arrive unasked. It counts the
// subscriptions Redis confirms, and ends at a sync marker (a PING with a
// random argument) once they are none.
type relay struct {
	marker []byte
	sync   chan bool // the marker's answer: true if the relay ended
	count  int64     // subscriptions as last confirmed, channels+patterns
	shard  int64     // shard channels as last confirmed
	mu     sync.Mutex
	done   chan struct{}
	err    error
	// stopping: the command loop closes the upstream connection to end
	// the relay (RESET); its read error is not the connection's end.
	stopping atomic.Bool
}

func (c *conn) startRelay() {
	var m [12]byte
	_, _ = rand.Read(m[:])
	r := &relay{marker: []byte("echostore-resp-sync-" + hex.EncodeToString(m[:])), sync: make(chan bool, 1), done: make(chan struct{})}
	c.relay = r
	go c.runRelay(r)
}

// runRelay is the relay goroutine.
func (c *conn) runRelay(r *relay) {
	defer close(r.done)
	var buf []byte
	for {
		rep, err := ReadReply(c.ur, buf[:0])
		if err != nil {
			r.err = err
			if !r.stopping.Load() {
				c.close()
			}
			return
		}
		buf = rep[:0]
		if kind, elems, err := Elements(rep); err == nil {
			if kind == '*' || kind == '>' {
				if len(elems) == 3 {
					k := string(bulkBody(elems[0]))
					if n, ok := intBody(elems[2]); ok {
						r.mu.Lock()
						switch k {
						case "subscribe", "unsubscribe", "psubscribe", "punsubscribe":
							r.count = n
						case "ssubscribe", "sunsubscribe":
							r.shard = n
						}
						r.mu.Unlock()
					}
				}
				if len(elems) == 2 && bytes.Equal(bulkBody(elems[1]), r.marker) {
					r.sync <- false // RESP2 subscribed PING: still subscribed
					continue
				}
			}
		}
		if bytes.Equal(bulkBody(rep), r.marker) {
			r.mu.Lock()
			end := r.count == 0 && r.shard == 0
			r.mu.Unlock()
			r.sync <- end
			if end {
				return
			}
			continue
		}
		c.wmu.Lock()
		c.w.Write(rep)
		var err2 error
		if c.ur.Buffered() == 0 {
			err2 = c.w.Flush()
		}
		c.wmu.Unlock()
		if err2 != nil {
			c.close()
			return
		}
	}
}

// relayCommand handles a command in relay mode: pub/sub commands and
// PING go to Redis as they are; any other command first ends relay mode
// if no subscription is left (a sync marker), else is relayed too.
func (c *conn) relayCommand(ctx context.Context, cmd redcon.Command) bool {
	name := lower(cmd.Args[0])
	switch name {
	case "quit":
		c.writeLocal(appendSimple(nil, "OK"))
		return false
	case "auth": // the front's, never Redis's (the token stays here)
		c.writeLocal(c.auth(cmd.Args))
		return true
	}
	if !pubsubCommands[name] {
		r := c.relay
		r.mu.Lock()
		none := r.count == 0 && r.shard == 0
		r.mu.Unlock()
		if none {
			if _, err := c.uw.Write(appendCommand(nil, "PING", string(r.marker))); err != nil {
				return false
			}
			if err := c.uw.Flush(); err != nil {
				return false
			}
			var end bool
			select {
			case end = <-r.sync:
			case <-r.done: // the marker's answer, or the relay failed
				select {
				case end = <-r.sync:
				default:
					return false
				}
			}
			if end {
				<-r.done
				c.relay = nil
				return c.command(ctx, cmd)
			}
		}
		switch name {
		case "reset": // still subscribed: the relay ends with its connection
			r.stopping.Store(true)
			c.up.Close()
			<-r.done
			c.relay = nil
			return c.reset(ctx)
		case "hello":
			c.writeLocal(appendError(nil, "ERR echostore: HELLO while subscribed is not relayed: unsubscribe first"))
			return true
		}
	}
	if rep := c.checkCommand(cmd.Args); rep != nil {
		c.writeLocal(rep)
		return true
	}
	if need := needs(name, cmd.Args); !c.authed || c.id.Scope < need {
		c.writeLocal(appendError(nil, "NOPERM this token cannot run '"+name+"': it needs the "+need.String()+" scope"))
		return true
	}
	if rep := c.checkRule(ctx, name, cmd.Args); rep != nil {
		c.writeLocal(rep)
		return true
	}
	if refused[name] {
		c.writeLocal(appendError(nil, "ERR echostore: "+name+" is not relayed by the echostore front (docs/RESP.md)"))
		return true
	}
	_, err := c.uw.Write(cmd.Raw)
	return err == nil
}

// bulkBody returns the body of a bulk or simple string reply (nil for
// other types).
func bulkBody(rep []byte) []byte {
	if len(rep) < 3 {
		return nil
	}
	switch rep[0] {
	case '+':
		return rep[1 : len(rep)-2]
	case '$':
		i := bytes.IndexByte(rep, '\n')
		if i < 0 || i+1 > len(rep)-2 {
			return nil
		}
		return rep[i+1 : len(rep)-2]
	}
	return nil
}

// intBody returns the value of an integer reply.
func intBody(rep []byte) (int64, bool) {
	if len(rep) < 4 || rep[0] != ':' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rep[1:len(rep)-2]), 10, 64)
	return n, err == nil
}

// MaxUnauthenticatedInput bounds the bytes a client may send before its
// AUTH (or HELLO … AUTH) succeeds, when the front has tokens: the command
// reader buffers a command whole, so without a bound a client that never
// authenticates could make the front hold any amount of memory. A client
// past it gets an error and is disconnected.
const MaxUnauthenticatedInput = 1 << 20

// errUnauthenticatedInput ends a connection that sent more than
// MaxUnauthenticatedInput before authenticating.
var errUnauthenticatedInput = errors.New("more than 1 MiB of input before AUTH")

// clientReader is the client connection as redcon reads it: bytes a
// blocking wait's watcher read come first. While budget is not negative
// (the client has not authenticated) it reads at most budget more bytes.
type clientReader struct {
	c      net.Conn
	mu     sync.Mutex
	head   []byte
	err    error
	budget int64
}

// unbound lifts the budget (the client authenticated); bound sets it again
// (RESET).
func (r *clientReader) unbound() { r.mu.Lock(); r.budget = -1; r.mu.Unlock() }
func (r *clientReader) bound()   { r.mu.Lock(); r.budget = MaxUnauthenticatedInput; r.mu.Unlock() }

func (r *clientReader) push(b []byte) {
	r.mu.Lock()
	r.head = append(r.head, b...)
	r.mu.Unlock()
}

func (r *clientReader) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

func (r *clientReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		r.mu.Unlock()
		return n, nil
	}
	err, budget := r.err, r.budget
	r.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if budget < 0 {
		return r.c.Read(p)
	}
	if budget == 0 {
		return 0, errUnauthenticatedInput
	}
	if int64(len(p)) > budget {
		p = p[:budget]
	}
	n, err := r.c.Read(p)
	r.mu.Lock()
	if r.budget >= 0 {
		r.budget = max(0, r.budget-int64(n))
	}
	r.mu.Unlock()
	return n, err
}
