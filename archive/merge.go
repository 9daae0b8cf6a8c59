package archive

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// ErrNoVolume: the stream has an archive (its seam cache says so) but its
// volume is not in this data dir. Serving the live tail alone would hide the
// archived records, so the read fails instead.
var ErrNoVolume = errors.New("archive: the stream's archive volume is not in this data dir")

// ErrVolumeBehind: the archive volume in this data dir is behind the seam
// cache: another node folded (and may have trimmed) records this copy does
// not have. Pull the volume before reading or cycling.
var ErrVolumeBehind = errors.New("archive: the local archive volume is behind the seam cache")

// ErrDropped: retention dropped records a forward merge-read had not
// reached yet, while the read ran; the read resumes at the first retained
// record. A *DroppedError says which.
var ErrDropped = errors.New("archive: records not yet read were dropped by retention during the read")

// DroppedError is yielded by a forward merge-read when retention dropped
// records at or above its cursor between two of its archive parts: the
// records of [From, Through] are exactly the ones the read skipped, all
// dropped (Through is the newest dropped record, or the range's To when the
// drop passed it: then the rest of the range, whatever it held, was
// dropped), and the read goes on at the first retained record if the loop
// goes on.
type DroppedError struct {
	Queue, Stream string
	From          xid.ID // the read's cursor: the lowest id it had not decided
	Through       xid.ID // the newest record retention dropped (at most To)
}

func (e *DroppedError) Error() string {
	return fmt.Sprintf("merge-read %s/%s: retention dropped the records of [%s, %s] during the read; it resumes at the first retained record",
		e.Queue, e.Stream, formatID(e.From), formatID(e.Through))
}

// Unwrap makes errors.Is(err, ErrDropped) hold.
func (e *DroppedError) Unwrap() error { return ErrDropped }

// DefaultPageSize is the number of live entries per round trip of a
// merge-read.
const DefaultPageSize = 512

// Range selects the records of a read.
type Range struct {
	From, To xid.ID // inclusive; xid.Min and xid.Max leave an end open
	Limit    int    // at most this many records (≤ 0: all)
	Reverse  bool   // newest first
	PageSize int    // live entries per round trip (≤ 0: DefaultPageSize)
}

// All returns the Range of every record, oldest first.
func All() Range { return Range{From: xid.Min, To: xid.Max} }

// Source is what a merge-read reads from.
type Source struct {
	// Ref names the stream and its archive volume.
	Ref names.StreamRef
	// Live is the live tier (a *mq.Client); nil (or a nil *mq.Client)
	// reads the archive only (Redis may be down).
	Live Live
	// Volume is the stream's archive volume in this data dir; nil if the data
	// dir has none.
	Volume *graft.Volume
	// Store is the data dir's graft store (optional). When Volume is nil and
	// the seam cache says the stream has an archive (also when its first
	// cycle runs during the read), the read opens archive.Q.S from Store
	// before it calls Pull.
	Store *graft.Store
	// Pull fetches the archive volume (archive.Q.S, from the remote into the
	// data dir) when the seam cache says the stream has an archive and Volume
	// is nil or behind the cache; it is called at most once per read and
	// returns the volume to read. nil fails such a read with ErrNoVolume (or
	// ErrVolumeBehind); so does a pull that fails (the error wraps both the
	// sentinel and the pull's error) or that leaves the volume behind.
	Pull func(ctx context.Context, volume string) (*graft.Volume, error)
}

