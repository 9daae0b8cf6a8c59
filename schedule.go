package echostore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/names"
)

// Declare makes the node keep ref bounded by p on every beat (Run, Beat),
// replacing the policy it had. Without Redis it fails with ErrNoRedis; an
// archived policy needs the data dir too.
func (n *Node) Declare(ref names.StreamRef, p StreamPolicy) error {
	_, err := n.declare(ref, p, false)
	return err
}

// declare is Declare; with onlyNew it declares ref only if it is not
// declared, and reports whether it did.
func (n *Node) declare(ref names.StreamRef, p StreamPolicy, onlyNew bool) (bool, error) {
	if ref.IsZero() {
		return false, fmt.Errorf("declare: no stream: %w", names.ErrInvalid)
	}
	live, err := n.live()
	if err != nil {
		return false, err
	}
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.policies[ref]; ok && onlyNew {
		return false, nil
	}
	if s.ret == nil {
		s.ret = live.NewRetention(nil)
	}
	if p.Archived {
		d, err := n.driverLocked(p.driverKey())
		if err != nil {
			return false, fmt.Errorf("declare %s: %w", ref, err)
		}
		if err := d.Declare(ref, p.Window); err != nil {
			return false, fmt.Errorf("declare %s: %w", ref, err)
		}
	} else if err := s.ret.Declare(ref, p.Window); err != nil {
		return false, fmt.Errorf("declare %s: %w", ref, err)
	}
	// The old policy's driver forgets ref if it is another one (a trim-only
	// stream has the one retention, whatever its other fields say).
	if old, ok := s.policies[ref]; ok && (old.Archived != p.Archived || p.Archived && old.driverKey() != p.driverKey()) {
		s.forgetLocked(ref, old)
	}
	if s.policies == nil {
		s.policies = map[names.StreamRef]StreamPolicy{}
	}
	s.policies[ref] = p
	n.idle.forget(ref) // declared again: cycled on the next beat
	return true, nil
}

// driverLocked returns the archive driver of k, made on first use; s.mu is
// held.
func (n *Node) driverLocked(k driverKey) (*archive.Driver, error) {
	s := &n.sched
	if d, ok := s.drivers[k]; ok {
		return d, nil
	}
	a, err := n.archiver(k.ta, k.retain)
	if err != nil {
		return nil, err
	}
	if s.drivers == nil {
		s.drivers = map[driverKey]*archive.Driver{}
	}
	s.drivers[k] = a.NewDriver()
	return s.drivers[k], nil
}

// Undeclare stops keeping ref bounded, and returns the policy it had.
func (n *Node) Undeclare(ref names.StreamRef) (StreamPolicy, bool) {
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.policies[ref]
	if ok {
		s.forgetLocked(ref, p)
		delete(s.policies, ref)
		n.idle.forget(ref)
	}
	delete(s.faults, ref)
	return p, ok
}

// Declared returns the declared streams, in name order.
func (n *Node) Declared() []DeclaredStream {
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := slices.SortedFunc(maps.Keys(s.policies), func(a, b names.StreamRef) int { return cmp.Compare(a.String(), b.String()) })
	out := make([]DeclaredStream, len(refs))
	for i, ref := range refs {
		out[i] = DeclaredStream{Ref: ref, Policy: s.policies[ref]}
	}
	return out
}

