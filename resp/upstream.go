package resp

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Upstream is how the front reaches Redis: one dedicated connection per
// client connection, authenticated and on DB before the client's first
// command reaches it.
type Upstream struct {
	// Addr is Redis's host:port (a Cluster's seed node).
	Addr string
	// TLS, if set, wraps the connection (rediss://).
	TLS *tls.Config
	// Username and Password authenticate to Redis (AUTH); never logged.
	Username, Password string
	// DB is the database selected on every new connection.
	DB int
	// DialTimeout bounds the dial and the handshake (default 5s).
	DialTimeout time.Duration
}

// dial opens an upstream connection and runs AUTH and SELECT on it. Errors
// never hold the password.
func (u Upstream) dial(ctx context.Context) (net.Conn, *bufio.Reader, error) {
	to := u.DialTimeout
	if to <= 0 {
		to = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("resp: dial redis %s: %w", u.Addr, err)
	}
	if u.TLS != nil {
		tc := tls.Client(c, u.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("resp: TLS to redis %s: %w", u.Addr, err)
		}
		c = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	var b []byte
	n := 0
	if u.Password != "" {
		if u.Username != "" {
			b = appendCommand(b, "AUTH", u.Username, u.Password)
		} else {
			b = appendCommand(b, "AUTH", u.Password)
		}
		n++
	}
	if u.DB != 0 {
		b = appendCommand(b, "SELECT", strconv.Itoa(u.DB))
		n++
	}
	r := bufio.NewReaderSize(c, 64<<10)
	if n > 0 {
		if _, err := c.Write(b); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("resp: redis %s handshake: %w", u.Addr, err)
		}
		for i := 0; i < n; i++ {
			rep, err := ReadReply(r, nil)
			if err != nil {
				c.Close()
				return nil, nil, fmt.Errorf("resp: redis %s handshake: %w", u.Addr, err)
			}
			if len(rep) > 0 && rep[0] == '-' {
				c.Close()
				what := "AUTH"
				if i == n-1 && u.DB != 0 {
					what = "SELECT"
				}
				return nil, nil, fmt.Errorf("resp: redis %s refused %s: %s", u.Addr, what, clip(rep[1:len(rep)-2]))
			}
		}
	}
	_ = c.SetDeadline(time.Time{})
	return c, r, nil
}

// appendCommand appends a command as a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = appendArray(b, len(args))
	for _, a := range args {
		b = appendBulkString(b, a)
	}
	return b
}
