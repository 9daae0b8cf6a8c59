package mq

import (
	"strings"
	"testing"
)

// TestScriptRun: a Script made by NewScript runs with mq's shared helpers
// in scope and replies through Run; one made by NewReadScript is refused a
// write; both are routed by their keys on a Cluster.
func TestScriptRun(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		key := StreamKey(q, "s")

		cmp := NewScript(`return cmpid(ARGV[1], ARGV[2])`)
		if !strings.HasPrefix(cmp.Source(), "#!lua\n") || !strings.HasSuffix(cmp.Source(), "return cmpid(ARGV[1], ARGV[2])") {
			t.Fatalf("source %q", cmp.Source())
		}
		for _, tc := range []struct {
			a, b string
			want int64
		}{{"9-0", "10-0", -1}, {"10-1", "10-1", 0}, {"18446744073709551615-2", "18446744073709551615-1", 1}} {
			if n, err := c.Run(ctx, cmp, []string{key}, []string{tc.a, tc.b}).Int(); err != nil || n != tc.want {
				t.Fatalf("cmpid(%s, %s) = %d, %v; want %d", tc.a, tc.b, n, err, tc.want)
			}
		}

		add := NewScript(`redis.call('XADD', KEYS[1], '5-1', 'k', 'v') return {'OK', lastid(KEYS[1])}`)
		if got, err := c.Run(ctx, add, []string{key}, nil).Strings(); err != nil || len(got) != 2 || got[0] != "OK" || got[1] != "5-1" {
			t.Fatalf("write script: %q, %v", got, err)
		}

		read := NewReadScript(`return redis.call('XLEN', KEYS[1])`)
		if !strings.HasPrefix(read.Source(), "#!lua flags=no-writes\n") {
			t.Fatalf("read source %q", read.Source())
		}
		if n, err := c.Run(ctx, read, []string{key}, nil).Int(); err != nil || n != 1 {
			t.Fatalf("read script: %d, %v", n, err)
		}
		sneak := NewReadScript(`return redis.call('DEL', KEYS[1])`)
		if err := c.Run(ctx, sneak, []string{key}, nil).Err(); err == nil {
			t.Fatal("a read script wrote")
		}
		if n, _ := c.Len(ctx, q, "s"); n != 1 {
			t.Fatalf("stream holds %d entries after the refused write, want 1", n)
		}
	})
}
