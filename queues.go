package echostore

import (
	"context"
	"fmt"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// ListedJob is api.ListedJob: one job of a JobList, its state, entry, id,
// attempts and fields.
type ListedJob = api.ListedJob

// JobState is api.JobState: a state of the jobs of a queue, ready,
// pending, delayed or dead (api.ParseJobState reads it).
type JobState = api.JobState

// JobList is api.JobList: the answer of Node.Jobs, jobs of one state,
// oldest first.
type JobList = api.JobList

// DeleteDeadResult is api.DeleteDeadResult: the answer of Node.DeleteDead.
type DeleteDeadResult = api.DeleteDeadResult

// StreamGroup is api.StreamGroup: one consumer group of a stream, XINFO
// GROUPS, whether it holds the trim back and the last cycle's verdict.
type StreamGroup = api.StreamGroup

// GroupList is api.GroupList: the answer of Node.Groups.
type GroupList = api.GroupList

// MaxListedQueues bounds Node.Queues.
const MaxListedQueues = api.MaxListedQueues

// Queues lists the queues that have a job stream in Redis, at most
// MaxListedQueues, in the order Redis's SCAN finds them.
func (n *Node) Queues(ctx context.Context) ([]names.Queue, error) {
	live, err := n.live()
	if err != nil {
		return nil, err
	}
	out := []names.Queue{}
	for q, err := range live.Queues(ctx) {
		if err != nil {
			return out, err
		}
		if out = append(out, q); len(out) >= MaxListedQueues {
			break
		}
	}
	return out, nil
}

// Jobs lists up to limit (1 … MaxBatch) jobs of queue q in state st,
// oldest first. A listing that failed part way returns what it read with
// the error.
func (n *Node) Jobs(ctx context.Context, q names.Queue, st JobState, limit int) (JobList, error) {
	live, err := n.live()
	if err != nil {
		return JobList{}, err
	}
	if q.IsZero() {
		return JobList{}, fmt.Errorf("jobs: no queue: %w", names.ErrInvalid)
	}
	if limit < 1 || limit > MaxBatch {
		return JobList{}, fmt.Errorf("jobs limit %d: want 1 to %d: %w", limit, MaxBatch, ErrInvalid)
	}
	jobs, err := live.Jobs(ctx, q, st, limit)
	if jobs == nil {
		jobs = []ListedJob{}
	}
	return JobList{Jobs: jobs}, err
}

// DeleteDead deletes the dead letters of queue q at entries (1 …
// MaxBatch of them). A deleted dead letter exists nowhere else: the
// caller confirms first (serve asks for ?confirm=DeleteDeadConfirm).
func (n *Node) DeleteDead(ctx context.Context, q names.Queue, entries []string) (DeleteDeadResult, error) {
	live, err := n.live()
	if err != nil {
		return DeleteDeadResult{}, err
	}
	switch {
	case q.IsZero():
		return DeleteDeadResult{}, fmt.Errorf("delete dead: no queue: %w", names.ErrInvalid)
	case len(entries) == 0:
		return DeleteDeadResult{}, fmt.Errorf("delete dead: no entries: %w", ErrInvalid)
	case len(entries) > MaxBatch:
		return DeleteDeadResult{}, fmt.Errorf("delete dead: %d entries, at most %d at a time: %w", len(entries), MaxBatch, ErrInvalid)
	}
	for _, e := range entries {
		if err := mq.CheckEntryID(e); err != nil {
			return DeleteDeadResult{}, fmt.Errorf("delete dead: entry %q: %w", e, err)
		}
	}
	deleted, err := live.DeleteDead(ctx, q, entries...)
	if err != nil {
		return DeleteDeadResult{}, err
	}
	return DeleteDeadResult{Deleted: deleted}, nil
}

// Groups lists the consumer groups of the stream ref, each with whether
// it holds the trim back and the last archive cycle's verdict on it.
func (n *Node) Groups(ctx context.Context, ref names.StreamRef) (GroupList, error) {
	live, err := n.live()
	if err != nil {
		return GroupList{}, err
	}
	gs, err := live.Groups(ctx, ref)
	if err != nil {
		return GroupList{}, err
	}
	at, stalled, err := archive.StalledGroups(ctx, live, ref)
	if err != nil {
		return GroupList{}, err
	}
	reason := map[string]string{}
	for _, g := range stalled {
		reason[g.Group] = g.Reason
	}
	out := GroupList{Groups: make([]StreamGroup, 0, len(gs))}
	if !at.IsZero() {
		out.CheckedAt = at.UTC().Format(time.RFC3339Nano)
	}
	for _, g := range gs {
		out.Groups = append(out.Groups, StreamGroup{GroupInfo: g, HoldsTrim: g.Pending > 0 || g.Lag == nil || *g.Lag > 0, Stalled: reason[g.Name]})
	}
	return out, nil
}
