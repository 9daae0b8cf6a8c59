package echostore

import (
	"context"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// The options of the node's schedule, with their defaults and what their
// callbacks are given: a stream's policy (Declare), a beat's (Beat) and
// Run's. The work is elsewhere: schedule.go (Declare, Beat, Run), idle.go
// (the pick of the due streams), discover.go (Adopt), group.go (Run's
// group).

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

// Adoptable is an archived stream registered in Redis that the node may
// adopt (Node.Adoptable): its archive volume is in the data dir
// (LocalVolume), or nothing was folded for it yet, or its volume is in the
// remote (a cycle here pulls it first: the takeover of a dead or departed
// node's stream).
type Adoptable struct {
	Ref         names.StreamRef
	LocalVolume bool
}

// DefaultDiscoverEvery is the least time between two discoveries of the
// streams to adopt (BeatOptions.Adopt) when BeatOptions.DiscoverEvery is
// zero: each one SCANs the keyspace of every master.
const DefaultDiscoverEvery = time.Minute

// DefaultSweep is how often the beat reads the top of an idle archived
// stream to find entries that others appended, when BeatOptions.Sweep is
// zero.
const DefaultSweep = 60 * time.Second

// BeatPicked counts what a beat's pick of the due streams found (the idle
// skip, BeatOptions.OnPicked).
type BeatPicked struct {
	Due    int // cycled by this beat
	Swept  int // of those, found moved by the sweep
	Probed int // idle streams whose top the sweep read
	Idle   int // left alone
}
