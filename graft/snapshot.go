package graft

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Snapshot is a read-only view of a volume at one LSN. It reads the same
// bytes however often it is read, while commits and GC go on beside it: page
// and metadata versions are keyed by LSN and never rewritten, and the
// snapshot pins its LSN so that GC keeps what it can see. Reads take no lock
// and never wait for writers. A Snapshot is safe for concurrent use; Close
// it when done (an open snapshot holds GC back).
type Snapshot struct {
	v      *Volume
	lsn    uint64
	closed atomic.Bool
	low    atomic.Uint64 // archive floor + 1 once read; 0: not read yet
}

// LSN returns the LSN the snapshot reads at.
func (s *Snapshot) LSN() uint64 { return s.lsn }

// Volume returns the volume the snapshot belongs to.
func (s *Snapshot) Volume() *Volume { return s.v }

// Close releases the snapshot's pin. Reads after Close fail with ErrClosed.
func (s *Snapshot) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.v.unpin(s.lsn)
	}
	return nil
}

func (s *Snapshot) check(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("graft: snapshot of volume %q at LSN %d: %w", s.v.name, s.lsn, ErrClosed)
	}
	if err := s.v.s.checkOpen(); err != nil {
		return err
	}
	return ctx.Err()
}

// Get returns a copy of page i as of the snapshot's LSN: the version written
// by the newest commit at or below it. A page never written by then, or an
// archive page dropped by then (below the archive floor, MetaArchiveLow),
// fails with an error wrapping ErrNotFound. One seek (plus one, once per
// snapshot, for the floor of an archive page).
func (s *Snapshot) Get(ctx context.Context, i uint64) ([]byte, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if i >= ArchiveBase {
		lo, hi, err := s.hidden(ctx)
		if err != nil {
			return nil, err
		}
		if isHidden(i, lo, hi) {
			return nil, fmt.Errorf("graft: volume %q page %d at LSN %d: dropped below the archive floor: %w", s.v.name, i, s.lsn, ErrNotFound)
		}
	}
	var lo, hi [pageKeyLen]byte
	v, err := s.getPage(ctx, i, putPageKey(&lo, s.v.id, i, s.lsn), putPageKey(&hi, s.v.id, i, lsnNone))
	if err != nil {
		return nil, fmt.Errorf("graft: volume %q page %d at LSN %d: %w", s.v.name, i, s.lsn, err)
	}
	return v, nil
}

// getPage returns a copy of the bytes of the first page version in
// [lo, hi), fetching them from the remote if they are not local yet.
func (s *Snapshot) getPage(ctx context.Context, i uint64, lo, hi []byte) ([]byte, error) {
	var data []byte
	var ref bool
	var seq uint32
	var lsn uint64
	err := s.seekFirst(ctx, lo, hi, func(k, val []byte) error {
		_, lsn, _ = decodePageKey(k, s.v.id)
		d, _, sq, r, err := pageValue(val)
		data, seq, ref = append([]byte{}, d...), sq, r
		return err
	})
	if err != nil {
		return nil, err
	}
	if ref {
		return s.v.fault(ctx, i, lsn, seq)
	}
	return data, nil
}