// Beat runs one beat now: the discovery of the streams to adopt (with
// opts.Adopt, when due), an archive cycle of every declared archived
// stream that opts.Pick chooses, then a retention trim of every declared
// trim-only stream. A stream with an armed fault (ArmFault) is cycled
// whatever the pick, through the fault. One stream's failure does not stop the others: each
// report carries its own error. A beat that has begun runs to its end;
// Delete and Close wait for it. The callbacks of opts run inside the beat:
// they may Declare and Undeclare, but a Beat or a Delete from one would
// wait for itself.
func (n *Node) Beat(ctx context.Context, opts BeatOptions) {
	s := &n.sched
	s.beat.Lock()
	defer s.beat.Unlock()
	if s.closed {
		return
	}
	if opts.Adopt != nil {
		n.discover(ctx, opts.Adopt, opts.DiscoverEvery)
	}
	s.mu.Lock()
	keys := slices.SortedFunc(maps.Keys(s.drivers), func(a, b driverKey) int {
		return cmp.Or(cmp.Compare(a.ta, b.ta), cmp.Compare(a.retain.Count, b.retain.Count), cmp.Compare(a.retain.MaxAge, b.retain.MaxAge))
	})
	drivers := make([]*archive.Driver, len(keys))
	for i, k := range keys {
		drivers[i] = s.drivers[k]
	}
	ret := s.ret
	s.mu.Unlock()
	var archived []DeclaredStream
	for _, d := range n.Declared() {
		if d.Policy.Archived {
			archived = append(archived, d)
		}
	}
	var keep func(names.StreamRef) bool
	var due map[names.StreamRef]top // the idle skip's, with a nil Pick
	view := n.Group().Key()
	if opts.Pick != nil {
		keep = opts.Pick(ctx, archived)
	} else if len(archived) > 0 {
		keep, due = n.pickDue(ctx, archived, opts)
	}
	faulted := n.takeFaults(archived)
	if len(faulted) > 0 { // cycled below, through the fault
		pick, skip := keep, map[names.StreamRef]bool{}
		for _, d := range faulted {
			skip[d.Ref] = true
		}
		keep = func(ref names.StreamRef) bool { return !skip[ref] && (pick == nil || pick(ref)) }
	}
	for _, d := range drivers {
		reps, _ := d.CycleFunc(ctx, keep) // each report carries its own error
		for _, r := range reps {
			if due != nil {
				n.idle.cycled(r.Ref, due[r.Ref], r.Result, r.Err, view, time.Now())
			}
			if opts.OnCycle != nil {
				opts.OnCycle(r)
			}
		}
	}
	for _, d := range faulted {
		r := n.cycleFaulty(ctx, d)
		n.idle.forget(d.Ref) // its trim was skipped: due on the next beat
		if opts.OnCycle != nil {
			opts.OnCycle(r)
		}
	}
	if ret == nil {
		return
	}
	trs, _ := ret.Cycle(ctx)
	if opts.OnTrim != nil {
		for _, r := range trs {
			opts.OnTrim(r)
		}
	}
}

// Run keeps the declared streams bounded until ctx ends: a beat every
// opts.Beat (Beat), its group's heartbeats unless opts.Alone, and, with
// opts.CheckpointEvery, the accept outbox's checkpoints. Replication and the remote GC run in the background on
// their own (Config.ReplicateEvery, Config.GCEvery) from Open to Close,
// with or without Run. A beat that has begun when ctx ends runs to its end,
// unaffected by ctx's cancellation; Run returns once it and the
// checkpoints have stopped: nil, or the error of a node without Redis.
// Close ends Run as ctx's end would (after the beat in flight).
func (n *Node) Run(ctx context.Context, opts RunOptions) error {
	if _, err := n.live(); err != nil {
		return err
	}
	beat := opts.Beat
	if beat <= 0 {
		beat = DefaultBeat
	}
	if opts.Every == 0 {
		opts.Every = beat
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // Close ends Run as its context would
		select {
		case <-n.sched.done():
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	if !opts.Alone {
		n.join(GroupMember{Addr: opts.Addr, Node: n.cfg.NodeNumber, Started: startedNow()}, opts.OnGroup)
		// Its cycles are over when Run returns: the others take its share
		// on their next beat.
		defer n.leave(context.WithoutCancel(ctx))
		n.Heartbeat(ctx) // a failure: until one succeeds, it cycles every stream
		n.log.Info("echostore: node", "id", n.id, "group", n.Group().name())
		wg.Go(func() { every(ctx, HeartbeatEvery, func() { n.Heartbeat(ctx) }) })
	}
	if opts.CheckpointEvery > 0 {
		wg.Go(func() {
			every(ctx, opts.CheckpointEvery, func() {
				d, err := n.CheckpointOutbox(context.WithoutCancel(ctx))
				if opts.OnCheckpoint != nil && (d > 0 || err != nil) {
					opts.OnCheckpoint(d, err)
				}
			})
		})
	}
	every(ctx, beat, func() {
		bctx := context.WithoutCancel(ctx)
		if !opts.Alone {
			// A fresh view: a node that died or left since the last beat
			// no longer has a share.
			n.Heartbeat(bctx)
		}
		if opts.BeatFunc != nil {
			opts.BeatFunc(bctx)
		} else {
			n.Beat(bctx, opts.BeatOptions)
		}
	})
	wg.Wait()
	return nil
}

// CheckpointOutbox makes the accept outbox's accepted jobs durable now (a
// block and an fsync) if some are not, and returns how long that took (0
// when there was nothing to do, or no outbox yet).
func (n *Node) CheckpointOutbox(ctx context.Context) (time.Duration, error) {
	out := n.outbox()
	if out == nil {
		return 0, nil
	}
	if st := out.Stats(); st.Appended == st.Durable {
		return 0, nil
	}
	start := time.Now()
	if err := out.Flush(ctx); err != nil {
		return 0, fmt.Errorf("checkpoint the accept outbox: %w", err)
	}
	return max(time.Since(start), time.Nanosecond), nil
}
