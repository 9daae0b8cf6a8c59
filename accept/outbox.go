package accept

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/champ"
	"github.com/echostore/echostore/graft/diskguard"
	"github.com/echostore/echostore/names"
)

// Intent is one accepted job waiting to reach Graft. Payloads returned by
// the Outbox are shared with it and must not be modified.
type Intent struct {
	ID      brand.ID    // the job's branded id (JOB), never 0
	Queue   names.Queue // the queue it was enqueued on; never the zero Queue
	Payload []byte      // the job, opaque; at most Options.MaxPayload bytes
	// RunAt is the Unix millisecond before which the job is not dispatched
	// to its job stream; 0 means at once. Never negative.
	RunAt int64
}

// Options configure an Outbox. The zero value of each field selects its
// default.
type Options struct {
	// K is the loss window: at most K log records (accepted or committed)
	// are ever acknowledged and not yet durable. Default 1,000.
	K int
	// BlockMax is the most records one block holds, 1..K. A block is cut
	// when BlockMax records are pending (or on Flush, FlushInterval, Close).
	// With BlockMax = K (the default) the writer fills a whole block while
	// the previous one is written and fsynced whenever the loss window
	// allows it; a smaller BlockMax, such as K/2, lets one block fill while
	// the previous one is fsynced even when the producer outruns the disk,
	// at the price of more, smaller fsyncs.
	BlockMax int
	// FlushInterval is the time bound T: a partial block is cut once its
	// oldest record has waited this long. Default 100ms; negative disables
	// it (then only K, Flush and Close cut partial blocks).
	FlushInterval time.Duration
	// MaxPayload is the largest payload Record accepts, in bytes. Default
	// 1 MiB, at most 64 MiB.
	MaxPayload int
	// CompactRatio and CompactMin trigger compaction: a snapshot is written
	// once the log records since the last one reach CompactRatio times the
	// larger of the live intent count and CompactMin. Defaults 2 and 16,384.
	CompactRatio int
	CompactMin   int
	// DiskReserve is the free space, in bytes, below which Record refuses
	// with ErrDiskFull (nothing recorded) until that much is free again; a
	// block write that meets ENOSPC anyway is undone and retried once
	// there is room, instead of failing the outbox. 0: 64 MiB, at most a
	// tenth of the filesystem; negative: no reserve. The free space is
	// measured again at most every diskguard.ProbeInterval, and only on
	// every 64th Record: what those allow between two measurements must fit
	// in the reserve. Once the outbox knows the disk is full (a measurement,
	// or a write that met ENOSPC), the next Record is refused.
	DiskReserve int64
	// Logger receives warnings (a dropped torn tail, a failed compaction).
	// Default: discard.
	Logger *slog.Logger

	testHookWrite func(seq uint64) // called by the flusher before it writes block seq
}

// Defaults of Options.
const (
	DefaultK             = 1000
	DefaultFlushInterval = 100 * time.Millisecond
	DefaultMaxPayload    = 1 << 20
	DefaultCompactRatio  = 2
	DefaultCompactMin    = 16384
)

