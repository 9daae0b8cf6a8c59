package echostore

import (
	"context"
	"iter"
	"log/slog"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/names"
)

// discover offers adopt, when a discovery is due, each stream Adoptable
// yields (BeatOptions.Adopt); a stream adopt leaves alone is logged once.
func (n *Node) discover(ctx context.Context, adopt func(context.Context, Adoptable) error, every time.Duration) {
	if !n.disc.due(time.Now(), every) {
		return
	}
	for a, err := range n.Adoptable(ctx) {
		if err != nil {
			n.log.Warn("echostore: discovery of archived streams", "err", err)
			return
		}
		if err := adopt(ctx, a); err != nil {
			n.leftAlone(a.Ref, "echostore: discovery: archived stream left alone", err)
		}
	}
}

// Adoptable yields the archived streams registered in Redis (one SCAN of
// every master: archive.ArchivedStreams) that are not declared on the node,
// that it Owns (its share of its group; alone, all of them) and whose
// archive it can reach. A stream folded whose volume is in neither the data
// dir nor the remote (folded with trim_after local on another data dir,
// never pushed) is left alone, and so is one whose seam cache or remote log
// cannot be read: a cycle here would refuse it, its volume behind the
// seam. Each one left alone is logged once. A failed scan yields its
// error and ends the iteration; a node without Redis yields ErrNoRedis.
func (n *Node) Adoptable(ctx context.Context) iter.Seq2[Adoptable, error] {
	return func(yield func(Adoptable, error) bool) {
		live, err := n.live()
		if err != nil {
			yield(Adoptable{}, err)
			return
		}
		for k, err := range archive.ArchivedStreams(ctx, live) {
			if err != nil {
				yield(Adoptable{}, err)
				return
			}
			if n.declaredAs(k) || !n.Owns(k) {
				continue
			}
			a, ok := n.adoptable(ctx, k)
			if ok && !yield(a, nil) {
				return
			}
		}
	}
}

// adoptable tells whether the node can cycle k, an archived stream not
// declared on it, logging once why not.
func (n *Node) adoptable(ctx context.Context, k names.StreamRef) (Adoptable, bool) {
	if n.store == nil {
		return Adoptable{}, false
	}
	vol, err := n.archiveVolume(ctx, k)
	if err != nil {
		n.leftAlone(k, "echostore: discovery: archived stream left alone: its archive volume cannot be opened", err)
		return Adoptable{}, false
	}
	if vol != nil {
		return Adoptable{Ref: k, LocalVolume: true}, true
	}
	_, folded, err := archive.GetArchived(ctx, n.mq, k)
	if err == nil && folded {
		var head uint64
		if n.rs != nil {
			head, err = n.remoteHead(ctx, k.Volume())
		}
		if err == nil && head == 0 {
			n.leftAlone(k, "echostore: discovery: archived stream left alone: its archive volume is neither in this data dir nor in the remote (another node folds it, or folded it with trim_after local and never pushed it)", nil)
			return Adoptable{}, false
		}
	}
	if err != nil {
		n.leftAlone(k, "echostore: discovery: archived stream left alone: its seam cache or remote log cannot be read", err)
		return Adoptable{}, false
	}
	return Adoptable{Ref: k}, true
}

// declaredAs reports whether ref is declared on the node.
func (n *Node) declaredAs(ref names.StreamRef) bool {
	s := &n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.policies[ref]
	return ok
}

// leftAlone logs msg, once per stream, for a stream discovery leaves alone.
func (n *Node) leftAlone(k names.StreamRef, msg string, err error) {
	d := &n.disc
	d.mu.Lock()
	first := !d.seen[k]
	if d.seen == nil {
		d.seen = map[names.StreamRef]bool{}
	}
	d.seen[k] = true
	d.mu.Unlock()
	if first {
		attrs := []any{k.LogAttr()}
		if err != nil {
			attrs = append(attrs, slog.Any("err", err))
		}
		n.log.Info(msg, attrs...)
	}
}
