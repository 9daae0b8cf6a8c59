package accept

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// testWait bounds every wait of these tests for a state of the tier. The
// waits are woken by the tier's own notifications (intake.cond,
// marks.cond), not by polling; the bound only turns a state that never
// comes into a failure that says what was awaited, instead of a hang until
// the test binary's timeout.
const testWait = time.Minute

// waitIntake waits until cond holds of q's intake, evaluated under its lock
// at every change of it, and fails the test with what after testWait.
func waitIntake(t *testing.T, q *tierQueue, what string, cond func(in *intake) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	in := &q.intake
	stop := context.AfterFunc(ctx, func() {
		in.mu.Lock()
		in.cond.Broadcast()
		in.mu.Unlock()
	})
	defer stop()
	in.mu.Lock()
	defer in.mu.Unlock()
	for !cond(in) {
		if ctx.Err() != nil {
			t.Fatalf("queue %s: no %s after %v: %d pending, %d of them sync, the committer waiting for %d: %v",
				q.name, what, testWait, len(in.pending), in.nsync, in.want, ctx.Err())
		}
		in.cond.Wait()
	}
}

// waitDispatched waits until the dispatcher of every queue of tier is done
// (marked or given up) with every batch handed to it before the call, and
// fails the test after testWait.
func waitDispatched(t *testing.T, tier *Tier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	for _, q := range tier.reg.all() {
		if err := q.waitMarks(ctx); err != nil {
			t.Fatalf("queue %s: %v", q.name, err)
		}
	}
}

// waitMarks waits until q's dispatcher finished the batches handed to it
// before the call, or ctx ends.
func (q *tierQueue) waitMarks(ctx context.Context) error {
	m := &q.marks
	stop := context.AfterFunc(ctx, func() {
		m.mu.Lock()
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	defer stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	target := m.handed
	for m.finished < target {
		if ctx.Err() != nil {
			return fmt.Errorf("the dispatcher finished %d of %d batches: %w", m.finished, target, ctx.Err())
		}
		m.cond.Wait()
	}
	return nil
}
