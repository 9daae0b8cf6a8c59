package accept

import (
	"context"
	"fmt"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
)

// Replicator pushes a volume's local commits to its remote log.
// graft.Replication implements it with Graft's own Volume.Push, over the
// remote store attached to the volume's Store (graft.Options.Remote or
// Store.AttachRemote): the sync point and the pending remote commit live in
// the volume's record, so `echostore volume push` and the accept tier agree
// on them.
type Replicator interface {
	// Push returns the volume's new sync point, whose Remote LSN covers
	// every local commit of vol made before the call: the LSN a sync
	// enqueue prints.
	Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error)
}

// push pushes vol through t's replicator and returns the remote LSN of its
// new sync point.
func (t *Tier) push(ctx context.Context, vol *graft.Volume) (uint64, error) {
	sp, err := t.rep.Push(ctx, vol)
	if err != nil {
		return 0, fmt.Errorf("accept: push %s: %w", vol.Name(), err)
	}
	return sp.Remote, nil
}
