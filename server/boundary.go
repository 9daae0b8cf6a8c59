package server

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/echostore/echostore/api"
)

// Error codes of the browser boundary and of scoped tokens.
const (
	// CodeCrossSite: 403, a request another site's page sent (an Origin
	// that is not the server's, a Sec-Fetch-Site other than same-origin
	// or none).
	CodeCrossSite = api.CodeCrossSite
	// CodeUnsupportedMediaType: 415, a request that changes state without
	// Content-Type application/json or application/x-ndjson.
	CodeUnsupportedMediaType = api.CodeUnsupportedMediaType
	// CodeMisdirected: 421, a Host that is neither the listen address nor
	// in allowed_hosts.
	CodeMisdirected = api.CodeMisdirected
	// CodeForbidden: 403, a token without the scope the route needs.
	CodeForbidden = api.CodeForbidden
)

// checkAllowedHosts checks and normalises Config.AllowedHosts: each is a
// host name or IP, with or without a port, nothing else.
func checkAllowedHosts(hosts []string) ([]string, error) {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		name, port := splitHost(h)
		bad := name == "" || strings.ContainsAny(h, "/?#@ *") || strings.Contains(h, "://")
		if port != "" {
			if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
				bad = true
			}
		}
		if bad {
			return nil, fmt.Errorf("%w: allowed_hosts: %q: want a host name or IP, with or without :port (such as echostore.internal or echostore.internal:7070)", ErrConfig, h)
		}
		out = append(out, strings.ToLower(h))
	}
	return out, nil
}

// splitHost splits a Host header (or an allowed_hosts entry) into its
// lower-cased name, without the brackets of an IPv6 literal, and its port
// ("" when it has none).
func splitHost(h string) (string, string) {
	if name, port, err := net.SplitHostPort(h); err == nil {
		return strings.ToLower(name), port
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ""
}

// hostAllowed reports whether the request's Host names this server, so
// that a page of another site whose DNS name was rebound to the server's
// address cannot read or write through it. Allowed: an entry of
// allowed_hosts; the IP and port the connection came in on; on a loopback
// connection, localhost or any loopback IP with that port; the listen
// address's own host name. A request over the unix socket is not checked:
// only the data dir's owner reaches it, and no browser does.
func (s *Server) hostAllowed(r *http.Request) bool {
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	tcp, ok := la.(*net.TCPAddr)
	if !ok {
		return la != nil && la.Network() == "unix"
	}
	name, port := splitHost(r.Host)
	if name == "" {
		return false
	}
	for _, a := range s.cfg.AllowedHosts {
		an, ap := splitHost(a)
		if an == name && (ap == "" || ap == port) {
			return true
		}
	}
	if port == "" {
		port = "80"
		if r.TLS != nil {
			port = "443"
		}
	}
	if port != strconv.Itoa(tcp.Port) {
		return false
	}
	if ip := net.ParseIP(name); ip != nil {
		return ip.Equal(tcp.IP) || (ip.IsLoopback() && tcp.IP.IsLoopback())
	}
	if name == "localhost" {
		return tcp.IP.IsLoopback()
	}
	lh, _, err := net.SplitHostPort(s.cfg.Listen)
	return err == nil && net.ParseIP(lh) == nil && strings.EqualFold(lh, name)
}

// sameOrigin reports whether an Origin header is the server's own origin:
// http or https, the request's (allowed) Host, no path. Default ports are
// compared as if written.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	on, op := splitHost(u.Host)
	if op == "" {
		op = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	hn, hp := splitHost(r.Host)
	if hp == "" {
		hp = op // a Host without a port: the scheme's default, whichever the proxy in front spoke
	}
	return on == hn && op == hp
}

// stateChanging reports whether a method can change state: every method
// but GET, HEAD and OPTIONS (which no route takes).
func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// checkBoundary is the browser boundary, in this order: the Host (421, on
// every route); a request of another site's page (403, on every route but
// the dashboard page, which a link may open); and for a request that can
// change state, its Content-Type (415). A browser sends application/json
// to another origin only after a CORS preflight, which this server never
// grants, so no page's simple request (a form, text/plain, a no-cors
// fetch) can change state, with or without a token; a bodyless POST (a
// cycle, a push, a reset) must carry the header too.
func (s *Server) checkBoundary(r *http.Request) error {
	if !s.hostAllowed(r) {
		return &apiError{http.StatusMisdirectedRequest, CodeMisdirected, fmt.Errorf(
			"Host %q is not this server's (its listen address, localhost on loopback, or allowed_hosts): add it to allowed_hosts if it is", r.Host)}
	}
	dashboard := !stateChanging(r.Method) && r.URL.Path == "/"
	if !dashboard {
		if o, ok := r.Header["Origin"]; ok && (len(o) != 1 || !sameOrigin(o[0], r)) {
			return &apiError{http.StatusForbidden, CodeCrossSite, fmt.Errorf(
				"Origin %q is not this server's: another site's page cannot call the API", strings.Join(o, ", "))}
		}
		if v := r.Header.Get("Sec-Fetch-Site"); v != "" && v != "same-origin" && v != "none" {
			return &apiError{http.StatusForbidden, CodeCrossSite, fmt.Errorf(
				"Sec-Fetch-Site %q: another site's page cannot call the API", v)}
		}
	}
	if stateChanging(r.Method) {
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/x-ndjson") || len(r.Header.Values("Content-Type")) > 1 {
			return &apiError{http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, fmt.Errorf(
				"Content-Type %q: a %s must carry Content-Type: application/json (or application/x-ndjson for JSON lines), even with an empty body", ct, r.Method)}
		}
	}
	return nil
}

// frameAncestors is the Content-Security-Policy of every answer: no page
// may frame one (clickjacking of the dashboard's controls).
const frameAncestors = "frame-ancestors 'none'"

// boundary wraps the whole handler: every answer forbids framing and MIME
// sniffing, and a request refused by checkPeer (a socket peer of another
// user) or checkBoundary gets its JSON error before any route, token
// check or body read.
func (s *Server) boundary(h http.Handler) http.Handler {
	refused := func(err error) http.Handler {
		return s.instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var ae *apiError
			if errors.As(err, &ae) && ae.status == http.StatusUnsupportedMediaType {
				w.Header().Set("Accept-Post", "application/json, application/x-ndjson")
			}
			closeUnread(w, r)
			writeError(w, err)
		}))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", frameAncestors)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		if err := s.checkPeer(r); err != nil {
			s.log.Warn("serve: socket request of another user refused", "method", methodLabel(r.Method), "err", err)
			refused(err).ServeHTTP(w, r)
			return
		}
		if err := s.checkBoundary(r); err != nil {
			s.log.Info("serve: request refused at the browser boundary", "method", methodLabel(r.Method), "err", err)
			refused(err).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// closeUnread makes the answer to a request refused before its body was
// read close the connection: otherwise the server would read (up to
// 256 KiB of) a body that a client may withhold, with no deadline.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}
