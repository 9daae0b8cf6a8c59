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
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// DefaultBeat is how often Run cycles the declared streams when
// RunOptions.Beat is zero.
const DefaultBeat = 5 * time.Second

// StreamPolicy is how the node keeps one stream bounded on every beat
// (Declare, Run).
type StreamPolicy struct {
	// Archived makes each beat an archive cycle: the entries beyond Window
	// are folded into the stream's archive, then trimmed. Otherwise the
	// beat trims them (trim-only retention: they are gone).
	Archived bool
	// Window is what stays live: the newest Keep entries, and those younger
	// than MaxAge.
	Window Window
	// TrimAfter is when an archive cycle trims (archived streams only): once
	// the fold is committed in the data dir, or once it is in the remote.
	TrimAfter TrimAfter
	// Retain is the archive's own horizon (archived streams only): what
	// each cycle drops from the archive's oldest end.
	Retain Retention
}

// DeclaredStream is a stream the node keeps bounded, with its policy.
type DeclaredStream struct {
	Ref    names.StreamRef
	Policy StreamPolicy
}

// CycleReport is the outcome of one archive cycle of a beat: the stream,
// what the cycle did, and its error.
type CycleReport = archive.Report

// TrimReport is the outcome of one trim-only retention trim of a beat.
type TrimReport = mq.TrimReport

// BeatOptions adjust one beat (Beat, RunOptions).
type BeatOptions struct {
	// Pick returns which of the declared archived streams this beat cycles
	// (a nil func returned: every one). Nil picks, of those the node Cycles
	// (of a running node in a group, its share and those with commits the
	// remote lacks; of any other, every one), the ones due: an idle stream
	// costs a beat nothing (idle.go).
	Pick func(ctx context.Context, archived []DeclaredStream) func(names.StreamRef) bool
	// Sweep bounds how long an idle archived stream that others append to
	// (plain XADD, not through the node) waits for its cycle: the beat
	// reads the top of every idle stream of the node's share once per
	// Sweep (0: DefaultSweep), or per one second for each SweepProbes of
	// them if that is longer. Every is the period of the beats (0:
	// DefaultBeat; Run sets it), over which the sweep spreads its reads.
	Sweep, Every time.Duration
	// OnPicked, if set, gets the counts of each beat's pick of the due
	// streams (with a nil Pick).
	OnPicked func(BeatPicked)
	// OnCycle, if set, is called with each archive cycle's report, in name
	// order (a stream with an armed fault last: ArmFault); OnTrim with each
	// retention trim's.
	OnCycle func(CycleReport)
	OnTrim  func(TrimReport)
	// Adopt, if set, makes the beat discover the archived streams of the
	// node's Redis it may adopt (Adoptable: its share, not declared, its
	// archive within reach) on the first beat, then at most once per
	// DiscoverEvery (0: DefaultDiscoverEvery), and at once after the
	// node's group changed (a node died or joined, or one of them met a
	// new archived stream: Announce). Each one is offered to Adopt before
	// the beat's cycles; Adopt declares those it takes (Declare) and
	// returns why it leaves one alone, which is logged once per stream.
	Adopt         func(ctx context.Context, a Adoptable) error
	DiscoverEvery time.Duration
}

// RunOptions adjust Run.
type RunOptions struct {
	// Beat is how often the declared streams are cycled (0: DefaultBeat).
	Beat time.Duration
	// CheckpointEvery, when positive, makes the accept outbox's records
	// durable on that period (a block and an fsync), for a node opened with
	// Config.FlushInterval -1 that keeps the outbox's time bound itself;
	// OnCheckpoint, if set, gets each checkpoint's duration and error.
	CheckpointEvery time.Duration
	OnCheckpoint    func(time.Duration, error)
	// BeatOptions adjust each beat.
	BeatOptions
	// BeatFunc, if set, runs each beat in place of Beat(ctx,
	// opts.BeatOptions): a caller that does more around a beat (serve:
	// the group's gauges before it, the volume gauges after) calls Beat
	// from it.
	BeatFunc func(ctx context.Context)

	// Alone keeps the node out of its group: no heartbeats, and it cycles
	// every archived stream declared on it. Otherwise Run joins the group
	// of the nodes on its Redis and its remote (group.go): it heartbeats
	// every HeartbeatEvery and before each beat, each beat cycles the
	// node's share (Owns), a node that dies is out of the group within
	// HeartbeatTTL and its share moves to the others, and Run leaves the
	// group when it returns.
	Alone bool
	// Addr is what the node's heartbeat gives as its address
	// (GroupMember.Addr): where its API answers, if it has one.
	Addr string
	// OnGroup, if set, is called after each heartbeat that read the group,
	// with the view and whether it changed (other nodes, or another streams
	// epoch: the group met a new archived stream).
	OnGroup func(v *GroupView, changed bool)
}

// schedule is what the node keeps of its declared streams: each one's
// policy, the archive driver of each (trim_after, retention) pair and the
// trim-only retention. mu guards policies and drivers; beat orders a beat
// and a delete, so that a deleted stream is not cycled by a beat that
// listed it before.
type schedule struct {
	mu       sync.Mutex
	policies map[names.StreamRef]StreamPolicy
	drivers  map[driverKey]*archive.Driver
	ret      *mq.Retention
	faults   map[names.StreamRef]bool // armed one-shot faults (fault.go)
	closing  chan struct{}            // closed by close: Run returns (made on first use, done)
	beat     sync.Mutex
	closed   bool // under beat: the node is closing, no beat runs
	once     sync.Once
}

// done returns the channel close closes.
func (s *schedule) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing == nil {
		s.closing = make(chan struct{})
	}
	return s.closing
}

// close ends the schedule as the node closes: Run returns, the beat in
// flight is waited for, and no beat runs after it.
func (s *schedule) close() {
	s.done()
	s.once.Do(func() { close(s.closing) })
	s.beat.Lock()
	s.closed = true
	s.beat.Unlock()
}

// driverKey names one archive driver: what its cycles trim after and the
// archive's retention horizon they apply.
type driverKey struct {
	ta     archive.TrimAfter
	retain archive.Retention
}

func (p StreamPolicy) driverKey() driverKey { return driverKey{p.TrimAfter, p.Retain} }

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

// forgetLocked takes ref out of the driver or retention of p; s.mu is held.
func (s *schedule) forgetLocked(ref names.StreamRef, p StreamPolicy) {
	if !p.Archived {
		s.ret.Forget(ref)
	} else if d, ok := s.drivers[p.driverKey()]; ok {
		d.Forget(ref)
	}
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
		n.join(GroupMember{Addr: opts.Addr, Node: n.cfg.Node, Started: startedNow()}, opts.OnGroup)
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

// every calls f every d until ctx ends; a call that has begun runs to its
// end.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
