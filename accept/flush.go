package accept

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/champ"
	"github.com/echostore/echostore/durable"
)

// block is a cut block on its way to the log.
type block struct {
	seq  uint64
	recs []rec
	ids  []brand.ID                    // the ids of its live accepted records at the cut, in increasing order
	size int                           // encoded size, framing included
	snap *champ.Map[brand.ID, *Intent] // the map as of this block, if it triggers a compaction
	// folded (fm held) counts the records at the front of recs that are
	// folded into the map. written and foldDone (o.mu held) say that the
	// block's write ended and that the fold is done and known: then recs
	// is reused (recycle).
	folded   int
	written  bool
	foldDone bool
}

// runFlusher is the one goroutine that appends to the log: it cuts the
// open block when it is due, writes and fsyncs it while the next block
// fills, and starts compactions.
func (o *Outbox) runFlusher() {
	defer o.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		o.mu.Lock()
		b, wait, done := o.nextBlock(time.Now())
		o.mu.Unlock()
		if done {
			return
		}
		if b == nil {
			if wait > 0 {
				timer.Reset(wait)
				select {
				case <-o.kick:
				case <-timer.C:
				}
				timer.Stop()
			} else {
				<-o.kick
			}
			continue
		}
		o.writeCut(b, false)
	}
}

// writeCut writes block b, which nextBlock cut (o.writing set), o.mu not
// held: the flusher's work, or a Record's that found no room and nothing
// being written (waitRoom). It makes b's records durable, or fails the
// outbox, then, if b triggers a compaction, starts the next log segment
// and the compaction. It clears o.writing at the end and wakes the
// flusher, which may find the next block due.
//
// A caller's write (inline) that fails for want of space is not retried on
// the caller's goroutine, which would then wait for free space whatever
// its context: a goroutine of its own waits for room and retries
// (finishCut), and the caller waits for the block like any other.
func (o *Outbox) writeCut(b *block, inline bool) {
	if o.opts.testHookWrite != nil {
		o.opts.testHookWrite(b.seq)
	}
	err := o.writeBlock(b)
	if inline && errors.Is(err, errUndone) {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			o.finishCut(b, err)
		}()
		return
	}
	o.finishCut(b, err)
}

// finishCut is the rest of writeCut once block b's first write returned
// err: the retries after a write undone for want of space, then the
// bookkeeping.
func (o *Outbox) finishCut(b *block, err error) {
	for errors.Is(err, errUndone) && o.waitForRoom() {
		err = o.writeBlock(b)
	}
	o.mu.Lock()
	if err != nil {
		o.err = fmt.Errorf("accept: writing block %d: %w: %w", b.seq, ErrFailed, err)
		o.log.Error("accept: log write failed; the outbox takes no more records", "dir", o.dir, "err", err)
	} else {
		o.durable += uint64(len(b.recs))
		o.blocks++
	}
	o.inflight = 0
	b.written = true
	if b.foldDone {
		o.recycle(b)
	}
	if err != nil || b.snap == nil {
		o.doneWriting()
		o.mu.Unlock()
		return
	}
	o.broadcast()
	o.mu.Unlock()
	if err := o.rotate(b.seq + 1); errors.Is(err, errUndone) {
		// No room for a new segment: the log goes on in this one,
		// and a later compaction tries again.
		o.log.Warn("accept: no room to start a log segment; compaction put off", "dir", o.dir, "err", err)
		o.mu.Lock()
		o.compacting = false
		o.doneWriting()
		o.mu.Unlock()
		return
	} else if err != nil {
		o.mu.Lock()
		o.err = fmt.Errorf("accept: starting log segment %d: %w: %w", b.seq+1, ErrFailed, err)
		o.compacting = false
		o.doneWriting()
		o.mu.Unlock()
		return
	}
	o.wg.Add(1)
	go o.runCompaction(b.seq, *b.snap)
	o.mu.Lock()
	o.doneWriting()
	o.mu.Unlock()
}

