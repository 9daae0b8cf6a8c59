package graft

import (
	"context"
	"testing"
	"time"

	"github.com/echostore/echostore/graft/remote"
)

// TestHeadDiscoveryCost: the requests a follower makes to find the head do
// not grow with the log. A log of n small inline commits (the last one a
// checkpoint) is built on mem://; a fresh follower's pull (newest
// checkpoint, then the head) and a quiet follower's pull are counted at
// n = 10, 1,000 and 100,000 and must cost the same.
func TestHeadDiscoveryCost(t *testing.T) {
	ctx := context.Background()
	sizes := []uint64{10, 1000, 100_000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	var fresh, quiet []remote.Counts
	for _, n := range sizes {
		start := time.Now()
		rs := openRemote(t, "mem://")
		l := mustLog(t, rs, "head")
		var prev remote.Hash
		for lsn := uint64(1); lsn <= n; lsn++ {
			d := remote.Draft{LSN: lsn, Prev: prev, LocalFrom: lsn - 1, LocalTo: lsn,
				Pages: []remote.Page{{Index: 0, Data: []byte{byte(lsn)}}}}
			if lsn == n {
				d.LocalFrom, d.Checkpoint = lsn, true
			}
			e, err := l.Append(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			prev = e.Hash
		}
		built := time.Since(start)
		cs := remote.NewCountingStore(rs)
		v := mustCreate(t, openMem(t, nil, Options{Remote: cs}), "head")
		sp, err := v.Pull(ctx, nil)
		if err != nil || sp.Remote != n || v.Head() != 1 {
			t.Fatalf("n=%d: pull: %+v, head %d, %v", n, sp, v.Head(), err)
		}
		fresh = append(fresh, cs.Counts())
		cs.Reset()
		if _, err := v.Pull(ctx, nil); err != nil {
			t.Fatal(err)
		}
		quiet = append(quiet, cs.Counts())
		t.Logf("n=%d (built in %v): fresh follower %+v, quiet follower %+v", n, built.Round(time.Millisecond), fresh[len(fresh)-1], quiet[len(quiet)-1])
	}
	for k := range sizes {
		if fresh[k] != fresh[0] || quiet[k] != quiet[0] {
			t.Fatalf("requests grow with the log: fresh %+v, quiet %+v", fresh, quiet)
		}
	}
	if quiet[0].Total() != 1 || fresh[0].Total() > 5 {
		t.Fatalf("fresh %+v, quiet %+v", fresh[0], quiet[0])
	}
}
