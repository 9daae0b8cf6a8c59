package remote

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/echostore/echostore/names"
)

// Log is the remote log of one volume over a Store. Its only state is the
// newest commit it has seen on the remote (published or read), which lets
// Publish skip verifying a base it already knows; every other answer comes
// from the store afresh. Safe for concurrent use.
type Log struct {
	store  Store
	volume string

	hooks Hooks

	mu  sync.Mutex
	tip struct {
		lsn  uint64
		hash Hash
	}
}

// saw records that the remote holds the commit with hash h at lsn.
func (l *Log) saw(lsn uint64, h Hash) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lsn >= l.tip.lsn {
		l.tip.lsn, l.tip.hash = lsn, h
	}
}

// knows reports whether the remote is known to hold hash h at lsn.
func (l *Log) knows(lsn uint64, h Hash) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tip.lsn == lsn && l.tip.hash == h
}

// NewLog returns the remote log of volume in store. The zero Volume (no
// name) fails wrapping ErrInvalid.
func NewLog(store Store, volume names.Volume) (*Log, error) {
	if volume.IsZero() {
		return nil, fmt.Errorf("%w: no volume name", ErrInvalid)
	}
	return &Log{store: store, volume: volume.String()}, nil
}

// Volume returns the volume name.
func (l *Log) Volume() string { return l.volume }

// Hooks are named fault points of a push, for crash tests: each, if set,
// is called when the push reaches its point and may block or kill the
// process there. Production code leaves them nil.
type Hooks struct {
	// BeforeSegmentUpload runs in Prepare before the first segment upload.
	BeforeSegmentUpload func()
	// BetweenUploadAndCommit runs in Push after the pending commit is
	// recorded and before it is published.
	BetweenUploadAndCommit func()
	// AfterCommitBeforeLocalRecord runs in Push after the commit landed and
	// before the new sync point is recorded locally.
	AfterCommitBeforeLocalRecord func()
}

// NewLogWithHooks is NewLog with fault hooks (see Hooks).
func NewLogWithHooks(store Store, volume names.Volume, h Hooks) (*Log, error) {
	l, err := NewLog(store, volume)
	if err != nil {
		return nil, err
	}
	l.hooks = h
	return l, nil
}

func call(f func()) {
	if f != nil {
		f()
	}
}

// Store returns the underlying store.
func (l *Log) Store() Store { return l.store }

// Entry is one commit read from the log, with the hash of its bytes.
type Entry struct {
	Commit *Commit
	Hash   Hash
	// Size is the size of the commit object in bytes.
	Size int
}

// LSN returns the entry's remote LSN (0 for the empty entry before LSN 1).
func (e Entry) LSN() uint64 {
	if e.Commit == nil {
		return 0
	}
	return e.Commit.LSN
}

// Head returns the remote head LSN (0 for an empty log) with exactly one
// LIST request: commit keys sort newest first, so the first key under the
// log prefix is the head.
func (l *Log) Head(ctx context.Context) (uint64, error) {
	objs, err := l.store.List(ctx, LogPrefix(l.volume), 1)
	if err != nil {
		return 0, fmt.Errorf("volume %s: head: %w", l.volume, err)
	}
	if len(objs) == 0 {
		return 0, nil
	}
	lsn, err := ParseLogKey(l.volume, objs[0].Key)
	if err != nil {
		return 0, fmt.Errorf("volume %s: head: %w", l.volume, err)
	}
	return lsn, nil
}

// HeadCommit returns the head commit and its hash: one LIST and one GET.
// For an empty log it returns the zero Entry (LSN 0, zero hash), which is
// the base of the first commit.
func (l *Log) HeadCommit(ctx context.Context) (Entry, error) {
	lsn, err := l.Head(ctx)
	if err != nil || lsn == 0 {
		return Entry{}, err
	}
	return l.Read(ctx, lsn)
}

