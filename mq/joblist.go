package mq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/names"
)

// JobState is api.JobState: where a job of a queue is, what a listing of
// the queue's jobs selects.
type JobState = api.JobState

// The states of a job (api's).
const (
	// Ready: in the job stream, not yet delivered to any consumer.
	Ready = api.JobReady
	// Pending: delivered to a consumer and not yet acknowledged.
	Pending = api.JobPending
	// Delayed: waiting in the delayed set for its time (RunAt, or a retry's
	// backoff).
	Delayed = api.JobDelayed
	// DeadState: a dead letter (it used up its attempts).
	DeadState = api.JobDead
)

var (
	// ErrJobState: a job state that is not one of ready, pending, delayed
	// and dead (api.ErrJobState).
	ErrJobState = api.ErrJobState
	// ErrListLimit: a listing of jobs of more than 1000 or fewer than 1.
	ErrListLimit = errors.New("mq: list limit out of range (want 1 to 1000)")
)

// ParseJobState is api.ParseJobState: it parses a state's name.
func ParseJobState(s string) (JobState, error) { return api.ParseJobState(s) }

// ListedJob is api.ListedJob: one job of a listing of a queue's jobs in
// one state.
type ListedJob = api.ListedJob

// Jobs lists up to n (1 to 1000) jobs of q in state st, oldest first:
// ready jobs after the group's last delivered entry, pending ones with
// their consumer and idle time, delayed ones by due time, dead letters.
// It reads and changes nothing else. Entries that are not jobs are
// skipped and reported in the error (wrapping ErrInvalidRecord) beside
// the jobs read.
func (c *Client) Jobs(ctx context.Context, q names.Queue, st JobState, n int) ([]ListedJob, error) {
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("list jobs of %s: limit %d: %w", q, n, ErrListLimit)
	}
	switch st {
	case Ready:
		return c.readyJobs(ctx, q, n)
	case Pending:
		return c.pendingJobs(ctx, q, n)
	case Delayed:
		return c.delayedJobs(ctx, q, n)
	case DeadState:
		dead, err := c.Dead(ctx, q, "", n)
		out := make([]ListedJob, 0, len(dead))
		for _, d := range dead {
			out = append(out, ListedJob{State: DeadState, EntryID: d.EntryID, ID: d.ID, Attempt: d.Attempts, Error: d.Error, Fields: d.Fields})
		}
		return out, err
	}
	return nil, fmt.Errorf("list jobs of %s: %w", q, ErrJobState)
}

// lastDelivered returns the job stream's consumer group's last delivered
// entry ("" when the group does not exist yet: nothing was delivered).
func (c *Client) lastDelivered(ctx context.Context, q names.Queue) (string, error) {
	groups, err := c.rdb.Do(ctx, c.rdb.B().XinfoGroups().Key(JobsKey(q)).Build()).ToArray()
	if err != nil {
		if isNoGroup(err) || strings.Contains(err.Error(), "no such key") {
			return "", nil
		}
		return "", err
	}
	for _, g := range groups {
		m, err := g.AsStrMap()
		if err != nil {
			continue
		}
		if m["name"] == c.opts.Jobs.Group {
			return m["last-delivered-id"], nil
		}
	}
	return "", nil
}

func (c *Client) readyJobs(ctx context.Context, q names.Queue, n int) ([]ListedJob, error) {
	last, err := c.lastDelivered(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list ready jobs of %s: %w", q, err)
	}
	start := "-"
	if last != "" && last != "0-0" {
		start = "(" + last
	}
	key := JobsKey(q)
	msgs, err := c.rdb.Do(ctx, c.rdb.B().Xrange().Key(key).Start(start).End("+").Count(int64(n)).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("list ready jobs of %s: %w", q, err)
	}
	entries, err := rawEntries(msgs)
	if err != nil {
		return nil, fmt.Errorf("list ready jobs of %s: %w", q, err)
	}
	out := make([]ListedJob, 0, len(entries))
	var errs []error
	for _, e := range entries {
		d, err := decodeJob(key, e.xid, e.kv, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ListedJob{State: Ready, EntryID: d.EntryID, ID: d.ID, Attempt: d.Attempt, Fields: d.Fields})
	}
	return out, errors.Join(errs...)
}

func (c *Client) pendingJobs(ctx context.Context, q names.Queue, n int) ([]ListedJob, error) {
	key := JobsKey(q)
	b := c.rdb.B()
	rows, err := c.rdb.Do(ctx, b.Xpending().Key(key).Group(c.opts.Jobs.Group).Start("-").End("+").Count(int64(n)).Build()).ToArray()
	if err != nil {
		if isNoGroup(err) {
			return []ListedJob{}, nil
		}
		return nil, fmt.Errorf("list pending jobs of %s: %w", q, err)
	}
	type row struct {
		xid, consumer string
		idle, times   int64
	}
	rs := make([]row, 0, len(rows))
	for _, r := range rows {
		p, err := r.ToArray()
		if err != nil || len(p) != 4 {
			return nil, fmt.Errorf("list pending jobs of %s: unexpected XPENDING reply shape", q)
		}
		var x row
		x.xid, _ = p[0].ToString()
		x.consumer, _ = p[1].ToString()
		x.idle, _ = p[2].AsInt64()
		x.times, _ = p[3].AsInt64()
		rs = append(rs, x)
	}
	if len(rs) == 0 {
		return []ListedJob{}, nil
	}
	cmds := make(rueidis.Commands, 0, len(rs))
	for _, x := range rs {
		cmds = append(cmds, b.Xrange().Key(key).Start(x.xid).End(x.xid).Build())
	}
	out := make([]ListedJob, 0, len(rs))
	var errs []error
	for i, res := range c.rdb.DoMulti(ctx, cmds...) {
		msgs, err := res.ToArray()
		if err != nil {
			errs = append(errs, fmt.Errorf("list pending jobs of %s: %w", q, err))
			continue
		}
		entries, err := rawEntries(msgs)
		if err != nil || len(entries) != 1 {
			continue // acknowledged (and deleted) since XPENDING
		}
		d, err := decodeJob(key, entries[0].xid, entries[0].kv, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ListedJob{State: Pending, EntryID: d.EntryID, ID: d.ID, Attempt: d.Attempt,
			Consumer: rs[i].consumer, Idle: time.Duration(rs[i].idle) * time.Millisecond, Fields: d.Fields})
	}
	return out, errors.Join(errs...)
}

