package server

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/echostore/echostore/internal/testserver"
)

// TestWrongType: every stream route on a Redis key that holds another type
// (a hash, a string) answers 409 wrong_type with a message naming the key
// and its type, never a 5xx, and leaves the key as it was.
func TestWrongType(t *testing.T) {
	e := start(t, Config{})
	addr := strings.TrimPrefix(e.cfg.Redis, "redis://")
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	ctx := context.Background()
	q := queueName(t)
	keys := map[string]string{q + ":hash": "hash", q + ":str": "string"}
	if _, err := testserver.Do(ctx, addr, "HSET", q+":hash", "a", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := testserver.Do(ctx, addr, "SET", q+":str", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := testserver.Do(ctx, addr, "HSET", "emq:{"+q+"}:stream:hs", "a", "1"); err != nil {
		t.Fatal(err)
	}
	keys["emq:{"+q+"}:stream:hs"] = "hash"
	type call struct{ method, path, body string }
	check := func(key, typ string, calls []call) {
		t.Helper()
		for _, c := range calls {
			code, b := e.do(c.method, c.path, "", strings.NewReader(c.body))
			var eb struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(b, &eb)
			if code != 409 || eb.Error.Code != "wrong_type" || !strings.Contains(eb.Error.Message, "holds a "+typ+", not a stream") ||
				!strings.Contains(eb.Error.Message, key) {
				t.Errorf("%s %s: %d %s, want 409 wrong_type naming %q and %s", c.method, c.path, code, b, key, typ)
			}
		}
	}
	for k, typ := range keys {
		if strings.HasPrefix(k, "emq:") {
			continue
		}
		p := "/v1/keys/" + url.PathEscape(k)
		check(k, typ, []call{{"POST", p, `{"fields":{"a":"b"}}`}, {"GET", p, ""}, {"GET", p + "?live_only=true", ""},
			{"POST", p + "/cycle", ""}, {"GET", p + "/archive", ""}, {"GET", p + "/groups", ""},
			{"POST", p + "/replay", `{"into":"x` + q + `"}`}, {"DELETE", p + "?confirm=yes-delete-history", ""}})
	}
	p := "/v1/streams/" + q + "/hs"
	check("emq:{"+q+"}:stream:hs", "hash", []call{{"POST", p, `{"fields":{"a":"b"}}`}, {"GET", p, ""},
		{"POST", p + "/cycle", ""}, {"GET", p + "/archive", ""}, {"GET", p + "/groups", ""}})
	for k, typ := range keys {
		if got, err := testserver.Do(ctx, addr, "TYPE", k); err != nil || got != typ {
			t.Errorf("TYPE %s after the requests: %q, %v; want %s", k, got, err, typ)
		}
	}
}