// doneWriting, o.mu held, ends a block's write: the segment is free for
// the next one. It wakes the waiters, and the flusher if it may have
// something to do (while the open block is empty, its first record wakes
// the flusher anyway).
func (o *Outbox) doneWriting() {
	o.writing = false
	o.broadcast()
	if len(o.pending) > 0 || o.compactReq || o.closing || o.err != nil {
		o.signal()
	}
}

// nextBlock, o.mu held, cuts the open block if it is due. Otherwise it
// returns how long until the time bound makes it due (0: no bound), or
// done when the flusher should exit.
func (o *Outbox) nextBlock(now time.Time) (b *block, wait time.Duration, done bool) {
	if o.writing {
		// Someone else's block is being written (a Record's, see
		// waitRoom): its end wakes the flusher.
		return nil, 0, false
	}
	if o.err != nil {
		return nil, 0, true
	}
	n := len(o.pending)
	if n == 0 && !o.compactReq {
		return nil, 0, o.closing
	}
	due := n >= o.opts.BlockMax || o.pendingBytes >= blockBytes || o.flushWant > o.cut || o.compactReq || o.closing
	if !due && o.opts.FlushInterval > 0 {
		if age := now.Sub(o.pendingSince); age >= o.opts.FlushInterval {
			due = true
		} else {
			wait = o.opts.FlushInterval - age
		}
	}
	if !due {
		return nil, wait, false
	}
	return o.cutBlock(), 0, false
}

// cutBlock, o.mu held and no block being written, cuts the open block (and
// seals the map for a compaction if one is due, folding the block first)
// and marks it being written: the caller must hand it to writeCut. The
// block goes to the folder unless it is folded already.
func (o *Outbox) cutBlock() *block {
	n := len(o.pending)
	var snap *champ.Map[brand.ID, *Intent]
	if !o.compacting && (o.compactReq || o.sinceSnap+n >= o.opts.CompactRatio*max(o.live, o.opts.CompactMin)) {
		m := o.snapshotLocked()
		snap = &m
		o.compacting = true
		o.compactReq = false
		o.sinceSnap = -n
	} else if len(o.foldQ) >= maxFoldQ {
		o.foldAll() // the folder is behind: the producer helps
	}
	b := &block{seq: o.nextSeq, recs: o.pending, ids: o.pendingIDs, size: blockHeaderLen + blockFixedLen + o.pendingBytes, snap: snap, folded: o.pendingFolded}
	o.nextSeq++
	o.pendingIDs = o.spareIDs
	if o.pendingIDs == nil {
		o.pendingIDs = make([]brand.ID, 0, max(min(o.opts.BlockMax, maxPrealloc), cap(b.ids)))
	}
	o.spareIDs = nil
	o.pending = o.spare
	if o.pending == nil {
		// As large as the block that grew: the next one need not grow again.
		o.pending = make([]rec, 0, max(min(o.opts.BlockMax, maxPrealloc), cap(b.recs)))
	}
	o.spare = nil
	o.pendingBytes = 0
	o.pendingFolded = 0
	o.inflight = n
	o.cut += uint64(n)
	o.sinceSnap += n
	if b.folded == n {
		b.foldDone = true
		o.leftFold(b)
	} else {
		o.foldQ = append(o.foldQ, b)
		if !o.folderUp {
			// The flusher runs (and counts in o.wg) while anyone cuts.
			o.folderUp = true
			o.wg.Add(1)
			go o.runFolder()
		}
		o.kickFolder()
	}
	o.writing = true
	return b
}

// errUndone marks a write that failed for want of space and was undone:
// the log is as it was before it, and the write may be tried again.
var errUndone = errors.New("accept: write undone")

// writeBlock appends b to the current segment with one write and one
// fsync. A write that fails with ENOSPC is cut back off the segment (an
// error wrapping errUndone and ENOSPC); a failed fsync is not undone.
func (o *Outbox) writeBlock(b *block) error {
	o.buf = appendBlock(slices.Grow(o.buf[:0], b.size), b.seq, b.recs)
	if n, err := o.seg.Write(o.buf); err != nil {
		if noSpace(err) && o.truncateTail(int64(n)) == nil {
			return fmt.Errorf("%w: %w", errUndone, err)
		}
		return err
	}
	return o.seg.Sync()
}