// MergeRead yields the records of the stream in r: the archive (ids ≤ W)
// and the live tail (ids > W) as one strictly ordered sequence, each id
// once, read lazily page by page in constant memory.
//
// It stays gap-free and duplicate-free while fold-then-trim cycles run
// beside it (invariant 3): after each live page it reads W again (W′), serves
// what lies between its cursor and W′ from the archive, and takes only ids
// above W′ from the page. A record trimmed before the page was read was
// folded first, so its id is ≤ W′ (docs/ARCHIVE.md has the argument, both
// directions).
//
// While the read has no volume (the stream was not archived when it
// began), it checks the seam cache after each live page: a stream whose
// first cycle folded and trimmed during the read is read from the volume
// the cycle created (Volume, Store or Pull), or the read fails with
// ErrNoVolume; it never serves the live tail with a gap.
//
// Each archive part is read at one snapshot, from the first record
// retained there. A forward read that finds, at a later archive part, that
// retention dropped records at or above its cursor yields a *DroppedError
// (ErrDropped) and resumes at the first retained record; it never returns
// a dropped record and has no other gap. A range that begins below the
// first retained record when the read begins starts there, silently.
//
// Every live entry is a record, whatever its id or bytes; a reply that is
// not an entry yields a *mq.EntryError, and the iteration goes on if the loop does, and so it does after a
// *DroppedError. Any other error ends it. A volume
// that belongs to another stream (MetaOwner) fails the read with an
// *OwnerError before anything is served or pulled.
func MergeRead(ctx context.Context, src Source, r Range) iter.Seq2[mq.Record, error] {
	if !present(src.Live) {
		src.Live = nil // a nil *mq.Client: the archive only
	}
	return func(yield func(mq.Record, error) bool) {
		if r.PageSize <= 0 {
			r.PageSize = DefaultPageSize
		}
		if r.To.Less(r.From) {
			return
		}
		vol, err := src.volume(ctx)
		if err != nil {
			yield(mq.Record{}, err)
			return
		}
		n := 0
		emit := func(rec mq.Record, err error) bool {
			if err != nil {
				return yield(rec, err)
			}
			if !yield(rec, nil) {
				return false
			}
			n++
			return r.Limit <= 0 || n < r.Limit
		}
		m := merger{src: src, vol: vol, r: r, emit: emit}
		if r.Reverse {
			m.reverse(ctx)
		} else {
			m.forward(ctx)
		}
	}
}

// volume returns the archive volume to read, nil if the stream has none,
// after checking it against the seam cache.
func (src Source) volume(ctx context.Context) (*graft.Volume, error) {
	vol, err := src.checkOwner(ctx, src.Volume)
	if err != nil || src.Live == nil {
		return vol, err
	}
	seam, ok, err := GetArchived(ctx, src.Live, src.Ref)
	if err != nil {
		return nil, fmt.Errorf("merge-read %s: %w", src.Ref, err)
	}
	if !ok {
		return vol, nil
	}
	name := src.Ref.Volume().String()
	if vol == nil && src.Store != nil {
		v, err := src.Store.Volume(ctx, src.Ref.Volume())
		switch {
		case err == nil:
			if vol, err = src.checkOwner(ctx, v); err != nil {
				return nil, err
			}
		case !errors.Is(err, graft.ErrVolumeNotFound):
			return nil, fmt.Errorf("merge-read %s: %w", src.Ref, err)
		}
	}
	pulled := false
	if vol == nil {
		if src.Pull == nil {
			return nil, fmt.Errorf("merge-read %s: the archive ends at %s, but %s is missing; pull it from the remote or read on the node that folds it: %w",
				src.Ref, formatID(seam.W), name, ErrNoVolume)
		}
		if vol, err = src.Pull(ctx, name); err != nil {
			return nil, fmt.Errorf("merge-read %s: the archive ends at %s, but %s is missing here and the pull failed: %w",
				src.Ref, formatID(seam.W), name, typed(err, ErrNoVolume))
		}
		if vol, err = src.checkOwner(ctx, vol); err != nil {
			return nil, err
		}
		pulled = true
	}
	st, err := Frontier(ctx, vol)
	if err != nil {
		return nil, err
	}
	if !st.Covers(seam.W) && !pulled && src.Pull != nil {
		// Behind the seam cache: another node folded more. Pull once.
		if vol, err = src.Pull(ctx, name); err != nil {
			return nil, fmt.Errorf("merge-read %s: %s ends at %s but the seam cache at %s, and the pull failed: %w",
				src.Ref, name, formatW(st), formatID(seam.W), typed(err, ErrVolumeBehind))
		}
		if vol, err = src.checkOwner(ctx, vol); err != nil {
			return nil, err
		}
		if st, err = Frontier(ctx, vol); err != nil {
			return nil, err
		}
	}
	if !st.Covers(seam.W) {
		return nil, fmt.Errorf("merge-read %s: %s ends at %s but the seam cache at %s (LSN %d); pull the volume: %w",
			src.Ref, vol.Name(), formatW(st), formatID(seam.W), seam.LSN, ErrVolumeBehind)
	}
	return vol, nil
}