// Read returns the commit at lsn, verified: its checksum, its volume and
// LSN against the key. A missing commit wraps ErrNotFound, or ErrTrimmed if
// lsn is below the newest checkpoint (remote GC may have removed it).
func (l *Log) Read(ctx context.Context, lsn uint64) (Entry, error) {
	key := LogKey(l.volume, lsn)
	b, err := l.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		if cp, cerr := l.newestCheckpointLSN(ctx); cerr == nil && lsn < cp {
			return Entry{}, fmt.Errorf("volume %s: lsn %d: below checkpoint %d: %w (%v)", l.volume, lsn, cp, ErrTrimmed, err)
		}
	}
	if err != nil {
		return Entry{}, fmt.Errorf("volume %s: lsn %d: %w", l.volume, lsn, err)
	}
	return l.decodeAt(key, lsn, b)
}

func (l *Log) decodeAt(key string, lsn uint64, b []byte) (Entry, error) {
	if isTombstone(b) {
		v, n, err := DecodeTombstone(b)
		if err != nil {
			return Entry{}, fmt.Errorf("volume %s: %s: %w", l.volume, key, err)
		}
		if v != l.volume || n != lsn {
			return Entry{}, fmt.Errorf("volume %s: %s holds the tombstone of %s@%d: %w", l.volume, key, v, n, ErrCorrupt)
		}
		return Entry{}, fmt.Errorf("volume %s: lsn %d: %w", l.volume, lsn, ErrTrimmed)
	}
	c, err := DecodeCommit(b)
	if err != nil {
		return Entry{}, fmt.Errorf("volume %s: %s: %w", l.volume, key, err)
	}
	if c.Volume != l.volume || c.LSN != lsn {
		return Entry{}, fmt.Errorf("volume %s: %s holds %s@%d: %w", l.volume, key, c.Volume, c.LSN, ErrCorrupt)
	}
	e := Entry{Commit: c, Hash: HashOf(b), Size: len(b)}
	l.saw(lsn, e.Hash)
	return e, nil
}

// Draft is a commit to be written: the pages to upload, and for a
// checkpoint the frames of older segments it reuses.
type Draft struct {
	// LSN is the remote LSN to create: the base head + 1.
	LSN uint64
	// Prev is the hash of the base head (zero when LSN is 1).
	Prev Hash
	// LocalFrom, LocalTo: the local LSN range (LocalFrom, LocalTo] covered.
	LocalFrom, LocalTo uint64
	Checkpoint         bool
	Meta               map[string][]byte
	// Pages are the pages to upload, in strictly ascending index.
	Pages []Page
	// Reuse references frames already in this volume's segments
	// (checkpoints); their pages must not repeat an index of Pages.
	Reuse []SegmentRef
}

// Prepared is a commit whose segments are uploaded and whose object bytes
// are final: publishing it again after a crash is idempotent. A local
// engine records it (the pending remote commit) before Publish.
type Prepared struct {
	Commit *Commit
	Bytes  []byte
	Hash   Hash
}

