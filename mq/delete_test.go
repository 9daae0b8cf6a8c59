package mq

import (
	"errors"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
)

// TestDeleteArchivedStream: the delete is fenced by the lease token (no
// token, a stale token and another holder's token delete nothing), deletes
// exactly the stream's live keys, keeps the token counter (the next lease's
// token is higher) and leaves a sibling stream alone. Plain and cluster.
func TestDeleteArchivedStream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		connect func(testing.TB, Options) *Client
	}{{"plain", plain}, {"cluster", cluster}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := tc.connect(t, Options{})
			q := queueName(t)
			setup := func(s string) {
				t.Helper()
				for i := 0; i < 3; i++ {
					if _, err := c.Append(ctx, q, s, Field{Name: "k", Value: "v"}); err != nil {
						t.Fatal(err)
					}
				}
				if err := c.PutArchived(ctx, q, s, Seam{W: brand.ID(1) << 22, LSN: 1}); err != nil {
					t.Fatal(err)
				}
			}
			setup("s")
			setup("sib")
			exists := func(key string) bool {
				t.Helper()
				n, err := c.rdb.Do(ctx, c.rdb.B().Exists().Key(key).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			}
			allThere := func(s string) {
				t.Helper()
				for _, k := range []string{StreamKey(q, s), SeamKey(q, s)} {
					if !exists(k) {
						t.Fatalf("%s deleted", k)
					}
				}
				if ok, err := c.IsArchived(ctx, q, s); err != nil || !ok {
					t.Fatalf("IsArchived(%s) = %v, %v", s, ok, err)
				}
			}

			// No lease at all: fenced.
			if _, err := c.DeleteArchivedStream(ctx, q, "s", 1); !errors.Is(err, ErrFenced) {
				t.Fatalf("delete without lease: %v, want ErrFenced", err)
			}
			allThere("s")

			// Another holder's token: fenced, its lease kept.
			other, err := c.TakeLease(ctx, q, "s", 0, time.Minute)
			if err != nil || other.Held {
				t.Fatalf("TakeLease: %+v, %v", other, err)
			}
			for _, tok := range []int64{other.Token + 1, other.Token - 1, 0} {
				if _, err := c.DeleteArchivedStream(ctx, q, "s", tok); !errors.Is(err, ErrFenced) {
					t.Fatalf("delete with token %d while %d holds: %v, want ErrFenced", tok, other.Token, err)
				}
			}
			allThere("s")
			if !exists(LeaseKey(q, "s")) {
				t.Fatal("a fenced delete removed the holder's lease")
			}
			if _, err := c.ReleaseLease(ctx, q, "s", other.Token); err != nil {
				t.Fatal(err)
			}

			// Our own lease: deleted.
			mine, err := c.TakeLease(ctx, q, "s", 0, time.Minute)
			if err != nil || mine.Held || mine.Token <= other.Token {
				t.Fatalf("TakeLease: %+v, %v (previous token %d)", mine, err, other.Token)
			}
			n, err := c.DeleteArchivedStream(ctx, q, "s", mine.Token)
			if err != nil || n != 3 {
				t.Fatalf("DeleteArchivedStream = %d, %v; want 3 entries", n, err)
			}
			for _, k := range []string{StreamKey(q, "s"), SeamKey(q, "s"), LeaseKey(q, "s")} {
				if exists(k) {
					t.Errorf("%s still exists", k)
				}
			}
			if !exists(LeaseSeqKey(q, "s")) {
				t.Error("the token counter was deleted")
			}
			if ok, err := c.IsArchived(ctx, q, "s"); err != nil || ok {
				t.Errorf("IsArchived after delete = %v, %v", ok, err)
			}
			allThere("sib")

			// The same (stale) token again: the lease is gone, fenced.
			if _, err := c.DeleteArchivedStream(ctx, q, "s", mine.Token); !errors.Is(err, ErrFenced) {
				t.Fatalf("second delete with the released token: %v, want ErrFenced", err)
			}
			// Tokens keep increasing.
			next, err := c.TakeLease(ctx, q, "s", 0, time.Minute)
			if err != nil || next.Token <= mine.Token {
				t.Fatalf("lease after delete: %+v, %v; want a token above %d", next, err, mine.Token)
			}
			// A missing stream with the lease held: deletes what is there.
			if n, err := c.DeleteArchivedStream(ctx, q, "s", next.Token); err != nil || n != 0 {
				t.Fatalf("delete of a deleted stream = %d, %v", n, err)
			}
		})
	}
}