// Meta returns a copy of the value of metadata key as of the snapshot's LSN,
// or an error wrapping ErrNotFound if no commit at or below it set the key.
func (s *Snapshot) Meta(ctx context.Context, key string) ([]byte, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if len(key) > MaxMetaKeyLen {
		return nil, fmt.Errorf("graft: volume %q metadata %q: %w", s.v.name, key, ErrNotFound)
	}
	lo, hi := metaBounds(s.v.id, key, s.lsn)
	var v []byte
	err := s.seekFirst(ctx, lo, hi, func(_, val []byte) error {
		p, err := versionedPayload("metadata version", val)
		v = append([]byte{}, p...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("graft: volume %q metadata %q at LSN %d: %w", s.v.name, key, s.lsn, err)
	}
	return v, nil
}

// seekFirst calls use with the key and value of the first key in
// [lo, hi), or fails with ErrNotFound; both are valid only during the call.
func (s *Snapshot) seekFirst(ctx context.Context, lo, hi []byte, use func(key, val []byte) error) error {
	it, err := s.v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	if !it.SeekGE(lo) {
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return err
		}
		return ErrNotFound
	}
	val, err := it.ValueAndErr()
	if err == nil {
		err = use(it.Key(), val)
	}
	return errors.Join(err, it.Close())
}

// Scan returns an iterator over the pages present at the snapshot's LSN
// with index in [lo, hi], ascending. Archive pages dropped by then (below
// the archive floor) are not present.
func (s *Snapshot) Scan(ctx context.Context, lo, hi uint64) *PageIter {
	return s.newPageIter(ctx, lo, hi, false)
}

// ScanReverse is Scan in descending index order.
func (s *Snapshot) ScanReverse(ctx context.Context, lo, hi uint64) *PageIter {
	return s.newPageIter(ctx, lo, hi, true)
}

// PageIter iterates the pages of a snapshot over an index range:
//
//	it := snap.Scan(ctx, lo, hi)
//	for it.Next() {
//		use(it.Index(), it.Value())
//	}
//	if err := it.Close(); err != nil { … }
//
// Value's bytes are valid until the next call to Next or Close; the
// iterator allocates nothing per page. Not safe for concurrent use.
type PageIter struct {
	snap    *Snapshot
	ctx     context.Context
	it      *pebble.Iterator
	err     error
	lo, hi  uint64
	reverse bool
	started bool
	emitted bool // idx holds a page already returned
	valid   bool // reverse: it is positioned on the next key to consider
	idx     uint64
	val     []byte
	buf     []byte
	n       int
	key     [pageKeyLen]byte

	hideLo, hideHi uint64 // dropped archive pages [hideLo, hideHi); hideHi 0 = 2^64
}

// Steps of Next/Prev over versions the snapshot cannot see before the
// iterator seeks instead.
const maxSkipSteps = 4

func (s *Snapshot) newPageIter(ctx context.Context, lo, hi uint64, reverse bool) *PageIter {
	p := &PageIter{snap: s, ctx: ctx, lo: lo, hi: hi, reverse: reverse}
	if err := s.check(ctx); err != nil {
		p.err = err
		return p
	}
	if lo > hi {
		return p // empty range: no Pebble iterator, Next reports false
	}
	if hi >= ArchiveBase {
		if p.hideLo, p.hideHi, p.err = s.hidden(ctx); p.err != nil {
			return p
		}
		if isHidden(lo, p.hideLo, p.hideHi) { // start above the dropped pages
			if p.hideHi == 0 || p.hideHi > hi {
				return p
			}
			lo, p.lo = p.hideHi, p.hideHi
		}
	}
	lower, upper := pageBounds(s.v.id, lo, hi)
	p.it, p.err = s.v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	return p
}

// Next advances to the next page and reports whether there is one.
func (p *PageIter) Next() bool {
	if p.err != nil || p.it == nil {
		return false
	}
	if p.n++; p.n&1023 == 0 {
		if p.err = p.snap.check(p.ctx); p.err != nil {
			return false
		}
	}
	var ok bool
	if p.reverse {
		ok = p.prev()
	} else {
		ok = p.next()
	}
	if !ok && p.err == nil {
		p.err = p.it.Error()
	}
	return ok
}

func (p *PageIter) next() bool {
	s, vid := p.snap, p.snap.v.id
	var valid bool
	if !p.started {
		p.started = true
		valid = p.it.SeekGE(putPageKey(&p.key, vid, p.lo, s.lsn))
	} else {
		if p.idx == p.hi {
			return false
		}
		valid = p.it.Next()
	}
	steps := 0
	for valid {
		q, l, ok := decodePageKey(p.it.Key(), vid)
		if !ok {
			p.err = corrupt("page key", "%x in the page range of volume %q", p.it.Key(), s.v.name)
			return false
		}
		switch {
		case p.emitted && q == p.idx: // an older version of the page just returned
			if steps++; steps > maxSkipSteps {
				if q == p.hi {
					return false
				}
				valid, steps = p.it.SeekGE(putPageKey(&p.key, vid, q+1, s.lsn)), 0
			} else {
				valid = p.it.Next()
			}
		case l > s.lsn: // newer than the snapshot
			if steps++; steps > maxSkipSteps {
				valid, steps = p.it.SeekGE(putPageKey(&p.key, vid, q, s.lsn)), 0
			} else {
				valid = p.it.Next()
			}
		case isHidden(q, p.hideLo, p.hideHi): // dropped: seek past them
			if p.hideHi == 0 || p.hideHi > p.hi {
				return false
			}
			valid, steps = p.it.SeekGE(putPageKey(&p.key, vid, p.hideHi, s.lsn)), 0
		default:
			return p.load(q, false)
		}
	}
	return false
}

// prev walks backwards: the versions of one page come oldest first, so the
// page's value at the snapshot is the last version at or below the LSN
// before a newer one or another page.
func (p *PageIter) prev() bool {
	s, vid := p.snap, p.snap.v.id
	if !p.started {
		p.started = true
		p.valid = p.it.Last()
	}
	for p.valid {
		q, l, ok := decodePageKey(p.it.Key(), vid)
		if !ok {
			p.err = corrupt("page key", "%x in the page range of volume %q", p.it.Key(), s.v.name)
			return false
		}
		if isHidden(q, p.hideLo, p.hideHi) { // dropped: continue below them
			p.valid = p.hideLo > p.lo && p.it.SeekLT(putPageKey(&p.key, vid, p.hideLo, lsnMax))
			continue
		}
		found, steps := false, 0
		for l <= s.lsn {
			if !p.load(q, true) {
				return false
			}
			found = true
			if steps++; steps > maxSkipSteps { // many old versions: seek to the answer
				if !p.it.SeekGE(putPageKey(&p.key, vid, q, s.lsn)) || !p.load(q, true) {
					p.err = errors.Join(p.it.Error(), corrupt("page index", "version of page %d vanished", q))
					return false
				}
				break
			}
			if p.valid = p.it.Prev(); !p.valid {
				return true
			}
			var same bool
			if q2, l2, ok := decodePageKey(p.it.Key(), vid); ok && q2 == q {
				same, l = true, l2
			}
			if !same {
				return true
			}
		}
		// Positioned on a version of q newer than the snapshot (or, after the
		// seek above, on q's answer): skip the rest of q.
		p.valid = q > p.lo && p.it.SeekLT(putPageKey(&p.key, vid, q, lsnMax))
		if found {
			return true
		}
	}
	return false
}

// load makes the current key's value the iterator's page q. copyVal copies
// it (the reverse walk moves past the version before returning it).
func (p *PageIter) load(q uint64, copyVal bool) bool {
	val, err := p.it.ValueAndErr()
	if err == nil {
		var ref bool
		var seq uint32
		if val, _, seq, ref, err = pageValue(val); err == nil && ref {
			_, lsn, _ := decodePageKey(p.it.Key(), p.snap.v.id)
			val, err = p.snap.v.fault(p.ctx, q, lsn, seq)
		}
	}
	if err != nil {
		p.err = fmt.Errorf("graft: volume %q page %d: %w", p.snap.v.name, q, err)
		return false
	}
	if copyVal {
		p.buf = append(p.buf[:0], val...)
		val = p.buf
	}
	p.idx, p.val, p.emitted = q, val, true
	return true
}

// Index returns the current page's index.
func (p *PageIter) Index() uint64 { return p.idx }

// Value returns the current page's bytes, valid until the next Next or Close.
func (p *PageIter) Value() []byte { return p.val }

// Err returns the error that ended the iteration, if any.
func (p *PageIter) Err() error { return p.err }

// Close releases the iterator and returns the error that ended the
// iteration, if any.
func (p *PageIter) Close() error {
	if p.it != nil {
		err := p.it.Close()
		p.it = nil
		if p.err == nil {
			p.err = err
		}
	}
	p.val = nil
	return p.err
}