// Prepare uploads the segments of a draft (none if its pages total at most
// InlineLimit bytes: they go inline) and encodes the commit object. The
// same draft always prepares to the same bytes.
func (l *Log) Prepare(ctx context.Context, d Draft) (Prepared, error) {
	if err := checkPages(d.Pages); err != nil {
		return Prepared{}, fmt.Errorf("volume %s: lsn %d: %w", l.volume, d.LSN, err)
	}
	c := &Commit{Volume: l.volume, LSN: d.LSN, Prev: d.Prev, LocalFrom: d.LocalFrom, LocalTo: d.LocalTo,
		Checkpoint: d.Checkpoint, Meta: d.Meta, Segments: append([]SegmentRef(nil), d.Reuse...)}
	if len(c.Meta) == 0 {
		c.Meta = nil
	}
	total := 0
	for _, p := range d.Pages {
		total += len(p.Data)
	}
	if total <= InlineLimit {
		c.Inline = d.Pages
	} else {
		call(l.hooks.BeforeSegmentUpload)
		salt := fmt.Sprintf("%s/%d/%s", l.volume, d.LSN, d.Prev)
		for start := 0; start < len(d.Pages); {
			end, raw := start, 0
			for end < len(d.Pages) && (end == start || raw+len(d.Pages[end].Data) <= SegmentBytes) {
				raw += len(d.Pages[end].Data)
				end++
			}
			seg, err := BuildSegment(l.volume, salt, d.Pages[start:end])
			if err != nil {
				return Prepared{}, fmt.Errorf("volume %s: lsn %d: %w", l.volume, d.LSN, err)
			}
			c.Segments = append(c.Segments, SegmentRef{Key: seg.Key, Frames: seg.Frame})
			start = end
			// Encode first so that an invalid commit uploads nothing.
			if _, err := EncodeCommit(c); err != nil {
				return Prepared{}, err
			}
			if err := l.store.Put(ctx, seg.Key, seg.Data); err != nil {
				return Prepared{}, fmt.Errorf("volume %s: lsn %d: upload segment: %w", l.volume, d.LSN, err)
			}
		}
	}
	b, err := EncodeCommit(c)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{Commit: c, Bytes: b, Hash: HashOf(b)}, nil
}

// Publish creates the commit object at its LSN if no commit is there: that
// conditional create is the fence. If a commit is there already, Publish
// compares bytes: the same commit means an earlier attempt landed (success);
// another commit means another writer won the LSN, and the error is a
// *DivergedError wrapping ErrDiverged.
//
// Before creating, Publish makes sure the commit's base (LSN-1 with hash
// Prev) is on the remote, so that no writer can fork the chain from a base
// the remote does not hold (its own commit that lost a race, say). The
// check is free when the base is the newest commit this Log published or
// read — the steady state of a writer, whose small commit then costs one
// conditional PUT — and one GET otherwise. Publishing a checkpoint also
// writes its marker.
func (l *Log) Publish(ctx context.Context, p Prepared) error {
	c := p.Commit
	if c == nil || c.Volume != l.volume || HashOf(p.Bytes) != p.Hash {
		return invalid("volume %s: publish of a commit not prepared for it", l.volume)
	}
	if err := l.checkBase(ctx, c); err != nil {
		return err
	}
	key := LogKey(l.volume, c.LSN)
	err := l.store.PutIfAbsent(ctx, key, p.Bytes)
	if errors.Is(err, ErrExists) {
		have, gerr := l.store.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("volume %s: lsn %d: read the commit that won: %w", l.volume, c.LSN, gerr)
		}
		if !equalCommitBytes(have, p.Bytes) {
			if e, derr := l.decodeAt(key, c.LSN, have); derr == nil {
				l.saw(c.LSN, e.Hash)
			}
			return &DivergedError{Volume: l.volume, LSN: c.LSN, Want: p.Hash, Got: HashOf(have),
				Reason: "another commit holds this lsn"}
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("volume %s: lsn %d: publish: %w", l.volume, c.LSN, err)
	}
	l.saw(c.LSN, p.Hash)
	if c.Checkpoint {
		mk := CheckpointKey(l.volume, c.LSN, p.Hash)
		if err := l.store.Put(ctx, mk, encodeMarker(checkpointMarker{Volume: l.volume, LSN: c.LSN, Hash: p.Hash})); err != nil {
			return fmt.Errorf("volume %s: lsn %d: checkpoint marker: %w", l.volume, c.LSN, err)
		}
	}
	return nil
}