// truncateTail cuts the last n bytes written off the segment.
func (o *Outbox) truncateTail(n int64) error {
	fi, err := o.seg.Stat()
	if err != nil {
		return err
	}
	return o.seg.Truncate(fi.Size() - n)
}

// waitForRoom, after a block write undone for want of space, refuses new
// records (the disk guard is told) and waits until the directory has room
// again: true, try the write again; false, the outbox is closing.
func (o *Outbox) waitForRoom() bool {
	o.disk.NoSpace()
	o.mu.Lock()
	o.waitingRoom = true
	o.broadcast()
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.waitingRoom = false
		o.mu.Unlock()
	}()
	o.log.Error("accept: the outbox's log is out of space; records are refused until space is freed", "dir", o.dir)
	backoff := 10 * time.Millisecond
	timer := time.NewTimer(backoff)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-o.kick:
		}
		o.mu.Lock()
		closing := o.closing
		o.mu.Unlock()
		if closing {
			return false
		}
		if o.disk.Check() == nil {
			return true
		}
		backoff = min(2*backoff, time.Second)
		timer.Reset(backoff)
	}
}

// rotate starts the log segment whose first block is first. Without room
// for it, it removes what it made and returns an error wrapping errUndone.
func (o *Outbox) rotate(first uint64) error {
	f, err := createSegment(o.dir, first)
	if err != nil {
		if noSpace(err) {
			if rerr := os.Remove(filepath.Join(o.dir, segName(first))); rerr == nil || os.IsNotExist(rerr) {
				return fmt.Errorf("%w: %w", errUndone, err)
			}
		}
		return err
	}
	old := o.seg
	o.seg = f
	o.mu.Lock()
	o.segs = append(o.segs, first)
	o.mu.Unlock()
	return old.Close()
}

// runCompaction writes the snapshot of m, which covers blocks up to seq,
// then drops what it makes redundant.
func (o *Outbox) runCompaction(seq uint64, m champ.Map[brand.ID, *Intent]) {
	defer o.wg.Done()
	err := o.compactTo(seq, m)
	if err != nil {
		o.log.Warn("accept: compaction failed; the log keeps everything", "dir", o.dir, "seq", seq, "err", err)
	}
	o.mu.Lock()
	o.compacting = false
	o.compactions++
	o.compactErr = err
	o.broadcast()
	o.mu.Unlock()
}

// compactTo writes snapshot seq, then keeps the previous snapshot and the
// log since it (the fallback if the new snapshot is ever unreadable) and
// deletes everything older.
func (o *Outbox) compactTo(seq uint64, m champ.Map[brand.ID, *Intent]) error {
	data := encodeSnapshot(seq, sortedIntents(m))
	if err := durable.WriteFile(filepath.Join(o.dir, snapName(seq)), data, 0o600); err != nil {
		return fmt.Errorf("writing snapshot %d: %w", seq, err)
	}
	o.mu.Lock()
	o.snaps = append(o.snaps, seq)
	var prev uint64
	if len(o.snaps) >= 2 {
		prev = o.snaps[len(o.snaps)-2]
	}
	var drop []string
	for len(o.snaps) > 0 && o.snaps[0] < prev {
		drop = append(drop, snapName(o.snaps[0]))
		o.snaps = o.snaps[1:]
	}
	// Segment i holds blocks segs[i] .. segs[i+1]-1.
	for len(o.segs) >= 2 && o.segs[1]-1 <= prev {
		drop = append(drop, segName(o.segs[0]))
		o.segs = o.segs[1:]
	}
	o.mu.Unlock()
	for _, name := range drop {
		if err := os.Remove(filepath.Join(o.dir, name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("dropping %s: %w", name, err)
		}
	}
	if len(drop) > 0 {
		return durable.SyncDir(o.dir)
	}
	return nil
}