// checkOwner returns vol, or an *OwnerError if vol records an owner other
// than the source's stream. A nil vol passes.
func (src Source) checkOwner(ctx context.Context, vol *graft.Volume) (*graft.Volume, error) {
	if vol == nil {
		return nil, nil
	}
	if err := CheckOwner(ctx, vol, src.Ref); err != nil {
		return nil, fmt.Errorf("merge-read %s: %w", src.Ref, err)
	}
	return vol, nil
}

// typed returns err, wrapping sentinel too unless err already does.
func typed(err, sentinel error) error {
	if errors.Is(err, sentinel) {
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

func formatW(st State) string {
	if st.Empty() {
		return "nothing"
	}
	return formatID(st.W)
}

type merger struct {
	src  Source
	vol  *graft.Volume
	r    Range
	emit func(mq.Record, error) bool
	// parts counts the archive snapshots the read has taken (catchUp).
	parts int
}

// snap returns a snapshot of the archive at its head and the state there;
// a nil snapshot and the empty state when there is no volume. While the
// read has no volume it first checks the seam cache again: the seam cache
// is written before a cycle's first trim, so a record trimmed before the
// live page just read is found through the volume resolved here.
func (m *merger) snap(ctx context.Context) (*graft.Snapshot, State, error) {
	if m.vol == nil && m.src.Live != nil {
		src := m.src
		src.Volume = nil
		vol, err := src.volume(ctx)
		if err != nil {
			return nil, State{}, err
		}
		m.vol = vol
	}
	if m.vol == nil {
		return nil, State{}, nil
	}
	snap, err := m.vol.Snapshot(ctx)
	if err != nil {
		return nil, State{}, fmt.Errorf("merge-read %s: %w", m.vol.Name(), err)
	}
	st, err := stateAt(ctx, snap)
	if err != nil {
		snap.Close()
		return nil, State{}, err
	}
	return snap, st, nil
}

// archive serves [from, to] from the archive at snap (state st) and closes
// snap. It returns false if the reader stopped.
func (m *merger) archive(ctx context.Context, snap *graft.Snapshot, st State, from, to xid.ID) bool {
	if snap == nil {
		return true
	}
	defer snap.Close()
	return readAt(ctx, snap, st, from, to, m.r.Reverse, m.emit)
}

// page reads one live page of [lo, hi].
func (m *merger) page(ctx context.Context, lo, hi xid.ID) (mq.Page, bool) {
	cur, err := m.src.Live.NewCursor(m.src.Ref, lo, hi, m.r.Reverse)
	if err == nil {
		var p mq.Page
		if p, err = cur.Next(ctx, m.r.PageSize); err == nil {
			return p, true
		}
	}
	m.emit(mq.Record{}, fmt.Errorf("merge-read %s: live tail: %w", m.src.Ref, err))
	return mq.Page{}, false
}

// foreign yields the page's foreign entries (replies that are no entry) as
// errors. It reports the highest (or, in reverse, lowest) id among them,
// whether there was one, and whether to go on.
func (m *merger) foreign(p mq.Page) (edge xid.ID, any bool, ok bool) {
	for _, fe := range p.Foreign {
		if !m.emit(mq.Record{}, fe) {
			return xid.ID{}, false, false
		}
		id, err := xid.Parse(fe.XID)
		if err != nil {
			// No id to move the cursor past: stop here.
			m.emit(mq.Record{}, fmt.Errorf("merge-read %s: cannot page past entry %s: %w",
				m.src.Ref, fe.XID, err))
			return xid.ID{}, false, false
		}
		if !any || (!m.r.Reverse && edge.Less(id)) || (m.r.Reverse && id.Less(edge)) {
			edge, any = id, true
		}
	}
	return edge, any, true
}

// catchUp reads W at a new snapshot and, if W covers *cur, serves
// [*cur, min(W, To)] from the archive and moves *cur past W. From the
// read's second archive part on, records at or above *cur that retention
// dropped are reported (*DroppedError) before the part is served. It
// returns false when the read is over (done, failed, or the consumer
// stopped).
func (m *merger) catchUp(ctx context.Context, cur *xid.ID) bool {
	snap, st, err := m.snap(ctx)
	if err != nil {
		m.emit(mq.Record{}, err)
		return false
	}
	m.parts++
	if !st.Covers(*cur) {
		if snap != nil {
			snap.Close()
		}
		return true
	}
	if m.parts > 1 && st.Low > 0 {
		through, ok, err := droppedThrough(ctx, snap)
		if err == nil && ok && !through.Less(*cur) {
			err = &DroppedError{Queue: m.src.Ref.Queue().String(), Stream: m.src.Ref.Stream().String(), From: *cur, Through: xid.MinOf(through, m.r.To)}
		}
		if err != nil && (!m.emit(mq.Record{}, err) || !errors.Is(err, ErrDropped)) {
			snap.Close()
			return false
		}
	}
	if !m.archive(ctx, snap, st, *cur, m.r.To) || !st.W.Less(m.r.To) {
		return false
	}
	*cur, _ = st.W.Next() // st.W < To ≤ xid.Max
	return true
}

// forward: cur is the lowest id not yet decided.
func (m *merger) forward(ctx context.Context) {
	r := m.r
	cur := r.From
	if !m.catchUp(ctx, &cur) || m.src.Live == nil {
		return
	}
	for {
		p, ok := m.page(ctx, cur, r.To)
		if !ok {
			return
		}
		// W′, read after the page: every record of [cur, last of page]
		// missing from the page was trimmed before it, so is ≤ W′.
		if !m.catchUp(ctx, &cur) {
			return
		}
		for _, rec := range p.Records {
			if rec.ID.Less(cur) {
				continue // folded: served from the archive
			}
			if !m.emit(rec, nil) || !rec.ID.Less(r.To) {
				return
			}
			cur, _ = rec.ID.Next() // rec.ID < To ≤ xid.Max
		}
		edge, any, ok := m.foreign(p)
		if !ok {
			return
		}
		if any && !edge.Less(cur) {
			if !edge.Less(r.To) {
				return
			}
			cur, _ = edge.Next()
		}
		if len(p.Records)+len(p.Foreign) < r.PageSize {
			return // the live range was read to its end
		}
	}
}

// reverse: hi is the highest id not yet decided.
func (m *merger) reverse(ctx context.Context) {
	r := m.r
	hi := r.To
	if m.src.Live != nil {
		for {
			p, ok := m.page(ctx, r.From, hi)
			if !ok {
				return
			}
			// W′, read after the page: a record of [first of page, hi] that
			// is not in the page was trimmed before it, so is ≤ W′.
			snap, st, err := m.snap(ctx)
			if err != nil {
				m.emit(mq.Record{}, err)
				return
			}
			toArchive := len(p.Records)+len(p.Foreign) < r.PageSize
			for _, rec := range p.Records {
				if st.Covers(rec.ID) {
					toArchive = true
					break
				}
				if !m.emit(rec, nil) || !r.From.Less(rec.ID) {
					if snap != nil {
						snap.Close()
					}
					return
				}
				hi, _ = rec.ID.Prev() // From < rec.ID
			}
			edge, any, ok := m.foreign(p)
			if !ok {
				if snap != nil {
					snap.Close()
				}
				return
			}
			if any && !hi.Less(edge) && !toArchive {
				if !r.From.Less(edge) {
					if snap != nil {
						snap.Close()
					}
					return
				}
				hi, _ = edge.Prev()
			}
			if toArchive {
				// Everything left, [From, hi], is ≤ W′ or absent.
				m.archive(ctx, snap, st, r.From, xid.MinOf(hi, st.W))
				return
			}
			if snap != nil {
				snap.Close()
			}
		}
	}
	snap, st, err := m.snap(ctx)
	if err != nil {
		m.emit(mq.Record{}, err)
		return
	}
	m.archive(ctx, snap, st, r.From, hi)
}
