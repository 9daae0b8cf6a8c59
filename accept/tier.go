package accept

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// Tier is the two-tier enqueue: the outbox accepts, the queue's accept
// volume commits and the remote replicates, then the job is dispatched to
// its queue's job stream and marked committed in the outbox. One committer
// goroutine per queue takes everything pending (up to CommitBatch, or
// AsyncCommitBatch for async work alone) whenever it is free, so concurrent sync callers share one commit and one push.
// Safe for concurrent use.
//
// Three lock domains share the work, and no goroutine holds two of them at
// once: the registry (reg) of the queues; each queue's intake
// (tierQueue.intake: what callers, Drain and recovery hand its committer);
// and each queue's marks (tierQueue.marks: what its dispatcher hands back
// to the committer). Everything else is set once by NewTier or queue, or
// belongs to one goroutine (tierQueue.cs: the committer's).
type Tier struct {
	// Set by NewTier, read-only after.
	out  *Outbox
	gs   *graft.Store
	rep  Replicator
	disp Dispatcher
	opts TierOptions // with its defaults
	log  *slog.Logger

	ctx    context.Context // ends when Close ends
	cancel context.CancelFunc
	stop   chan struct{}  // closed by Close: committers stop
	wg     sync.WaitGroup // the committers and dispatchers

	reg registry
}

// NewTier starts the tier over an open outbox, a graft store, a replicator
// and a dispatcher, and recovers: for each queue with intents pending in the
// outbox it pushes the accept volume's unpushed commits, dispatches and marks
// the intents already committed to the volume, and queues the rest for the
// background commit.
func NewTier(ctx context.Context, out *Outbox, gs *graft.Store, rep Replicator, disp Dispatcher, opts TierOptions) (*Tier, error) {
	if out == nil || gs == nil || rep == nil || disp == nil {
		return nil, fmt.Errorf("%w: NewTier needs an outbox, a store, a replicator and a dispatcher", ErrInvalid)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &Tier{out: out, gs: gs, rep: rep, disp: disp, opts: opts, log: opts.Logger,
		ctx: tctx, cancel: cancel, stop: make(chan struct{}), reg: registry{queues: map[names.Queue]*tierQueue{}}}
	if err := t.recover(ctx); err != nil {
		t.Close(ctx)
		return nil, err
	}
	return t, nil
}

// Drain commits and pushes everything pending on every queue now and
// returns once it is pushed (dispatch follows in the background).
func (t *Tier) Drain(ctx context.Context) error {
	qs := t.reg.all()
	var errs []error
	for _, q := range qs {
		ch := make(chan error, 1)
		q.intake.mu.Lock()
		if q.intake.stopped {
			q.intake.mu.Unlock()
			return ErrClosed
		}
		q.intake.drains = append(q.intake.drains, ch)
		q.intake.mu.Unlock()
		q.poke()
		select {
		case err := <-ch:
			errs = append(errs, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// Close stops the committers, lets the dispatchers finish the batches
// already committed and pushed, and returns. Intents not yet committed stay
// pending in the outbox for the next NewTier (Drain first to commit them).
// If ctx ends before the dispatchers finish, they are cancelled (what they
// had not marked is re-dispatched by the next NewTier). It does not close
// the outbox, the store or the dispatcher.
func (t *Tier) Close(ctx context.Context) error {
	t.reg.mu.Lock()
	if t.reg.closed {
		t.reg.mu.Unlock()
		return nil
	}
	t.reg.closed = true
	t.reg.mu.Unlock()
	close(t.stop)
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		t.cancel()
		return nil
	case <-ctx.Done():
		t.cancel()
		<-done
		return fmt.Errorf("accept: tier close: %w", ctx.Err())
	}
}
