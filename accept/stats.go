package accept

import (
	"cmp"
	"slices"
	"time"

	"github.com/echostore/echostore/names"
)

// recentCommits is how many of a queue's latest commits QueueStats reports.
const recentCommits = 16

// QueueStats is what the tier holds of one queue at one moment: what a
// console shows beside the queue's job stream.
type QueueStats struct {
	// Queue is the queue's name.
	Queue names.Queue `json:"queue"`
	// Pending are the jobs accepted (each in the outbox) and not yet taken
	// by the queue's committer; Sync of them have a sync caller waiting.
	Pending int `json:"pending"`
	Sync    int `json:"sync"`
	// Batches are the job counts of the queue's latest commits (at most
	// 16), oldest first: how much group commit gathers per commit and push.
	Batches []int `json:"batches"`
	// Commits counts the queue's successful commits since the tier opened.
	Commits uint64 `json:"commits"`
	// LastPush is how long the last commit's push to the remote took.
	LastPush time.Duration `json:"last_push_ns"`
}

// recent is a queue's record of its latest commits, kept in its intake
// (under intake.mu): a ring of batch sizes, the commit count and the last
// push's duration.
type recent struct {
	sizes    [recentCommits]int
	commits  uint64
	lastPush time.Duration
}

// add records one successful commit of n jobs whose push took push.
func (r *recent) add(n int, push time.Duration) {
	r.sizes[r.commits%recentCommits] = n
	r.commits++
	r.lastPush = push
}

// batches returns the recorded batch sizes, oldest first.
func (r *recent) batches() []int {
	n := min(r.commits, recentCommits)
	out := make([]int, 0, n)
	for i := r.commits - n; i < r.commits; i++ {
		out = append(out, r.sizes[i%recentCommits])
	}
	return out
}

// Stats returns every queue the tier has met, by name. It takes each
// queue's intake lock briefly, one at a time; it does no I/O.
func (t *Tier) Stats() []QueueStats {
	qs := t.reg.all()
	out := make([]QueueStats, 0, len(qs))
	for _, q := range qs {
		q.intake.mu.Lock()
		out = append(out, QueueStats{Queue: q.name, Pending: len(q.intake.pending), Sync: q.intake.nsync,
			Batches: q.intake.recent.batches(), Commits: q.intake.recent.commits, LastPush: q.intake.recent.lastPush})
		q.intake.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return cmp.Compare(a.Queue.String(), b.Queue.String()) })
	return out
}
