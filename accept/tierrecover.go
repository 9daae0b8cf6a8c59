package accept

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// recover finishes what a previous process left. The accept volume is the
// truth about what was committed: every job on its pages at or above the
// safe index is pushed and dispatched again (the job stream dedups by id)
// and marked in the outbox, whether or not the outbox still holds its
// intent (a sync job is acknowledged before its record is durable in the
// outbox). Intents pending in the outbox that the volume does not hold are
// queued for commit. Dispatch runs in the background.
func (t *Tier) recover(ctx context.Context) error {
	pend, err := t.out.Pending(ctx)
	if err != nil {
		return err
	}
	byQueue := map[names.Queue][]Intent{}
	for _, in := range pend {
		t.observeRecovered(in.ID, in.Queue)
		byQueue[in.Queue] = append(byQueue[in.Queue], in)
	}
	vols, err := t.gs.Volumes(ctx)
	if err != nil {
		return fmt.Errorf("accept: recover: %w", err)
	}
	suffix := "." + strconv.Itoa(int(t.opts.Node))
	for _, v := range vols {
		qs, ok := strings.CutPrefix(v.Volume.String(), "accept.")
		if qs, ok = strings.CutSuffix(qs, suffix); ok {
			// A volume name from the store: its queue is checked here.
			if qn, err := names.ParseQueue(qs); err == nil {
				if _, seen := byQueue[qn]; !seen {
					byQueue[qn] = nil
				}
			}
		}
	}
	for qn, ins := range byQueue {
		q, err := t.queue(ctx, qn, true)
		if err != nil {
			return err
		}
		inVol, err := q.committedJobs(ctx)
		if err != nil {
			return err
		}
		seen := make(map[brand.ID]bool, len(inVol))
		for _, it := range inVol {
			seen[it.in.ID] = true
			t.observeRecovered(it.in.ID, qn)
		}
		// What the volume holds is dispatched once it is pushed: now, or
		// after the committer's next successful push. Async enqueues go on
		// meanwhile: a remote that is down does not stop them.
		if _, err := t.push(ctx, q.vol); err != nil {
			t.log.Warn("accept: recover: push failed; the next commit retries it", "volume", q.vol.Name(), "err", err)
			q.intake.mu.Lock()
			q.intake.carry = inVol
			q.intake.mu.Unlock()
		} else if len(inVol) > 0 {
			q.hand(q.cs.next)
			q.dispatch <- inVol
		}
		q.intake.mu.Lock()
		for _, in := range ins {
			if seen[in.ID] {
				continue
			}
			if len(q.intake.pending) == 0 {
				q.intake.oldest = time.Now()
			}
			q.intake.pending = append(q.intake.pending, item{in: in})
		}
		q.intake.cond.Broadcast()
		q.intake.mu.Unlock()
		q.poke()
	}
	return nil
}

// RecoverLead bounds how far ahead of the clock a job id read back by
// recovery may be and still raise the minter's floor. Ids this node minted
// are not ahead of its clock (but for a clock stepped back between runs);
// explicit ids are admitted only at or below the minter's top; an id far
// ahead can only be a client's, recorded by an older version, and must not
// push the minter there: at the end of the id space, every later mint would
// fail.
const RecoverLead = time.Hour

// observeRecovered raises the minter's floor to id, a job id recovery found,
// unless it lies more than RecoverLead ahead of the clock.
func (t *Tier) observeRecovered(id brand.ID, q names.Queue) {
	if !t.opts.Minter.ObserveWithin(id, RecoverLead) {
		t.log.Warn("accept: recover: a job id lies far ahead of the clock; the minter's floor is not raised to it",
			"queue", q, "id", brand.JOB.Format(id), "time", id.Time().Format(time.RFC3339))
	}
}

// committedJobs returns the jobs on the pages at or above the safe index.
func (q *tierQueue) committedJobs(ctx context.Context) ([]item, error) {
	if q.cs.next == q.cs.safe {
		return nil, nil
	}
	snap, err := q.vol.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	var jobs []item
	it := snap.Scan(ctx, q.cs.safe, q.cs.next-1)
	for it.Next() {
		j, err := DecodeJob(it.Value())
		if err != nil {
			it.Close()
			return nil, fmt.Errorf("accept: volume %s page %d: %w", q.vol.Name(), it.Index(), err)
		}
		jobs = append(jobs, item{in: Intent{ID: j.ID, Queue: q.name, Payload: j.Payload, RunAt: j.RunAt}})
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return jobs, nil
}
