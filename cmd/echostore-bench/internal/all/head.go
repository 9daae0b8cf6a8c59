package all

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/names"
)

// HeadLookupReport is the object-store requests a follower makes to find
// a volume's remote head, against the length of the remote log, beside the
// probing lookup (GET LSN+1, LSN+2, … until a 404) counted on the same log.
type HeadLookupReport struct {
	Remote string       `json:"remote"`
	Sizes  []HeadLookup `json:"sizes"`
}

// HeadLookup is one log length.
type HeadLookup struct {
	LSNs        uint64        `json:"lsns"`
	Fresh       remote.Counts `json:"fresh_follower"` // a follower with nothing local: Pull
	Quiet       remote.Counts `json:"quiet_follower"` // a follower at the head: Pull again
	FreshTotal  int64         `json:"fresh_requests"`
	QuietTotal  int64         `json:"quiet_requests"`
	ProbeFresh  int64         `json:"probe_fresh_requests"` // GETs from LSN 1 until a 404
	ProbeQuiet  int64         `json:"probe_quiet_requests"` // GETs from the head + 1 until a 404
	BuildMillis float64       `json:"build_ms"`
}

func runHead(ctx context.Context, sizes []uint64, p *bench.Progress) (*HeadLookupReport, error) {
	r := &HeadLookupReport{Remote: "mem:// (requests counted, not timed)"}
	for _, n := range sizes {
		p.Step(fmt.Sprintf("a remote log of %d LSNs", n))
		h, err := headLookup(ctx, n)
		if err != nil {
			return nil, err
		}
		r.Sizes = append(r.Sizes, h)
	}
	return r, nil
}

func headLookup(ctx context.Context, n uint64) (HeadLookup, error) {
	h := HeadLookup{LSNs: n}
	vol, err := names.ParseVolume("bench.head")
	if err != nil {
		return h, err
	}
	rs, err := remote.Open(ctx, "mem://", drivers.All()...)
	if err != nil {
		return h, err
	}
	defer rs.Close()
	l, err := remote.NewLog(rs, vol)
	if err != nil {
		return h, err
	}
	t0 := time.Now()
	var prev remote.Hash
	for lsn := uint64(1); lsn <= n; lsn++ {
		d := remote.Draft{LSN: lsn, Prev: prev, LocalFrom: lsn - 1, LocalTo: lsn,
			Pages: []remote.Page{{Index: 0, Data: []byte{byte(lsn)}}}}
		if lsn == n { // the newest commit is a checkpoint, as a push leaves it
			d.LocalFrom, d.Checkpoint = lsn, true
		}
		e, err := l.Append(ctx, d)
		if err != nil {
			return h, err
		}
		prev = e.Hash
	}
	h.BuildMillis = ms(time.Since(t0))

	cs := remote.NewCountingStore(rs)
	st, err := graft.Open(ctx, "graft", graft.Options{FS: vfs.NewMem(), Remote: cs})
	if err != nil {
		return h, err
	}
	defer st.Close()
	vn := vol
	v, err := st.CreateVolume(ctx, vn)
	if err != nil {
		return h, err
	}
	sp, err := v.Pull(ctx, nil)
	if err != nil {
		return h, err
	}
	if sp.Remote != n {
		return h, fmt.Errorf("pull of %d LSNs reached LSN %d", n, sp.Remote)
	}
	h.Fresh = cs.Counts()
	cs.Reset()
	if _, err := v.Pull(ctx, nil); err != nil {
		return h, err
	}
	h.Quiet = cs.Counts()
	h.FreshTotal, h.QuietTotal = h.Fresh.Total(), h.Quiet.Total()

	// The probing lookup on the same log, counted by the same wrapper.
	probe := func(from uint64) (int64, error) {
		cs.Reset()
		for lsn := from; ; lsn++ {
			_, err := cs.Get(ctx, remote.LogKey(vol.String(), lsn))
			if errors.Is(err, remote.ErrNotFound) {
				return cs.Counts().Total(), nil
			}
			if err != nil {
				return 0, err
			}
		}
	}
	if h.ProbeFresh, err = probe(1); err != nil {
		return h, err
	}
	if h.ProbeQuiet, err = probe(n + 1); err != nil {
		return h, err
	}
	return h, nil
}
