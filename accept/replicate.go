package accept

import (
	"context"
	"fmt"

	"github.com/echostore/echostore/graft"
)

// Replicator pushes a volume's local commits to its remote log. Push returns
// the remote LSN whose commit covers every local commit of vol made before
// the call: the LSN a sync enqueue prints.
type Replicator interface {
	Push(ctx context.Context, vol *graft.Volume) (remoteLSN uint64, err error)
}

// VolumePusher is the Replicator of Graft's own replication: Volume.Push,
// over the remote store attached to the volume's Store (graft.Options.Remote
// or Store.AttachRemote). The sync point and the pending remote commit live
// in the volume's record, so `echostore volume push` and the accept tier
// agree on them.
type VolumePusher struct{}

// Push publishes vol's local commits above its sync point as one remote
// commit and returns the remote LSN of the new sync point.
func (VolumePusher) Push(ctx context.Context, vol *graft.Volume) (uint64, error) {
	sp, err := vol.Push(ctx)
	if err != nil {
		return 0, fmt.Errorf("accept: push %s: %w", vol.Name(), err)
	}
	return sp.Remote, nil
}
