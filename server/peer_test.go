package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestSocketPeerScope: with tokens configured, a request over the unix
// socket from serve's own user (this test's) without an Authorization
// header has the admin scope; one that carries a token is judged by it (a
// read token cannot reach an admin route there either, a wrong one is
// 401). TCP still needs the token.
func TestSocketPeerScope(t *testing.T) {
	e := start(t, Config{Token: testToken, Tokens: scopedTokens()})
	q := queueName(t)
	path := e.srv.SocketPath()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	req := func(method, target, token, body string) (int, string) {
		t.Helper()
		r, _ := http.NewRequestWithContext(t.Context(), method, "http://serve"+target, strings.NewReader(body))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		r.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(r)
		if err != nil {
			t.Fatalf("%s %s over the socket: %v", method, target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &v)
		return resp.StatusCode, v.Error.Code
	}
	if code, c := req("POST", "/v1/streams/"+q+"/s", "", `{"fields":{"a":"1"}}`); code != 200 {
		t.Fatalf("append over the socket without a token: %d %s", code, c)
	}
	del := "/v1/streams/" + q + "/s?confirm=" + DeleteConfirm
	if code, c := req("DELETE", del, readToken, ""); code != http.StatusForbidden || c != CodeForbidden {
		t.Fatalf("delete (admin) over the socket with a read token: %d %s, want 403 %s", code, c, CodeForbidden)
	}
	if code, c := req("GET", "/v1/volumes", "wrong-token-0123456789abcdef", ""); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token over the socket: %d %s, want 401", code, c)
	}
	if code, c := req("DELETE", del, "", ""); code != 200 {
		t.Fatalf("delete (admin) over the socket without a token: %d %s, want 200", code, c)
	}
	if code, _ := e.do("GET", "/v1/volumes", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("TCP without a token: %d, want 401", code)
	}
}

// TestSocketPeerRefused: a socket request whose peer is another user is
// refused before anything else (403 CodePeerRefused), on every route and
// with a valid token, on a server with tokens and on one without; root
// and serve's own user pass. (TestSocketRefusesOtherUser in cmd/echostore
// runs real processes of other uids.)
func TestSocketPeerRefused(t *testing.T) {
	for _, cfg := range []Config{{}, {Token: testToken}} {
		e := start(t, cfg)
		own := uint32(os.Getuid())
		for _, c := range []struct {
			p    peer
			want int
		}{
			{peer{uid: own + 1000, known: true}, http.StatusForbidden},
			{peer{uid: own, known: true}, http.StatusOK},
			{peer{uid: 0, known: true}, http.StatusOK},
		} {
			for _, target := range []string{"/healthz", "/v1/volumes", "/metrics"} {
				r := httptest.NewRequestWithContext(context.WithValue(t.Context(), peerKey{}, c.p), "GET", "http://serve"+target, nil)
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.UnixAddr{Name: e.srv.SocketPath(), Net: "unix"}))
				r.Header.Set("Authorization", "Bearer "+testToken)
				w := httptest.NewRecorder()
				e.srv.Handler().ServeHTTP(w, r)
				if w.Code != c.want || (c.want == http.StatusForbidden && !strings.Contains(w.Body.String(), CodePeerRefused)) {
					t.Errorf("token %t, uid %d, GET %s: %d %s, want %d", cfg.Token != "", c.p.uid, target, w.Code, w.Body, c.want)
				}
			}
		}
	}
}
