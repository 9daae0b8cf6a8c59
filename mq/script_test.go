package mq

import (
	"strings"
	"testing"
)

// TestScriptRun: a Script made by NewScript runs with mq's shared helpers
// in scope, replies through Run, and is routed by its keys on a Cluster;
// the plain commands beside it read and write what it does.
func TestScriptRun(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		key := StreamKey(mustRef(t, q, "s"))

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

		if n, _ := c.Len(ctx, mustRef(t, q, "s")); n != 1 {
			t.Fatalf("stream holds %d entries, want 1", n)
		}
		set, hash := ArchivedSetKey(mustQueue(t, q)), StreamKey(mustRef(t, q, "s"))+":h"
		if err := c.SAdd(ctx, set, "s"); err != nil {
			t.Fatal(err)
		}
		if ok, err := c.SIsMember(ctx, set, "s"); err != nil || !ok {
			t.Fatalf("SIsMember after SAdd: %v, %v", ok, err)
		}
		if ok, err := c.SIsMember(ctx, set, "t"); err != nil || ok {
			t.Fatalf("SIsMember of another member: %v, %v", ok, err)
		}
		if m, err := c.HGetAll(ctx, hash); err != nil || len(m) != 0 {
			t.Fatalf("HGetAll of a missing hash: %v, %v", m, err)
		}
		hset := NewScript(`return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])`)
		if err := c.Run(ctx, hset, []string{hash}, []string{"f", "v"}).Err(); err != nil {
			t.Fatal(err)
		}
		if m, err := c.HGetAll(ctx, hash); err != nil || len(m) != 1 || m["f"] != "v" {
			t.Fatalf("HGetAll: %v, %v", m, err)
		}
	})
}