func (c *Client) delayedJobs(ctx context.Context, q names.Queue, n int) ([]ListedJob, error) {
	key := DelayedKey(q)
	zs, err := c.rdb.Do(ctx, c.rdb.B().Zrange().Key(key).Min("0").Max(strconv.Itoa(n-1)).Withscores().Build()).AsZScores()
	if err != nil {
		return nil, fmt.Errorf("list delayed jobs of %s: %w", q, err)
	}
	out := make([]ListedJob, 0, len(zs))
	var errs []error
	for _, z := range zs {
		var kv []string
		if err := json.Unmarshal([]byte(z.Member), &kv); err != nil {
			errs = append(errs, &EntryError{Key: key, XID: clip(z.Member), Err: fmt.Errorf("not a delayed job: %w", ErrInvalidRecord)})
			continue
		}
		d, err := decodeJob(key, "", kv, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ListedJob{State: Delayed, ID: d.ID, Attempt: d.Attempt, Due: time.UnixMilli(int64(z.Score)), Fields: d.Fields})
	}
	return out, errors.Join(errs...)
}

// DeleteDead deletes dead letters of q by their entry ids and returns how
// many there were. The jobs are gone for good: callers confirm first.
func (c *Client) DeleteDead(ctx context.Context, q names.Queue, entryIDs ...string) (int64, error) {
	if err := checkQueue(q); err != nil {
		return 0, err
	}
	if len(entryIDs) == 0 {
		return 0, nil
	}
	if err := checkEntryIDs(entryIDs); err != nil {
		return 0, fmt.Errorf("delete dead letters of %s: %w", q, err)
	}
	n, err := c.rdb.Do(ctx, c.rdb.B().Xdel().Key(DeadKey(q)).Id(entryIDs...).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("delete dead letters of %s: %w", q, err)
	}
	return n, nil
}

// Queues yields the queues that have a job stream in Redis (SCAN, on
// every master), each possibly more than once (SCAN's promise).
func (c *Client) Queues(ctx context.Context) iter.Seq2[names.Queue, error] {
	return func(yield func(names.Queue, error) bool) {
		for key, err := range c.ScanKeys(ctx, "emq:{*}:jobs", "stream") {
			if err != nil {
				yield(names.Queue{}, err)
				return
			}
			name := strings.TrimSuffix(strings.TrimPrefix(key, "emq:{"), "}:jobs")
			q, err := names.ParseQueue(name)
			if err != nil {
				continue // not a key of a queue's job stream
			}
			if !yield(q, nil) {
				return
			}
		}
	}
}

// UsedMemory returns Redis's used_memory (INFO memory), summed over every
// master of a Cluster.
func (c *Client) UsedMemory(ctx context.Context) (int64, error) {
	var total int64
	for addr, n := range c.rdb.Nodes() {
		master, err := isMaster(n.Do(ctx, n.B().Role().Build()))
		if err != nil {
			return 0, fmt.Errorf("ROLE on %s: %w", addr, err)
		}
		if !master {
			continue
		}
		info, err := n.Do(ctx, n.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			return 0, fmt.Errorf("INFO memory on %s: %w", addr, err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO memory on %s: used_memory %q: %w", addr, v, err)
				}
				total += n
			}
		}
	}
	return total, nil
}

// GroupInfo is api.GroupInfo: one consumer group of a stream (XINFO
// GROUPS).
type GroupInfo = api.GroupInfo

// Groups returns the consumer groups of the stream ref, by name (none for a
// stream without groups or without entries).
func (c *Client) Groups(ctx context.Context, ref names.StreamRef) ([]GroupInfo, error) {
	groups, err := c.rdb.Do(ctx, c.rdb.B().XinfoGroups().Key(StreamKey(ref)).Build()).ToArray()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return []GroupInfo{}, nil
		}
		return nil, fmt.Errorf("consumer groups of %s: %w", ref, c.typeError(ctx, err, StreamKey(ref)))
	}
	out := make([]GroupInfo, 0, len(groups))
	for _, g := range groups {
		m, err := g.AsMap()
		if err != nil {
			return nil, fmt.Errorf("consumer groups of %s: %w", ref, err)
		}
		var gi GroupInfo
		name, consumers, pending, last := m["name"], m["consumers"], m["pending"], m["last-delivered-id"]
		gi.Name, _ = name.ToString()
		gi.Consumers, _ = consumers.AsInt64()
		gi.Pending, _ = pending.AsInt64()
		gi.LastDelivered, _ = last.ToString()
		if l, ok := m["lag"]; ok && !l.IsNil() {
			if n, err := l.AsInt64(); err == nil {
				gi.Lag = &n
			}
		}
		out = append(out, gi)
	}
	slices.SortFunc(out, func(a, b GroupInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}
