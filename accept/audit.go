package accept

import (
	"context"
	"fmt"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// RemoteJobs reads the remote log of an accept volume as a follower does,
// from the object store alone, and returns every job it holds with the
// remote LSN of the commit that holds it. It is the audit of the sync
// promise: a job acknowledged with LSN L must be here at an LSN ≤ L. A job
// on two pages (committed twice) is an error wrapping ErrCorrupt.
func RemoteJobs(ctx context.Context, rs remote.Store, volume names.Volume) (map[brand.ID]uint64, error) {
	l, err := remote.NewLog(rs, volume)
	if err != nil {
		return nil, fmt.Errorf("accept: remote jobs of %s: %w", volume, err)
	}
	head, err := l.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("accept: remote jobs of %s: %w", volume, err)
	}
	jobs := map[brand.ID]uint64{}
	for lsn := uint64(1); lsn <= head; lsn++ {
		e, err := l.Read(ctx, lsn)
		if err != nil {
			return nil, fmt.Errorf("accept: remote jobs of %s, LSN %d: %w", volume, lsn, err)
		}
		for _, ref := range e.Commit.Pages() {
			b, err := l.FetchPage(ctx, ref)
			if err != nil {
				return nil, fmt.Errorf("accept: remote jobs of %s, LSN %d: %w", volume, lsn, err)
			}
			id, _, err := DecodeJobPage(b)
			if err != nil {
				return nil, fmt.Errorf("accept: remote jobs of %s, LSN %d: %w", volume, lsn, err)
			}
			if at, ok := jobs[id]; ok {
				return nil, fmt.Errorf("accept: job %s on two pages of %s, at remote LSNs %d and %d: %w", brand.JOB.Format(id), volume, at, lsn, ErrCorrupt)
			}
			jobs[id] = lsn
		}
	}
	return jobs, nil
}