// checkBase verifies that the remote holds c's base: LSN-1 with hash Prev.
func (l *Log) checkBase(ctx context.Context, c *Commit) error {
	if c.LSN == 1 || l.knows(c.LSN-1, c.Prev) {
		return nil
	}
	base, err := l.Read(ctx, c.LSN-1)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrTrimmed) {
		return &DivergedError{Volume: l.volume, LSN: c.LSN - 1, Want: c.Prev,
			Reason: fmt.Sprintf("the base of the commit is not on the remote (%v)", err)}
	}
	if err != nil {
		return fmt.Errorf("volume %s: lsn %d: verify base: %w", l.volume, c.LSN, err)
	}
	if base.Hash != c.Prev {
		return &DivergedError{Volume: l.volume, LSN: c.LSN - 1, Want: c.Prev, Got: base.Hash,
			Reason: "the remote holds another commit at the base"}
	}
	return nil
}

// Append prepares and publishes a draft (see Prepare and Publish) and
// returns the entry it created.
func (l *Log) Append(ctx context.Context, d Draft) (Entry, error) {
	p, err := l.Prepare(ctx, d)
	if err != nil {
		return Entry{}, err
	}
	if err := l.Publish(ctx, p); err != nil {
		return Entry{}, err
	}
	return Entry{Commit: p.Commit, Hash: p.Hash, Size: len(p.Bytes)}, nil
}

// Since yields the commits above the sync point after, in LSN order, up to
// the head as one LIST finds it when iteration starts, verifying the hash chain: the first commit must name afterHash
// as its predecessor (pass the zero hash for after = 0), each next one the
// hash of the one before. A break yields a *DivergedError; a commit missing
// below the head yields ErrTrimmed or ErrNotFound. Iteration stops at the
// first error. If afterHash is zero and after > 0, the commit at after is
// read to learn it.
func (l *Log) Since(ctx context.Context, after uint64, afterHash Hash) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		head, err := l.Head(ctx)
		if err != nil {
			yield(Entry{}, err)
			return
		}
		prev := afterHash
		if after > 0 && prev.IsZero() {
			e, err := l.Read(ctx, after)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			prev = e.Hash
		}
		for lsn := after + 1; lsn <= head; lsn++ {
			e, err := l.Read(ctx, lsn)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			if e.Commit.Prev != prev {
				yield(Entry{}, &DivergedError{Volume: l.volume, LSN: lsn, Want: prev, Got: e.Commit.Prev,
					Reason: "commit names another predecessor"})
				return
			}
			prev = e.Hash
			if !yield(e, nil) {
				return
			}
		}
	}
}

// newestCheckpointLSN returns the LSN of the newest checkpoint marker, or
// 0: one LIST.
func (l *Log) newestCheckpointLSN(ctx context.Context) (uint64, error) {
	objs, err := l.store.List(ctx, CheckpointPrefix(l.volume), 1)
	if err != nil || len(objs) == 0 {
		return 0, err
	}
	lsn, _, err := ParseCheckpointKey(l.volume, objs[0].Key)
	return lsn, err
}

// LatestCheckpoint returns the newest checkpoint commit: one LIST of the
// checkpoint markers (their keys sort newest first and name LSN and hash)
// and one GET of the commit, whose hash must match the marker's. Without a
// checkpoint it returns an error wrapping ErrNoCheckpoint.
func (l *Log) LatestCheckpoint(ctx context.Context) (Entry, error) {
	objs, err := l.store.List(ctx, CheckpointPrefix(l.volume), 1)
	if err != nil {
		return Entry{}, fmt.Errorf("volume %s: checkpoint: %w", l.volume, err)
	}
	if len(objs) == 0 {
		return Entry{}, fmt.Errorf("volume %s: %w", l.volume, ErrNoCheckpoint)
	}
	lsn, h, err := ParseCheckpointKey(l.volume, objs[0].Key)
	if err != nil {
		return Entry{}, fmt.Errorf("volume %s: %w", l.volume, err)
	}
	e, err := l.Read(ctx, lsn)
	if err != nil {
		return Entry{}, err
	}
	if e.Hash != h || !e.Commit.Checkpoint {
		return Entry{}, fmt.Errorf("volume %s: checkpoint marker %s does not match the commit (hash %s, checkpoint %v): %w",
			l.volume, objs[0].Key, e.Hash.Short(), e.Commit.Checkpoint, ErrCorrupt)
	}
	return e, nil
}

