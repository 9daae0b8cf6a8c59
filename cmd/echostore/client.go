package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/server"
)

// serveDialTimeout bounds how long a command waits for the server's socket
// to answer before it opens the data dir itself.
const serveDialTimeout = 2 * time.Second

// serveClient talks to the `echostore serve` that holds a data dir, over
// its unix socket <data>/serve.sock (docs/rfc/0004-processes-and-nodes.md): the same HTTP
// API as on its TCP address. The token, if serve has one, comes from
// --token-file (or ECHOSTORE_TOKEN_FILE), else ECHOSTORE_TOKEN: never from
// a flag's value, which every user would see in ps. Without one, serve
// knows the command's user by the socket (SO_PEERCRED): its own user and
// root have the admin scope, and every other user is refused.
type serveClient struct {
	sock  string
	token string
	hc    *http.Client
}

// viaServe returns a client of the serve that holds dataDir, and true, when
// <data>/serve.sock answers GET /healthz. No socket, a socket nobody
// listens on (a serve that died) or a serve that is shutting down give
// false: the command opens the data dir itself (and meets its lock, if a
// serve still holds it). err is non-nil only when the socket answers
// something other than echostore serve.
func viaServe(ctx context.Context, g *globals) (*serveClient, bool, error) {
	sock := filepath.Join(g.data, server.SocketName)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		return nil, false, nil
	}
	token := os.Getenv("ECHOSTORE_TOKEN")
	if g.tokenFile != "" {
		var err error
		if token, err = server.ReadTokenFile(g.tokenFile); err != nil {
			return nil, false, fmt.Errorf("--token-file: %w", err)
		}
	}
	c := &serveClient{
		sock:  sock,
		token: token,
		hc: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				d := net.Dialer{Timeout: serveDialTimeout}
				return d.DialContext(ctx, "unix", sock)
			},
			DisableCompression: true,
		}},
	}
	hctx, cancel := context.WithTimeout(ctx, serveDialTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, "http://serve/healthz", nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, false, nil // nobody listens: a serve that died left it
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, false, fmt.Errorf("%s answers, but not as echostore serve: %w", sock, err)
	}
	if h.Error != nil && h.Error.Code == server.CodePeerRefused {
		// Another user's serve: the data dir is not this user's either.
		return nil, false, &serveError{sock: sock, status: resp.StatusCode, code: h.Error.Code, message: h.Error.Message}
	}
	if resp.StatusCode != http.StatusOK || h.Status != "ok" {
		return nil, false, nil // shutting down: it releases the data dir
	}
	return c, true, nil
}

// serveError is an error answered by the server, with its status and code.
type serveError struct {
	sock    string
	status  int
	code    string
	message string
}

func (e *serveError) Error() string {
	switch {
	case e.status == http.StatusUnauthorized:
		return fmt.Sprintf("%s (the serve on %s refused the token given: give the right one's file with --token-file or ECHOSTORE_TOKEN_FILE, or set ECHOSTORE_TOKEN; run by serve's own user, the command needs none)", e.message, e.sock)
	case e.code == server.CodeForbidden:
		return fmt.Sprintf("%s (the serve on %s: use a token with that scope)", e.message, e.sock)
	}
	return fmt.Sprintf("%s (through the serve on %s)", e.message, e.sock)
}

// do sends a request to the server and returns the response of a 2xx;
// any other status is a *serveError with the server's code and message.
func (c *serveClient) do(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Response, error) {
	u := "http://serve" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil || (method != http.MethodGet && method != http.MethodHead) {
		// serve refuses a request that changes state without it (the
		// browser boundary), an empty body too.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("serve on %s: %s %s: %w", c.sock, method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
		e.Error.Message = fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return nil, &serveError{sock: c.sock, status: resp.StatusCode, code: e.Error.Code, message: e.Error.Message}
}

// call sends a request and decodes the JSON answer into v, keeping numbers
// as they were written (json.Number in an any).
func (c *serveClient) call(ctx context.Context, method, path string, query url.Values, body []byte, v any) error {
	resp, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("serve on %s: %s %s: answer: %w", c.sock, method, path, err)
	}
	return nil
}

