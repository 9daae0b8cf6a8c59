package mq

import (
	"fmt"
	"strings"
	"testing"
)

// TestArchivedStreams: every stream registered as archived, in queues that
// hash to slots on several masters of the Cluster, is found once; keys that
// look like a registration set but name no valid queue, a key of another
// type, and a member that is not a valid stream name are skipped without
// failing the listing.
func TestArchivedStreams(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		base := queueName(t)
		want := map[StreamRef]bool{}
		for i := range 40 {
			q := fmt.Sprintf("%s.q%d", base, i)
			for _, s := range []string{"a", "b.c"}[:1+i%2] {
				if err := c.RegisterArchived(ctx, q, s); err != nil {
					t.Fatal(err)
				}
				want[StreamRef{q, s}] = true
			}
		}
		raw := func(args ...string) {
			t.Helper()
			if err := c.rdb.Do(ctx, c.rdb.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).Error(); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
		}
		raw("SADD", "emq:{"+base+".bad:name}:archived", "a")        // a queue name with ':'
		raw("SADD", "emq:{"+base+".x}:y}:archived", "a")            // a queue name with '}'
		raw("SADD", "emq:{"+base+".q0}:archived", "bad:stream", "") // members that are no stream names
		raw("SET", "emq:{"+base+".string}:archived", "a")           // not a set

		got := map[StreamRef]bool{}
		for ref, err := range c.ArchivedStreams(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(ref.Queue, base+".") {
				continue // another test's
			}
			if got[ref] {
				t.Fatalf("%v yielded twice", ref)
			}
			got[ref] = true
		}
		for ref := range got {
			if !want[ref] {
				t.Errorf("ArchivedStreams yielded %v, which is not a registered stream", ref)
			}
		}
		for ref := range want {
			if !got[ref] {
				t.Errorf("ArchivedStreams missed %v", ref)
			}
		}
		if t.Failed() {
			t.FailNow()
		}

		// The registrations are spread over the masters (several slots).
		masters, holders := 0, 0
		for _, n := range c.rdb.Nodes() {
			if master, err := isMaster(n.Do(ctx, n.B().Role().Build())); err != nil || !master {
				continue
			}
			masters++
			for _, err := range scanKeys(ctx, n, "emq:{"+base+".q*}:archived", "set") {
				if err != nil {
					t.Fatal(err)
				}
				holders++
				break
			}
		}
		if holders != masters {
			t.Fatalf("the registrations are on %d of %d masters", holders, masters)
		}

		// The caller can stop early.
		n := 0
		for _, err := range c.ArchivedStreams(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			break
		}
		if n != 1 {
			t.Fatalf("stopped after %d streams, want 1", n)
		}
	})
}
