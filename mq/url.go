package mq

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/redact"
)

// Endpoint is a parsed Redis URL: where and how to connect.
//
// The accepted form is
//
//	redis[s]://[user[:password]@]host[:port][,host[:port]…][/db][?option=value&…]
//
// rediss:// connects with TLS. Several comma-separated hosts (or addr=
// options) are seed addresses: the client discovers a Redis Cluster from any
// of them, and a standalone server uses the first that answers. The port
// defaults to 6379, db to 0 (a Cluster has only db 0). User and password are
// percent-encoded as in any URL. Options:
//
//	addr=host:port        another seed address (repeatable)
//	db=N                  the database, instead of the path
//	dial_timeout=5s       connect timeout (default 5s)
//	timeout=10s           read/write timeout of a connection; a server
//	                      silent for longer is taken as down (default 10s)
//	client_name=NAME      CLIENT SETNAME on every connection
//	ca_file=PATH          PEM file of the CAs that sign the server's
//	                      certificate (rediss only; default: system roots)
//	skip_verify=true      do not verify the server's certificate (rediss
//	                      only; for tests)
//	allow_eviction=true   connect even if maxmemory-policy may evict keys
//	                      (see ErrEvictingPolicy); never do this in production
//
// Unknown options are an error, so that a typo is not silently ignored.
// Reconnecting is the client's: a dropped connection is dialled again on the
// next command.
type Endpoint struct {
	Addrs         []string      // seed addresses, host:port
	TLS           bool          // rediss://
	Username      string        // ACL user ("" for the default user)
	Password      string        // password ("" for none)
	DB            int           // database number (0 on a Cluster)
	DialTimeout   time.Duration // dial_timeout
	Timeout       time.Duration // timeout: read/write timeout of a connection
	ClientName    string        // client_name
	CAFile        string        // ca_file
	SkipVerify    bool          // skip_verify
	AllowEviction bool          // allow_eviction: skip the eviction-policy refusal
}

// Default timeouts of an Endpoint.
const (
	DefaultDialTimeout = 5 * time.Second
	DefaultTimeout     = 10 * time.Second
)

// ParseURL parses a Redis URL (see Endpoint). Errors wrap ErrBadURL.
func ParseURL(s string) (Endpoint, error) {
	e := Endpoint{DialTimeout: DefaultDialTimeout, Timeout: DefaultTimeout}
	bad := func(format string, args ...any) (Endpoint, error) {
		return Endpoint{}, fmt.Errorf("%w %q: %s", ErrBadURL, Redact(s), fmt.Sprintf(format, hidePassword(s, args)...))
	}
	scheme, rest, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		return bad("want redis://host:port or rediss://host:port")
	case strings.EqualFold(scheme, "redis"):
	case strings.EqualFold(scheme, "rediss"):
		e.TLS = true
	default:
		return bad("scheme %q: want redis or rediss", scheme)
	}
	var rawQuery string
	rest, rawQuery, _ = strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, pass, hasPass := strings.Cut(authority[:at], ":")
		var err error
		if e.Username, err = url.PathUnescape(user); err != nil {
			return bad("user name: %v", err)
		}
		if hasPass {
			if e.Password, err = url.PathUnescape(pass); err != nil {
				return bad("password: %v", err)
			}
		}
		authority = authority[at+1:]
	}
	for _, h := range strings.Split(authority, ",") {
		if h == "" && authority == "" {
			return bad("no host: want redis://host:port")
		}
		addr, err := hostPort(h)
		if err != nil {
			return bad("%v", err)
		}
		e.Addrs = append(e.Addrs, addr)
	}
	if path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return bad("path %q: want /<db number>", "/"+path)
		}
		e.DB = db
	}
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	for key, vals := range query {
		v := vals[len(vals)-1]
		var err error
		switch key {
		case "addr":
			for _, a := range vals {
				addr, err := hostPort(a)
				if err != nil {
					return bad("addr: %v", err)
				}
				e.Addrs = append(e.Addrs, addr)
			}
		case "db":
			if e.DB, err = strconv.Atoi(v); err != nil || e.DB < 0 {
				return bad("db=%q: want a database number", v)
			}
		case "dial_timeout":
			if e.DialTimeout, err = time.ParseDuration(v); err != nil || e.DialTimeout <= 0 {
				return bad("dial_timeout=%q: want a positive duration such as 5s", v)
			}
		case "timeout":
			if e.Timeout, err = time.ParseDuration(v); err != nil || e.Timeout <= 0 {
				return bad("timeout=%q: want a positive duration such as 10s", v)
			}
		case "client_name":
			e.ClientName = v
		case "ca_file":
			e.CAFile = v
		case "skip_verify":
			if e.SkipVerify, err = strconv.ParseBool(v); err != nil {
				return bad("skip_verify=%q: want true or false", v)
			}
		case "allow_eviction":
			if e.AllowEviction, err = strconv.ParseBool(v); err != nil {
				return bad("allow_eviction=%q: want true or false", v)
			}
		default:
			return bad("unknown option %q (known: addr, db, dial_timeout, timeout, client_name, ca_file, skip_verify, allow_eviction)", key)
		}
	}
	if !e.TLS && (e.CAFile != "" || e.SkipVerify) {
		return bad("ca_file and skip_verify need rediss://")
	}
	return e, nil
}