// streamPath is the API path of stream s of queue q, with sub appended.
func streamPath(q, s, sub string) string {
	return "/v1/streams/" + url.PathEscape(q) + "/" + url.PathEscape(s) + sub
}

// readStream prints a read of q/s through the server: the server renders
// the records as `stream read` does, so its body is copied as it comes. A
// body cut short (the server aborts a read that fails after its first
// record) fails the command.
func (c *serveClient) readStream(ctx context.Context, g *globals, q, s string, r archive.Range, liveOnly, archiveOnly bool) error {
	v := url.Values{}
	if r.From != 0 {
		v.Set("from", brand.EVT.Format(r.From))
	}
	if r.To != brand.Max {
		v.Set("to", brand.EVT.Format(r.To))
	}
	v.Set("limit", strconv.Itoa(r.Limit))
	if r.Reverse {
		v.Set("reverse", "true")
	}
	if liveOnly {
		v.Set("live_only", "true")
	}
	if archiveOnly {
		v.Set("archive_only", "true")
	}
	resp, err := c.do(ctx, http.MethodGet, streamPath(q, s, ""), v, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(g.stdout, resp.Body); err != nil {
		return fmt.Errorf("read %s/%s through the serve on %s: cut short: %w", q, s, c.sock, err)
	}
	return nil
}

// cycleOut and statusOut are what `archive cycle` and `archive status`
// print, field for field in their order, whether they run the work
// themselves or read serve's answer.
type (
	cycleOut struct {
		Folded    int64 `json:"folded"`
		Trimmed   int64 `json:"trimmed"`
		Watermark any   `json:"watermark"`
		Dropped   int64 `json:"dropped,omitempty"`
	}
	statusOut struct {
		Watermark any     `json:"watermark"`
		Archived  uint64  `json:"archived"`
		Live      int64   `json:"live"`
		Volume    string  `json:"volume"`
		LSN       uint64  `json:"lsn"`
		Low       *uint64 `json:"low,omitempty"`
		Retained  *uint64 `json:"retained,omitempty"`
	}
)

// archiveCycleViaServe runs `archive cycle` through the serve that holds
// --data, if one does: done reports whether it did (and printed, or failed
// with err). keep, maxAge, trimAfter and retain are the command's flags,
// checked (trimAfter "" when --trim-after was not given: serve then applies
// the stream's configured trim_after, and only admin may ask for local); retain applies to this cycle alone, as run directly (the zero
// Retention: none, whatever serve's configuration says).
func archiveCycleViaServe(ctx context.Context, g *globals, q, s string, keep int64, maxAge time.Duration, trimAfter string, retain archive.Retention) (done bool, err error) {
	c, ok, err := viaServe(ctx, g)
	if !ok || err != nil {
		return err != nil, err
	}
	v := url.Values{"max_age": {maxAge.String()},
		"retain_count": {strconv.FormatUint(retain.Count, 10)}, "retain_age": {retain.MaxAge.String()}}
	if trimAfter != "" { // none: the stream's configured trim_after
		v.Set("trim_after", trimAfter)
	}
	if keep > 0 { // none: an age window alone (serve refuses keep=0)
		v.Set("keep", strconv.FormatInt(keep, 10))
	}
	var out cycleOut
	if err := c.call(ctx, http.MethodPost, streamPath(q, s, "/cycle"), v, nil, &out); err != nil {
		return true, fmt.Errorf("%w; nothing unfolded was trimmed: fix the cause and run the cycle again", err)
	}
	return true, json.NewEncoder(g.stdout).Encode(out)
}

// archiveDeleteViaServe runs `archive delete` (confirmed) through the serve
// that holds --data, if one does (done): serve deletes with its own store
// and remote, and stops cycling the stream.
func archiveDeleteViaServe(ctx context.Context, g *globals, q, s string) (done bool, err error) {
	c, ok, err := viaServe(ctx, g)
	if !ok || err != nil {
		return err != nil, err
	}
	var out server.DeleteOut
	if err := c.call(ctx, http.MethodDelete, streamPath(q, s, ""), url.Values{"confirm": {server.DeleteConfirm}}, nil, &out); err != nil {
		return true, err
	}
	return true, json.NewEncoder(g.stdout).Encode(out)
}

// archiveStatusViaServe runs `archive status` through the serve that holds
// --data, if one does (done).
func archiveStatusViaServe(ctx context.Context, g *globals, q, s string) (done bool, err error) {
	c, ok, err := viaServe(ctx, g)
	if !ok || err != nil {
		return err != nil, err
	}
	var out statusOut
	if err := c.call(ctx, http.MethodGet, streamPath(q, s, "/archive"), nil, nil, &out); err != nil {
		return true, err
	}
	return true, json.NewEncoder(g.stdout).Encode(out)
}

// enqueueViaServe runs `enqueue` through the serve that holds --data, if
// one does (done), and prints the receipt. serve keeps running, so an
// async job needs no flush before the answer: its accept tier holds it.
// A non-zero runAt makes the job due then (--run-at, or now + --delay).
func enqueueViaServe(ctx context.Context, g *globals, q string, id brand.ID, payload []byte, mode accept.Mode, runAt time.Time) (done bool, err error) {
	c, ok, err := viaServe(ctx, g)
	if !ok || err != nil {
		return err != nil, err
	}
	body := map[string]any{"payload": json.RawMessage(payload)}
	if id != 0 {
		body["id"] = brand.JOB.Format(id)
	}
	if !runAt.IsZero() {
		body["run_at"] = runAt.Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return true, err
	}
	var out struct {
		ID     string      `json:"id"`
		Mode   string      `json:"mode"`
		LSN    json.Number `json:"lsn"`
		Volume string      `json:"volume"`
	}
	path := "/v1/queues/" + url.PathEscape(q) + "/jobs"
	if err := c.call(ctx, http.MethodPost, path, url.Values{"mode": {mode.String()}}, b, &out); err != nil {
		return true, fmt.Errorf("enqueue on %s: %w", q, err)
	}
	r := accept.Receipt{Volume: out.Volume}
	jid, err := brand.Parse(out.ID)
	if err != nil {
		return true, fmt.Errorf("enqueue on %s: the server answered id %q: %w", q, out.ID, err)
	}
	r.ID = jid.ID
	if r.Mode, err = accept.ParseMode(out.Mode); err != nil {
		return true, fmt.Errorf("enqueue on %s: the server answered mode %q: %w", q, out.Mode, err)
	}
	if out.LSN != "" {
		if r.LSN, err = strconv.ParseUint(out.LSN.String(), 10, 64); err != nil {
			return true, fmt.Errorf("enqueue on %s: the server answered lsn %q: %w", q, out.LSN, err)
		}
	}
	return true, printReceipt(g, r)
}

// volumesViaServe prints `volume ls` through the serve that holds --data,
// if one does (done).
func volumesViaServe(ctx context.Context, g *globals) (done bool, err error) {
	c, ok, err := viaServe(ctx, g)
	if !ok || err != nil {
		return err != nil, err
	}
	var out struct {
		Volumes []graft.Info `json:"volumes"`
	}
	if err := c.call(ctx, http.MethodGet, "/v1/volumes", nil, nil, &out); err != nil {
		return true, err
	}
	if out.Volumes == nil {
		out.Volumes = []graft.Info{}
	}
	return true, writeJSON(g, out.Volumes)
}

// volumeViaServe runs a volume command through the serve that holds --data,
// if one does (done): op "" is `volume info`, otherwise the replication
// route POST /v1/volumes/{vid}/{op} with query. It prints the answer, the
// volume's info and op's fields, as the command does.
func volumeViaServe(ctx context.Context, g *globals, vid, op string, query url.Values) (done bool, err error) {
	c, ok, err := viaServe(ctx, g)
	if !ok || err != nil {
		return err != nil, err
	}
	method, path := http.MethodGet, "/v1/volumes/"+url.PathEscape(vid)
	if op != "" {
		method, path = http.MethodPost, path+"/"+op
	}
	out := map[string]any{}
	if err := c.call(ctx, method, path, query, nil, &out); err != nil {
		var se *serveError
		if errors.As(err, &se) && se.code == server.CodeNotFound && op == "" {
			return true, fmt.Errorf("%w; `echostore volume ls` lists the volumes, `echostore volume pull %s` fetches it from the remote", err, vid)
		}
		return true, err
	}
	return true, writeJSON(g, out)
}