// FetchFrame reads one frame of a segment with one ranged GET and returns
// its pages, verified (see DecodeFrame).
func (l *Log) FetchFrame(ctx context.Context, segment string, f FrameRef) ([]Page, error) {
	if !checkSegmentKey(l.volume, segment) {
		return nil, fmt.Errorf("volume %s: segment key %q: %w", l.volume, segment, ErrInvalid)
	}
	z, err := l.store.GetRange(ctx, segment, int64(f.Offset), int64(f.Length))
	if err != nil {
		return nil, fmt.Errorf("volume %s: %s %v: %w", l.volume, segment, f, err)
	}
	pages, err := DecodeFrame(f, z)
	if err != nil {
		return nil, fmt.Errorf("volume %s: %s %v: %w", l.volume, segment, f, err)
	}
	return pages, nil
}

// FetchPage returns the bytes of one page: from the reference itself if
// inline, else with one ranged GET of its frame.
func (l *Log) FetchPage(ctx context.Context, ref PageRef) ([]byte, error) {
	if ref.Inline() {
		return ref.Data, nil
	}
	pages, err := l.FetchFrame(ctx, ref.Segment, ref.Frame)
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		if p.Index == ref.Index {
			return p.Data, nil
		}
	}
	return nil, fmt.Errorf("volume %s: page %d not in %s %v: %w", l.volume, ref.Index, ref.Segment, ref.Frame, ErrInvalid)
}

// Check verifies the whole retained log: its LSNs are contiguous up to the
// head, tombstones of trimmed commits come before every commit, every
// commit decodes, and the hash chain holds from the oldest retained commit
// to the head. It returns the oldest retained and head LSNs (0, 0 for an
// empty log). It reads every commit: a tool and test aid, not a hot
// path.
func (l *Log) Check(ctx context.Context) (oldest, head uint64, err error) {
	objs, err := l.store.List(ctx, LogPrefix(l.volume), 0)
	if err != nil {
		return 0, 0, fmt.Errorf("volume %s: check: %w", l.volume, err)
	}
	if len(objs) == 0 {
		return 0, 0, nil
	}
	lsns := make([]uint64, len(objs))
	for i, o := range objs {
		if lsns[i], err = ParseLogKey(l.volume, o.Key); err != nil {
			return 0, 0, fmt.Errorf("volume %s: check: %w", l.volume, err)
		}
		if i > 0 && lsns[i] != lsns[i-1]-1 {
			return 0, 0, fmt.Errorf("volume %s: check: gap between lsn %d and %d: %w", l.volume, lsns[i], lsns[i-1], ErrCorrupt)
		}
	}
	head, oldest = lsns[0], lsns[len(lsns)-1]
	var prev Hash
	trimmed := true // tombstones of trimmed commits come first
	for lsn := oldest; lsn <= head; lsn++ {
		e, err := l.Read(ctx, lsn)
		if trimmed && errors.Is(err, ErrTrimmed) {
			oldest = lsn + 1
			continue
		}
		trimmed = false
		if err != nil {
			return 0, 0, err
		}
		if lsn > oldest && e.Commit.Prev != prev {
			return 0, 0, &DivergedError{Volume: l.volume, LSN: lsn, Want: prev, Got: e.Commit.Prev, Reason: "hash chain broken"}
		}
		if lsn == 1 && !e.Commit.Prev.IsZero() {
			return 0, 0, fmt.Errorf("volume %s: lsn 1 names a predecessor: %w", l.volume, ErrCorrupt)
		}
		prev = e.Hash
	}
	return oldest, head, nil
}