// hostPort normalises host[:port] to host:port with the default port 6379.
func hostPort(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty host")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port (or a bare IPv6 address in brackets).
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "6379"
	}
	if host == "" {
		return "", fmt.Errorf("host %q has no name", h)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("host %q: port %q is not a number in 1..65535", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// TLSConfig returns the TLS configuration the client uses for e (TLS 1.2
// or later, the server name of the first address, ca_file, skip_verify), or
// nil for plain TCP: every other connection to the same Redis should use it.
func (e Endpoint) TLSConfig() (*tls.Config, error) { return e.tlsConfig() }

// tlsConfig returns the TLS configuration of e, or nil for plain TCP.
func (e Endpoint) tlsConfig() (*tls.Config, error) {
	if !e.TLS {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(e.Addrs[0])
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host, InsecureSkipVerify: e.SkipVerify}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ca_file: %w", ErrBadURL, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: ca_file %s holds no PEM certificate", ErrBadURL, e.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// String returns the URL of e with the password hidden.
func (e Endpoint) String() string {
	var b strings.Builder
	if e.TLS {
		b.WriteString("rediss://")
	} else {
		b.WriteString("redis://")
	}
	if e.Username != "" || e.Password != "" {
		b.WriteString(url.PathEscape(e.Username))
		if e.Password != "" {
			b.WriteString(":***")
		}
		b.WriteByte('@')
	}
	b.WriteString(strings.Join(e.Addrs, ","))
	fmt.Fprintf(&b, "/%d", e.DB)
	return b.String()
}

// Redact returns the URL s with its password hidden, for logs and error
// messages. Everything between "://" and the last '@' is the user
// information, whatever characters the password holds ('/', '?', '@' …):
// a parser may split such a URL elsewhere, but Redact never shows it. It is
// redact.URL, clipped.
func Redact(s string) string { return clip(redact.URL(s)) }

// rawPassword returns the password part of s as written (see Redact), or "".
func rawPassword(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	at := strings.LastIndexByte(rest, '@')
	if !ok || at < 0 {
		return ""
	}
	_, pass, _ := strings.Cut(rest[:at], ":")
	return pass
}

// hidePassword replaces each argument of an error message whose text holds
// a piece of the password of s (the parts a parser may cut it into) by a
// placeholder.
func hidePassword(s string, args []any) []any {
	pass := rawPassword(s)
	if pass == "" {
		return args
	}
	pieces := strings.FieldsFunc(pass, func(r rune) bool { return strings.ContainsRune("/?,@:&=#%", r) })
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
		text := fmt.Sprint(a)
		for _, p := range pieces {
			if strings.Contains(text, p) {
				out[i] = "(hidden: part of the password)"
				break
			}
		}
	}
	return out
}
