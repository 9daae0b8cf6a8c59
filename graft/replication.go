package graft

import (
	"context"

	"github.com/echostore/echostore/graft/remote"
)

// Replication is graft's own replication as a value, for the layers that
// take a pusher as a dependency (the archive's cycle, the accept tier): Push
// is Volume.Push and Pushed the local LSN that the volume's sync point
// covers. The volume's store needs a remote attached (Options.Remote or
// Store.AttachRemote); without one Push fails with ErrNoRemote. The zero
// value is ready to use.
type Replication struct{}

// Push publishes vol's local commits above its sync point as one remote
// commit and returns the new sync point.
func (Replication) Push(ctx context.Context, vol *Volume) (remote.SyncPoint, error) {
	return vol.Push(ctx)
}

// Pushed returns the newest local LSN of vol that the remote holds (0:
// none), the Local of its sync point.
func (Replication) Pushed(ctx context.Context, vol *Volume) (uint64, error) {
	sp, err := vol.SyncPoint(ctx)
	return sp.Local, err
}