func (o Options) withDefaults() (Options, error) {
	if o.K == 0 {
		o.K = DefaultK
	}
	if o.BlockMax == 0 {
		o.BlockMax = o.K
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.CompactRatio == 0 {
		o.CompactRatio = DefaultCompactRatio
	}
	if o.CompactMin == 0 {
		o.CompactMin = DefaultCompactMin
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.K < 1:
		return o, fmt.Errorf("accept: K = %d, want at least 1: %w", o.K, ErrInvalid)
	case o.BlockMax < 1 || o.BlockMax > o.K:
		return o, fmt.Errorf("accept: BlockMax = %d, want 1..K (%d): %w", o.BlockMax, o.K, ErrInvalid)
	case o.MaxPayload < 0 || o.MaxPayload > maxPayloadLimit:
		return o, fmt.Errorf("accept: MaxPayload = %d, want 0..%d: %w", o.MaxPayload, maxPayloadLimit, ErrInvalid)
	case o.CompactRatio < 1 || o.CompactMin < 1:
		return o, fmt.Errorf("accept: CompactRatio %d and CompactMin %d must be positive: %w", o.CompactRatio, o.CompactMin, ErrInvalid)
	}
	return o, nil
}

// Stats are counters of an Outbox since Open.
type Stats struct {
	Live             int    // uncommitted intents
	Appended         uint64 // log records appended (accepted and committed)
	Durable          uint64 // of those, the ones known durable
	Blocks           uint64 // blocks written
	Compactions      uint64 // snapshots written
	NextSeq          uint64 // sequence number of the next block
	BaseSnapshot     uint64 // block seq covered by the snapshot Open started from (0: none)
	Replayed         int    // log records replayed by Open
	DroppedTailBytes int64  // bytes of a torn log tail Open dropped
}

// Outbox is the local half of the accept tier: the uncommitted intents in
// a CHAMP map, made durable in blocks appended to a log in one directory.
// It is safe for concurrent use. One process opens a directory at a time.
//
// Record puts a record only in the open block; the map takes the block's
// accepted intents later (the fold): the folder goroutine folds each cut
// block while the block is written and fsynced, and whatever reads or
// changes the map (Get, Len, MarkCommitted, All, Pending, a compaction's
// snapshot, a Record whose id is not above every id recorded so far)
// first folds, on its own goroutine, what is not folded yet. So the
// producer's path holds what makes a record durable, and the map insert
// overlaps the fsync.
type Outbox struct {
	dir  string
	opts Options
	log  *slog.Logger
	lock *os.File
	disk *diskguard.Guard // the free-space reserve of dir
	// diskTick counts Records, which ask disk to re-measure (Check: a
	// clock read) once every diskCheckEvery of them.
	diskTick atomic.Uint32

	kick chan struct{} // wakes the flusher; buffered 1
	wg   sync.WaitGroup

	mu           sync.Mutex
	pending      []rec // the open block
	pendingBytes int   // encoded size of the records in pending
	spare        []rec // the buffer of the block last written, for reuse; allocated by Open for the first
	pendingSince time.Time
	inflight     int    // records in the block being written
	writing      bool   // a block is being written (writeCut), by the flusher or a Record; its writer owns seg and buf
	appended     uint64 // records appended to pending, ever
	cut          uint64 // records handed to the flusher, ever
	durable      uint64 // records durable, ever
	flushWant    uint64 // Flush wants records up to here cut
	compactReq   bool
	compacting   bool
	compactions  uint64
	compactErr   error
	blocks       uint64
	nextSeq      uint64
	sinceSnap    int // log records since the newest snapshot
	advanced     chan struct{}
	err          error // sticky write failure
	waitingRoom  bool  // the flusher waits for room to write a block (waitForRoom)
	closing      bool
	segs         []uint64 // first seqs of the log segments, ascending
	snaps        []uint64 // seqs of the snapshot files, ascending
	stats        Stats    // the recovery part

	payloads []byte // the chunk Record copies small payloads into

	// The fold (o.mu held): live counts the uncommitted intents, folded or
	// not; maxID is the largest id recorded, and every id of the map that
	// is in neither pendingIDs nor the ids of a block in foldQ is at most
	// mapMax (both known once maxKnown: Open leaves them unknown when it
	// recovers intents, and the first Record scans the map); pendingIDs
	// are the ids of the open block's live accepted records, in increasing
	// order, and pendingFolded how many of its records are folded; foldQ
	// holds the cut blocks not known folded, oldest first (at most
	// maxFoldQ: a block cut beyond that folds the others first); foldKick
	// wakes the folder.
	live          int
	maxID         brand.ID
	mapMax        brand.ID
	maxKnown      bool
	pendingIDs    []brand.ID
	spareIDs      []brand.ID
	pendingFolded int
	foldQ         []*block
	foldKick      chan struct{}
	folderUp      bool // the folder runs: the first block that needs it starts it

	// fm guards the map and what its inserts allocate from, and each
	// block's folded count. Lock order: o.mu before fm; whoever holds fm
	// never waits for o.mu.
	fm      sync.Mutex
	tr      *champ.Transient[brand.ID, *Intent]
	intents []Intent // the chunk folded intents are allocated from

	seg *os.File // the segment being appended to; owned by the block's writer (o.writing)
	buf []byte   // the block writer's encoding buffer
}

// Open opens (creating it if needed) the outbox in dir and recovers it:
// the newest intact snapshot plus the log blocks after it. A torn or
// corrupt tail of the newest log segment is dropped and the file truncated
// to its intact prefix; damage anywhere else is an error wrapping
// ErrCorrupt.
func Open(ctx context.Context, dir string, opts Options) (*Outbox, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("accept: open %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("accept: open %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	st, err := recoverDir(ctx, dir, opts.Logger)
	if err != nil {
		lock.Close()
		return nil, err
	}
	o := &Outbox{
		disk:      diskguard.New(diskguard.Options{Dir: dir, Reserve: opts.DiskReserve, Ballast: -1, What: "accept outbox", Logger: opts.Logger}),
		dir:       dir,
		opts:      opts,
		log:       opts.Logger,
		lock:      lock,
		kick:      make(chan struct{}, 1),
		foldKick:  make(chan struct{}, 1),
		tr:        st.m.Transient(),
		live:      st.m.Len(),
		maxKnown:  st.m.Len() == 0,
		advanced:  make(chan struct{}),
		nextSeq:   st.next,
		sinceSnap: st.replayed,
		segs:      st.segs,
		snaps:     st.snaps,
		seg:       st.seg,
		pending:   make([]rec, 0, min(opts.BlockMax, maxPrealloc)),
		spare:     make([]rec, 0, min(opts.BlockMax, maxPrealloc)),
	}
	o.stats = Stats{BaseSnapshot: st.base, Replayed: st.replayed, DroppedTailBytes: st.dropped}
	o.wg.Add(1)
	go o.runFlusher()
	return o, nil
}

// Record adds an accepted intent. It returns once the intent is in the
// open block, at in-heap speed, unless K records are already not durable:
// then it waits (until ctx is done) for the log to catch up. The payload
// is copied. It fails before any side effect with ErrInvalid (id 0, bad
// queue name, negative RunAt), ErrTooLarge, ErrDiskFull (the directory is
// below Options.DiskReserve) or ErrDuplicate (an uncommitted intent has
// the id).
func (o *Outbox) Record(ctx context.Context, in Intent) error {
	_, err := o.record(ctx, in)
	return err
}

// record is Record; it returns the intent as the outbox keeps it (its
// payload the outbox's copy).
func (o *Outbox) record(ctx context.Context, in Intent) (Intent, error) {
	if in.ID == 0 {
		return Intent{}, fmt.Errorf("accept: record: id 0: %w", ErrInvalid)
	}
	if in.RunAt < 0 {
		return Intent{}, fmt.Errorf("accept: record %s: run-at %d: %w", brand.JOB.Format(in.ID), in.RunAt, ErrInvalid)
	}
	if in.Queue.IsZero() {
		return Intent{}, fmt.Errorf("accept: record %s: no queue: %w", brand.JOB.Format(in.ID), ErrInvalid)
	}
	if len(in.Payload) > o.opts.MaxPayload {
		return Intent{}, fmt.Errorf("accept: record %s: payload of %d bytes, at most %d: %w", brand.JOB.Format(in.ID), len(in.Payload), o.opts.MaxPayload, ErrTooLarge)
	}
	if err := ctx.Err(); err != nil {
		return Intent{}, fmt.Errorf("accept: record %s: %w", brand.JOB.Format(in.ID), err)
	}
	if o.diskTick.Add(1)%diskCheckEvery == 1 || o.disk.Full() {
		if err := o.disk.Check(); err != nil {
			return Intent{}, fmt.Errorf("accept: record %s: %w", brand.JOB.Format(in.ID), err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.waitRoom(ctx); err != nil {
		return Intent{}, fmt.Errorf("accept: record %s: %w", brand.JOB.Format(in.ID), err)
	}
	if !o.isNew(in.ID) {
		return Intent{}, fmt.Errorf("accept: record %s: %w", brand.JOB.Format(in.ID), ErrDuplicate)
	}
	in.Payload = o.copyPayload(in.Payload)
	if len(in.Payload) <= payloadSmall {
		o.payloads = o.payloads[:len(o.payloads)+len(in.Payload)]
	}
	if n := len(o.pendingIDs); n == 0 || o.pendingIDs[n-1] < in.ID {
		o.pendingIDs = append(o.pendingIDs, in.ID)
	} else {
		i, _ := slices.BinarySearch(o.pendingIDs, in.ID)
		o.pendingIDs = slices.Insert(o.pendingIDs, i, in.ID)
	}
	o.maxID = max(o.maxID, in.ID)
	o.live++
	o.add(acceptedRec(in))
	return in, nil
}

// isNew, o.mu held, reports whether no uncommitted intent has id. An id
// above every id recorded so far (ids minted in order) is new at once;
// another is looked up in the ids of the records not known folded (the
// open block's and those of foldQ's blocks), then, unless it is above
// every id that only the map holds, in the map.
func (o *Outbox) isNew(id brand.ID) bool {
	if !o.maxKnown {
		o.foldAll()
		o.fm.Lock()
		for k := range o.tr.All() {
			o.maxID = max(o.maxID, k)
		}
		o.fm.Unlock()
		o.mapMax = max(o.mapMax, o.maxID)
		o.maxKnown = true
	}
	if id > o.maxID {
		return true
	}
	if _, ok := slices.BinarySearch(o.pendingIDs, id); ok {
		return false
	}
	for _, b := range o.foldQ {
		if _, ok := slices.BinarySearch(b.ids, id); ok {
			return false
		}
	}
	if id > o.mapMax {
		return true
	}
	o.fm.Lock()
	defer o.fm.Unlock()
	_, ok := o.tr.Get(id)
	return !ok
}

// diskCheckEvery is how many Records share one diskguard Check (which reads
// the clock to see whether the free space is due for measuring: about a
// sixth of Record's time when done for each). In between, a Record only
// asks whether the guard knows the disk to be full (one atomic load).
const diskCheckEvery = 64

// Record copies small payloads in chunks (o.mu held), and the fold
// allocates intents in chunks (fm held): two allocations per record were
// most of Record's cost with the garbage collector they drive. A chunk
// lives while any intent in it does.
const (
	intentChunk  = 128      // intents per chunk
	payloadChunk = 16 << 10 // bytes per chunk of payloads
	payloadSmall = 1 << 10  // larger payloads get an allocation each
)

// copyPayload returns a copy of b with its capacity clipped, in the free
// space of o.payloads when b is small; Record takes that space (extends
// o.payloads) only if it keeps the copy.
func (o *Outbox) copyPayload(b []byte) []byte {
	if len(b) == 0 || len(b) > payloadSmall {
		return append([]byte(nil), b...)
	}
	if cap(o.payloads)-len(o.payloads) < len(b) {
		o.payloads = make([]byte, 0, payloadChunk)
	}
	l := len(o.payloads)
	dst := o.payloads[l : l+len(b) : l+len(b)]
	copy(dst, b)
	return dst
}

// MarkCommitted removes the given ids from the outbox, for intents that
// reached Graft, and appends a committed record for each to the log (they
// count against K like accepted ones). Ids not in the outbox are skipped,
// so the call is idempotent. It returns how many ids it removed. Until the
// committed records are durable (Flush), a crash brings the intents back.
func (o *Outbox) MarkCommitted(ctx context.Context, ids ...brand.ID) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("accept: mark committed: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, id := range ids {
		if err := o.waitRoom(ctx); err != nil {
			return n, fmt.Errorf("accept: mark %s committed: %w", brand.JOB.Format(id), err)
		}
		o.foldAll()
		o.fm.Lock()
		ok := o.tr.Delete(id)
		o.fm.Unlock()
		if !ok {
			continue
		}
		if i, ok := slices.BinarySearch(o.pendingIDs, id); ok {
			o.pendingIDs = slices.Delete(o.pendingIDs, i, i+1)
		}
		o.live--
		o.add(rec{kind: kindCommitted, id: id})
		n++
	}
	return n, nil
}

// Flush makes every record appended so far durable, and returns once it is
// (or ctx is done, or the log failed). While the log waits for room on a
// full disk it returns an error wrapping ErrDiskFull: the records stay in
// the outbox and are written once there is room. When no block is being
// written, Flush writes the open block itself (one write and one fsync,
// which it waits for whatever ctx does), as a Record that finds no room.
func (o *Outbox) Flush(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	want := o.appended
	if o.flushWant < want {
		o.flushWant = want
		if !o.writing && len(o.pending) > 0 && o.usable() == nil && o.opts.testHookWrite == nil && ctx.Err() == nil {
			// As waitRoom: a write of our own instead of two wake-ups.
			o.writeOwnLocked()
		} else {
			o.signal()
		}
	}
	full := false
	if err := o.waitUntil(ctx, func() bool { full = o.waitingRoom; return full || o.durable >= want }); err != nil {
		return fmt.Errorf("accept: flush: %w", err)
	}
	if full && o.durable < want {
		return fmt.Errorf("accept: flush: %d records wait for room in %s: %w", want-o.durable, o.dir, ErrDiskFull)
	}
	return nil
}

// Compact cuts a block now (an empty one if nothing is pending), writes a
// full snapshot of the map as of that block, drops the log the snapshot
// makes redundant, and returns once all that is done. Compaction also runs
// on its own, in the background, when the log grows past CompactRatio ×
// max(live intents, CompactMin) records.
func (o *Outbox) Compact(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Wait for a running compaction: it may predate records appended since.
	if err := o.waitUntil(ctx, func() bool { return !o.compacting && !o.compactReq }); err != nil {
		return fmt.Errorf("accept: compact: %w", err)
	}
	want := o.compactions + 1
	o.compactReq = true
	o.signal()
	if err := o.waitUntil(ctx, func() bool { return o.compactions >= want }); err != nil {
		return fmt.Errorf("accept: compact: %w", err)
	}
	if o.compactErr != nil {
		return fmt.Errorf("accept: compact: %w", o.compactErr)
	}
	return nil
}

// Get returns the uncommitted intent with the given id.
func (o *Outbox) Get(id brand.ID) (Intent, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.foldAll()
	o.fm.Lock()
	defer o.fm.Unlock()
	if p, ok := o.tr.Get(id); ok {
		return *p, true
	}
	return Intent{}, false
}

// Len returns the number of uncommitted intents.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.live
}

// snapshot returns the uncommitted intents as an immutable map, in O(1):
// it seals the transient, which the next write replaces.
func (o *Outbox) snapshot() champ.Map[brand.ID, *Intent] {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.snapshotLocked()
}

// snapshotLocked, o.mu held, folds what is not folded and seals the map.
func (o *Outbox) snapshotLocked() champ.Map[brand.ID, *Intent] {
	o.foldAll()
	o.fm.Lock()
	defer o.fm.Unlock()
	m := o.tr.Persistent()
	o.tr = m.Transient()
	return m
}

// All iterates over an O(1) snapshot of the uncommitted intents taken when
// All is called. The order is deterministic (a function of the set of ids)
// but not id order; Pending sorts.
func (o *Outbox) All() iter.Seq2[brand.ID, Intent] {
	m := o.snapshot()
	return func(yield func(brand.ID, Intent) bool) {
		for id, p := range m.All() {
			if !yield(id, *p) {
				return
			}
		}
	}
}

// Pending returns the uncommitted intents in increasing id order.
func (o *Outbox) Pending(ctx context.Context) ([]Intent, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("accept: pending: %w", err)
	}
	return sortedIntents(o.snapshot()), nil
}

func sortedIntents(m champ.Map[brand.ID, *Intent]) []Intent {
	out := make([]Intent, 0, m.Len())
	for _, p := range m.All() {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Intent) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Stats returns the Outbox's counters.
func (o *Outbox) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	s.Live = o.live
	s.Appended = o.appended
	s.Durable = o.durable
	s.Blocks = o.blocks
	s.Compactions = o.compactions
	s.NextSeq = o.nextSeq
	return s
}

// Close makes every appended record durable, waits for a running
// compaction, and releases the directory. Later calls fail with ErrClosed.
// If ctx ends first, Close reports it, but still waits for the flusher to
// finish the block it is writing and the ones still open.
func (o *Outbox) Close(ctx context.Context) error {
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		return fmt.Errorf("accept: close: %w", ErrClosed)
	}
	o.closing = true
	o.signal()
	o.kickFolder()
	want := o.appended
	var ferr error
	for o.durable < want && o.err == nil {
		if err := o.await(ctx); err != nil {
			ferr = fmt.Errorf("accept: close: %w", err)
			break
		}
	}
	if ferr == nil && o.err != nil {
		ferr = fmt.Errorf("accept: close: %w", o.err)
	}
	o.mu.Unlock()
	o.wg.Wait()
	if o.seg != nil {
		if err := o.seg.Close(); err != nil && ferr == nil {
			ferr = fmt.Errorf("accept: close: %w", err)
		}
	}
	o.lock.Close()
	return ferr
}

// usable reports why the Outbox takes no more work, if it does not.
func (o *Outbox) usable() error {
	if o.err != nil {
		return o.err
	}
	if o.closing {
		return ErrClosed
	}
	return nil
}

// await releases o.mu until the durable state advances or ctx is done.
func (o *Outbox) await(ctx context.Context) error {
	ch := o.advanced
	o.mu.Unlock()
	defer o.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitUntil waits, o.mu held, until done holds, or the Outbox fails or
// closes, or ctx ends.
func (o *Outbox) waitUntil(ctx context.Context, done func() bool) error {
	for !done() {
		if err := o.usable(); err != nil {
			return err
		}
		if err := o.await(ctx); err != nil {
			return err
		}
	}
	return nil
}

// waitRoom waits, o.mu held, until one more record keeps the non-durable
// records within K and the open block within blockBytes.
//
// When there is no room and no block is being written, the open block is
// full, and the caller writes it itself (cutBlock, writeCut: one write and one
// fsync, o.mu released meanwhile) instead of waking the flusher and
// sleeping until the flusher wakes it: it would wait for that write
// anyway, and the two wake-ups, on a machine whose cores are busy, cost
// as much as the fsync (docs/BENCHMARKS.md, "Margins"). Not while a test
// hook stops writes (testHookWrite), whose tests expect the flusher to
// write.
func (o *Outbox) waitRoom(ctx context.Context) error {
	for {
		if err := o.usable(); err != nil {
			return err
		}
		if o.inflight+len(o.pending) < o.opts.K && o.pendingBytes < blockBytes {
			return nil
		}
		if !o.writing && len(o.pending) > 0 && o.opts.testHookWrite == nil {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("waiting for the log to make room: %w", err)
			}
			o.writeOwnLocked()
			continue
		}
		if err := o.await(ctx); err != nil {
			return fmt.Errorf("waiting for the log to make room: %w", err)
		}
	}
}

// add appends r to the open block, o.mu held.
func (o *Outbox) add(r rec) {
	o.pending = append(o.pending, r)
	o.pendingBytes += r.size()
	o.appended++
	if len(o.pending) == 1 {
		o.pendingSince = time.Now()
		o.signal()
	} else if len(o.pending) >= o.opts.BlockMax || o.pendingBytes >= blockBytes {
		o.signal()
	}
}

// signal wakes the flusher.
func (o *Outbox) signal() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// broadcast wakes every waiter, o.mu held.
func (o *Outbox) broadcast() {
	close(o.advanced)
	o.advanced = make(chan struct{})
}

// writeOwnLocked cuts the open block and writes it on the caller's
// goroutine, o.mu released meanwhile (held on entry and on return): a
// caller that finds no block being written writes its own instead of
// waking the flusher and sleeping.
func (o *Outbox) writeOwnLocked() {
	b := o.cutBlock()
	o.wg.Add(1)
	o.mu.Unlock()
	o.writeCut(b, true)
	o.wg.Done()
	o.mu.Lock()
}
