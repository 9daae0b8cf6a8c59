package accept

// The fold: the accepted records of the log enter the map after Record
// has put them in the open block (see Outbox). Records are folded in log
// order, block by block; a committed record needs no fold (MarkCommitted
// folds everything before it and deletes from the map itself), and an
// accepted one is never in the map already (Record checked, after folding
// all before it when the id was not above every id recorded).

// maxFoldQ is how many cut blocks may wait for the folder before a cut
// folds them itself (cutBlock): it bounds the records held for the fold.
const maxFoldQ = 4

// foldChunk is how many records the folder folds per hold of fm, so that
// a goroutine that folds everything (foldAll, o.mu held) waits for at most
// this many.
const foldChunk = 256

// runFolder is the goroutine that folds each cut block (foldQ) into the
// map, usually while the block is written and fsynced by another.
func (o *Outbox) runFolder() {
	defer o.wg.Done()
	for {
		o.mu.Lock()
		if o.closing {
			o.mu.Unlock()
			return
		}
		var b *block
		if len(o.foldQ) > 0 {
			b = o.foldQ[0]
		}
		o.mu.Unlock()
		if b == nil {
			<-o.foldKick
			continue
		}
		// b.recs is not reused before b's fold is done (recycle), and
		// foldAll, which may fold b meanwhile, advances b.folded to the end
		// of recs under fm.
		o.fm.Lock()
		for b.folded < len(b.recs) {
			end := min(len(b.recs), b.folded+foldChunk)
			o.foldRecs(b.recs[b.folded:end])
			b.folded = end
			o.fm.Unlock()
			o.fm.Lock()
		}
		o.fm.Unlock()
		o.mu.Lock()
		o.reap()
		o.mu.Unlock()
	}
}

// kickFolder wakes the folder.
func (o *Outbox) kickFolder() {
	select {
	case o.foldKick <- struct{}{}:
	default:
	}
}

// foldRecs inserts the intents of the accepted records of recs into the
// map, fm held.
func (o *Outbox) foldRecs(recs []rec) {
	for i := range recs {
		r := &recs[i]
		if r.kind == kindCommitted {
			continue
		}
		if len(o.intents) == cap(o.intents) {
			o.intents = make([]Intent, 0, intentChunk)
		}
		o.intents = append(o.intents, r.intent())
		o.tr.Insert(r.id, &o.intents[len(o.intents)-1])
	}
}

// foldAll, o.mu held, folds every record not folded yet: those of the cut
// blocks in foldQ, then those of the open block.
func (o *Outbox) foldAll() {
	if len(o.foldQ) == 0 && o.pendingFolded == len(o.pending) {
		return
	}
	o.fm.Lock()
	for _, b := range o.foldQ {
		if b.folded < len(b.recs) {
			o.foldRecs(b.recs[b.folded:])
			b.folded = len(b.recs)
		}
	}
	o.foldRecs(o.pending[o.pendingFolded:])
	o.pendingFolded = len(o.pending)
	o.fm.Unlock()
	o.reap()
}

// reap, o.mu held, takes the folded blocks off the front of foldQ, and
// reuses the records of those written.
func (o *Outbox) reap() {
	o.fm.Lock()
	k := 0
	for k < len(o.foldQ) && o.foldQ[k].folded == len(o.foldQ[k].recs) {
		k++
	}
	o.fm.Unlock()
	for _, b := range o.foldQ[:k] {
		b.foldDone = true
		o.leftFold(b)
		if b.written {
			o.recycle(b)
		}
	}
	o.foldQ = append(o.foldQ[:0], o.foldQ[k:]...)
	clear(o.foldQ[len(o.foldQ) : k+len(o.foldQ)])
}

// leftFold, o.mu held, notes that block b is folded and no longer in
// foldQ: its ids are the map's alone now (mapMax), and its ids buffer is
// free for the next open block.
func (o *Outbox) leftFold(b *block) {
	if n := len(b.ids); n > 0 {
		o.mapMax = max(o.mapMax, b.ids[n-1])
	}
	if o.spareIDs == nil {
		o.spareIDs = b.ids[:0]
	}
	b.ids = nil
}

// recycle, o.mu held, keeps the records buffer of block b, written and
// folded, for the next open block.
func (o *Outbox) recycle(b *block) {
	clear(b.recs)
	if o.spare == nil {
		o.spare = b.recs[:0]
	}
}
