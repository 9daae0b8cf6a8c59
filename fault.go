package echostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// ErrInjectedFault is the error of a cycle that an armed fault failed
// (Node.ArmFault): the cycle folded, then failed before its trim, so the
// stream over-retains and loses nothing.
var ErrInjectedFault = errors.New("echostore: injected fault: the cycle failed after its fold and before its trim; trim skipped")

// faultPusher is the replication step of the faulty archiver: it fails, so
// a cycle run through that archiver commits its fold and never reaches the
// trim (archive.Archiver.Cycle trims nothing after an error).
type faultPusher struct{}

func (faultPusher) Push(context.Context, *graft.Volume) (remote.SyncPoint, error) {
	return remote.SyncPoint{}, ErrInjectedFault
}
func (faultPusher) Pushed(context.Context, *graft.Volume) (uint64, error) {
	return 0, ErrInjectedFault
}

// ArmFault arms a one-shot fault for the next archive cycle of ref, run by
// a beat or by Cycle: that cycle takes its lease, folds and commits as any
// other, then fails with ErrInjectedFault before its trim, which it skips,
// so the stream keeps every record live and loses nothing. The cycle after
// it trims again. Undeclare and Delete disarm it. It is the drill of a
// failed replication (serve's POST …/fault with faults: true).
func (n *Node) ArmFault(ref names.StreamRef) error {
	if ref.IsZero() {
		return fmt.Errorf("arm fault: no stream: %w", names.ErrInvalid)
	}
	if _, err := n.archiver(TrimAfterRemote, Retention{}); err != nil {
		return fmt.Errorf("arm fault %s: %w", ref, err)
	}
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults == nil {
		s.faults = map[names.StreamRef]bool{}
	}
	s.faults[ref] = true
	return nil
}

// Faults returns the streams with an armed fault, in name order.
func (n *Node) Faults() []names.StreamRef {
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.SortedFunc(maps.Keys(s.faults), func(a, b names.StreamRef) int { return cmp.Compare(a.String(), b.String()) })
}

// takeFault disarms and reports the fault armed for ref.
func (n *Node) takeFault(ref names.StreamRef) bool {
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	armed := s.faults[ref]
	delete(s.faults, ref)
	return armed
}

// takeFaults disarms and returns those of the declared archived streams
// with an armed fault.
func (n *Node) takeFaults(archived []DeclaredStream) []DeclaredStream {
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DeclaredStream
	for _, d := range archived {
		if s.faults[d.Ref] {
			out = append(out, d)
			delete(s.faults, d.Ref)
		}
	}
	return out
}

// faultyArchiver returns the archiver that runs a stream's cycle while a
// fault is armed: the archive package's own cycle (lease, fold, seam cache),
// trimming only what a push covers, through a pusher that always fails.
func (n *Node) faultyArchiver() (*archive.Archiver, error) {
	if err := n.needData("archive"); err != nil {
		return nil, err
	}
	if n.mq == nil {
		return nil, ErrNoRedis
	}
	a, err := archive.New(archive.Options{Store: n.store, Live: n.mq, Logger: n.log, TrimAfter: archive.TrimAfterRemote, Pusher: faultPusher{}})
	if err != nil {
		return nil, fmt.Errorf("echostore: %w", err)
	}
	return a, nil
}

// cycleFaulty runs the cycle of d, whose fault was armed, through the
// faulty archiver.
func (n *Node) cycleFaulty(ctx context.Context, d DeclaredStream) CycleReport {
	r := CycleReport{Ref: d.Ref, Window: d.Policy.Window}
	a, err := n.faultyArchiver()
	if err != nil {
		r.Err = err
		return r
	}
	r.Result, r.Err = a.Cycle(ctx, d.Ref, d.Policy.Window)
	return r
}
