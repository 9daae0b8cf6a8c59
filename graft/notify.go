package graft

import (
	"context"
	"fmt"
	"iter"

	"github.com/echostore/echostore/graft/remote"
)

// Kinds of LSN events.
const (
	// EventCommit announces a local commit; LSN is the local LSN.
	EventCommit = "commit"
	// EventPush announces a push; LSN is the new remote LSN.
	EventPush = "push"
)

// Event is one announcement on a volume's LSN lane.
type Event struct {
	Volume string
	LSN    uint64
	Kind   string // EventCommit or EventPush
}

// Notifier carries LSN events between processes: the caller wires it to
// the volume's lane (package lane over mq.VolumeLane), so that graft
// itself depends on no server. Options.Notifier.
type Notifier interface {
	// Notify publishes an event on the volume's lane.
	Notify(ctx context.Context, e Event) error
	// Watch yields the events of volume published after Watch is called
	// (not after the iteration starts: an implementation fixes its position
	// in the call), blocking while there are none, until ctx ends.
	Watch(ctx context.Context, volume string) iter.Seq2[Event, error]
}

// notify publishes e if a Notifier is set. The commit or push it announces
// is already durable, so a failure is logged, not returned: a follower that
// misses an event catches up at the next one.
func (v *Volume) notify(ctx context.Context, kind string, lsn uint64) {
	n := v.s.opts.Notifier
	if n == nil {
		return
	}
	if err := n.Notify(ctx, Event{Volume: v.name, LSN: lsn, Kind: kind}); err != nil {
		v.s.log.Warn("graft: LSN event not published", "volume", v.name, "kind", kind, "lsn", lsn, "err", err)
	}
}

// Follow keeps the volume a follower of its remote: it pulls once, then
// waits on the volume's lane (Options.Notifier) and pulls whenever a push
// is announced above its remote LSN. A quiet volume costs no request to the
// remote: Follow blocks on the lane. applied, if not nil, is called after
// each pull with the sync point reached. Follow returns when ctx ends (with
// ctx's error) or on the first error of a pull or of the lane.
func (v *Volume) Follow(ctx context.Context, applied func(remote.SyncPoint)) error {
	n := v.s.opts.Notifier
	if n == nil {
		return fmt.Errorf("graft: follow volume %q: no Options.Notifier to wait on: %w", v.name, ErrNoRemote)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := n.Watch(ctx, v.name) // watch first: no push between the pull and the wait is missed
	pull := func() error {
		sp, err := v.Pull(ctx, nil)
		if err != nil {
			return err
		}
		if applied != nil {
			applied(sp)
		}
		return nil
	}
	if err := pull(); err != nil {
		return err
	}
	for e, err := range events {
		if err != nil {
			return fmt.Errorf("graft: follow volume %q: %w", v.name, err)
		}
		if e.Kind != EventPush || e.LSN <= v.state.Load().RemoteLSN {
			continue
		}
		if err := pull(); err != nil {
			return err
		}
	}
	return ctx.Err()
}
