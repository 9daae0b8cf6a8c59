package resp

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"sync"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// DefaultMaxReply bounds the bytes of one reply the front builds itself
// (an archived XRANGE or XREAD without COUNT over a deep history): a
// larger one is refused with an error that asks for COUNT.
const DefaultMaxReply = 256 << 20

// Archive is what the front reads archived streams through: the node's
// merge-read and status (*echostore.Node has both).
type Archive interface {
	// Read yields the records of ref in opts' range (Node.Read).
	Read(ctx context.Context, ref names.StreamRef, opts echostore.ReadOptions) iter.Seq2[echostore.Record, error]
	// Status is the stream's archive status (Node.Status).
	Status(ctx context.Context, ref names.StreamRef) (echostore.ArchiveStatus, error)
}

// Lookup tells which Redis keys are archived streams. It is the one place
// that maps a key to a stream (StreamLookup: the emq:{Q}:stream:S keys of
// queues and streams at any key). The front also asks it about the keys
// of writes, for the write rule (package writerule), whatever the token.
type Lookup interface {
	// Archived reports whether key is the key of an archived stream, and
	// which. An error means the front cannot tell; the command fails.
	Archived(ctx context.Context, key []byte) (names.StreamRef, bool, error)
}

// Watermarks is what a Lookup may also answer, for the write rule
// (package writerule): the watermark W of an archived stream, the newest
// record folded into its archive, as its seam cache in Redis holds it
// (archive.GetArchived: one HGETALL). The front asks it only for a trim
// of an archived stream. A Lookup without it: every trim of an archived
// stream is refused.
type Watermarks interface {
	// Watermark returns W of ref; ok is false when nothing is folded yet.
	Watermark(ctx context.Context, ref names.StreamRef) (w xid.ID, ok bool, err error)
}

// Identity is who authenticated a connection, and what it may do.
type Identity struct {
	// Name names the token in logs (never its value).
	Name string
	// Scope is what the connection may do.
	Scope Scope
}

// Config configures a Server.
type Config struct {
	// Upstream is the Redis the front relays to.
	Upstream Upstream
	// Authenticate checks the password of AUTH or HELLO … AUTH (the user
	// name is given too, and may be ignored). Nil: the front has no tokens,
	// every connection may do everything, and AUTH is refused as Redis
	// refuses it without a password.
	Authenticate func(user, password []byte) (Identity, bool)
	// Archive and Lookup serve the archived streams; with either nil
	// every command is relayed.
	Archive Archive
	Lookup  Lookup
	// MaxReply bounds a reply the front builds (default DefaultMaxReply).
	MaxReply int
	// Logger receives the front's logs (default slog.Default()). No token
	// or password is ever logged.
	Logger *slog.Logger
}

// Server is the RESP front: it answers the Redis protocol on a listener,
// serving archived streams' reads as archive ∪ live and relaying every
// other command to Redis on a connection of its own per client.
type Server struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	conns  map[*conn]struct{}
	lns    map[net.Listener]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ErrClosed is returned by Serve once Close was called.
var ErrClosed = errors.New("resp: server closed")

// New returns a Server; it serves once Serve is called.
func New(cfg Config) (*Server, error) {
	if cfg.Upstream.Addr == "" {
		return nil, fmt.Errorf("resp: no upstream Redis address")
	}
	if cfg.MaxReply <= 0 {
		cfg.MaxReply = DefaultMaxReply
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger, conns: map[*conn]struct{}{}, lns: map[net.Listener]struct{}{}}, nil
}

// Serve accepts connections on ln until ln fails or Close is called
// (then it returns ErrClosed); each connection is served by its own
// goroutine with its own upstream connection, until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("resp: accept: %w", err)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection (and its upstream) and
// waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
