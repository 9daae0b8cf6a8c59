// Package lane wires graft's LSN events to Redis: a graft.Notifier that
// publishes each local commit and push of a volume on the volume's lane
// (mq.VolumeLane, emq:{vol.V}:lane:lsn) and lets followers block on it
// (XREAD BLOCK) instead of polling the remote. graft itself does not
// depend on Redis; the caller passes New(client) as graft.Options.Notifier.
//
// Each lane entry has the fields kind ("commit" or "push") and lsn
// (decimal).
//
// A process that wants the events of its own commits and pushes (serve's
// "lsn" events) registers with Local instead of following each volume's
// lane: every event is handed to the local listeners as it is published,
// so that watching any number of volumes costs no Redis connection, no
// goroutine and no command per volume.
package lane

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"sync"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// Notifier is a graft.Notifier over an mq client's volume lanes.
type Notifier struct {
	c *mq.Client

	mu    sync.Mutex
	local map[uint64]func(graft.Event) // Local's listeners, by registration
	next  uint64
}

var _ graft.Notifier = (*Notifier)(nil)

// New returns a Notifier publishing and following on c.
func New(c *mq.Client) *Notifier { return &Notifier{c: c, local: map[uint64]func(graft.Event){}} }

// Notify implements graft.Notifier: one XADD to the volume's lane; then
// the event goes to every Local listener (also when the XADD failed: the
// commit or push it announces happened).
func (n *Notifier) Notify(ctx context.Context, e graft.Event) error {
	l, err := lane(e.Volume)
	if err != nil {
		return err
	}
	_, err = n.c.Publish(ctx, l, mq.Field{Name: "kind", Value: e.Kind}, mq.Field{Name: "lsn", Value: strconv.FormatUint(e.LSN, 10)})
	n.deliver(e)
	if err != nil {
		return fmt.Errorf("lane: volume %s: publish %s %d: %w", e.Volume, e.Kind, e.LSN, err)
	}
	return nil
}

// Local calls f with every event Notify publishes from now on, until stop
// is called: the commits and pushes of this process, of every volume,
// without reading Redis. f runs in Notify, on the goroutine that committed
// or pushed, so it must not block (hand the event on, coalesced, to a
// goroutine of its own). After stop returns, f is not called again.
func (n *Notifier) Local(f func(graft.Event)) (stop func()) {
	n.mu.Lock()
	id := n.next
	n.next++
	n.local[id] = f
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		delete(n.local, id)
		n.mu.Unlock()
	}
}

// deliver hands e to the Local listeners. The lock is held while they
// run (they do not block), so that none runs after its stop returned.
func (n *Notifier) deliver(e graft.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range n.local {
		f(e)
	}
}

// Watch implements graft.Notifier: it follows the lane from its current
// top. Entries a follower missed because the lane's cap trimmed them are
// reported as a push at the largest LSN, so that the follower pulls.
//
// The lane's top is read when Watch is called (not when the iteration
// starts), so that nothing published after the call is missed.
func (n *Notifier) Watch(ctx context.Context, volume string) iter.Seq2[graft.Event, error] {
	l, err := lane(volume)
	var top brand.ID
	if err == nil {
		top, err = n.c.LaneTop(ctx, l)
	}
	return func(yield func(graft.Event, error) bool) {
		if err != nil {
			yield(graft.Event{}, fmt.Errorf("lane: volume %s: %w", volume, err))
			return
		}
		for e, err := range n.c.Follow(ctx, l, top) {
			if errors.Is(err, mq.ErrLaneGap) {
				if !yield(graft.Event{Volume: volume, Kind: graft.EventPush, LSN: math.MaxUint64}, nil) {
					return
				}
				continue
			}
			if err != nil {
				yield(graft.Event{}, err)
				return
			}
			ev, ok := decode(volume, e.Fields)
			if !ok {
				continue // not an LSN event: ignore
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func decode(volume string, fields []mq.Field) (graft.Event, bool) {
	ev := graft.Event{Volume: volume}
	var haveLSN bool
	for _, f := range fields {
		switch f.Name {
		case "kind":
			ev.Kind = f.Value
		case "lsn":
			n, err := strconv.ParseUint(f.Value, 10, 64)
			if err != nil {
				return ev, false
			}
			ev.LSN, haveLSN = n, true
		}
	}
	return ev, haveLSN && ev.Kind != ""
}

// lane returns the LSN lane of the volume named v; graft passes volume
// names as strings, so the name is checked here.
func lane(v string) (mq.Lane, error) {
	vol, err := names.ParseVolume(v)
	if err != nil {
		return mq.Lane{}, err
	}
	return mq.VolumeLane(vol)
}
