package graft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/graft/remote"
)

// A follower stores the pages of a remote commit lazily: each page version
// is a remote reference (value version 2) naming a frame record, and the
// page's bytes are fetched on first read with one ranged GET of the frame.
// docs/GRAFT.md specifies the bytes.

const (
	pageRemoteRef = recordV2 // page value version: a remote reference
	frameKeyLen   = 1 + 8 + 8 + 4
)

// appendFrameKey appends the key of frame record seq of local LSN lsn:
// 0x05 | vid BE | lsn BE | seq BE u32.
func appendFrameKey(dst []byte, vid, lsn uint64, seq uint32) []byte {
	dst = append(dst, kindFrame)
	dst = binary.BigEndian.AppendUint64(dst, vid)
	dst = binary.BigEndian.AppendUint64(dst, lsn)
	return binary.BigEndian.AppendUint32(dst, seq)
}

func decodeFrameKey(k []byte, vid uint64) (lsn uint64, seq uint32, ok bool) {
	if len(k) != frameKeyLen || k[0] != kindFrame || binary.BigEndian.Uint64(k[1:9]) != vid {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[9:17]), binary.BigEndian.Uint32(k[17:21]), true
}

// pendingKey returns the key of the pending remote commit of vid: 0x06 | vid.
func pendingKey(vid uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kindPending}, vid)
}

// volumeSpan returns the key range of every key of kind for volume vid.
func volumeSpan(kind byte, vid uint64) (lower, upper []byte) {
	lower = binary.BigEndian.AppendUint64([]byte{kind}, vid)
	upper = binary.BigEndian.AppendUint64([]byte{kind}, vid+1)
	return lower, upper
}

// frameRecord is where the pages of one remote frame are: the segment key
// and the frame reference (with the locations of the pages it lists).
type frameRecord struct {
	Segment string
	Ref     remote.FrameRef
}

func encodeFrameRecord(f frameRecord) []byte {
	b := make([]byte, 0, 64+len(f.Segment)+len(f.Ref.Pages)*8)
	b = append(b, recordV1)
	b = binary.AppendUvarint(b, uint64(len(f.Segment)))
	b = append(b, f.Segment...)
	b = binary.AppendUvarint(b, f.Ref.Offset)
	b = binary.AppendUvarint(b, f.Ref.Length)
	b = binary.AppendUvarint(b, f.Ref.RawLength)
	b = binary.BigEndian.AppendUint32(b, f.Ref.CRC)
	b = binary.AppendUvarint(b, uint64(len(f.Ref.Pages)))
	prev := uint64(0)
	for k, p := range f.Ref.Pages {
		if k == 0 {
			b = binary.AppendUvarint(b, p.Index)
		} else {
			b = binary.AppendUvarint(b, p.Index-prev)
		}
		prev = p.Index
		b = binary.AppendUvarint(b, uint64(p.Offset))
		b = binary.AppendUvarint(b, uint64(p.Length))
	}
	return appendCRC(b)
}

func decodeFrameRecord(b []byte) (frameRecord, error) {
	const what = "frame record"
	body, err := checkCRC(what, b)
	if err != nil {
		return frameRecord{}, err
	}
	r := body[1:]
	var bad bool
	uv := func() uint64 {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			bad = true
			return 0
		}
		r = r[n:]
		return v
	}
	var f frameRecord
	sl := uv()
	if bad || sl > uint64(len(r)) {
		return frameRecord{}, corrupt(what, "bad segment key")
	}
	f.Segment = string(r[:sl])
	r = r[sl:]
	f.Ref.Offset, f.Ref.Length, f.Ref.RawLength = uv(), uv(), uv()
	if bad || len(r) < 4 {
		return frameRecord{}, corrupt(what, "truncated frame reference")
	}
	f.Ref.CRC = binary.BigEndian.Uint32(r)
	r = r[4:]
	n := uv()
	if bad || n == 0 || n > uint64(len(r))/3+1 {
		return frameRecord{}, corrupt(what, "bad page count")
	}
	f.Ref.Pages = make([]remote.PageLoc, 0, n)
	var prev uint64
	for k := uint64(0); k < n; k++ {
		d, off, ln := uv(), uv(), uv()
		if bad || off > math.MaxUint32 || ln > math.MaxUint32 || (k > 0 && (d == 0 || d > math.MaxUint64-prev)) {
			return frameRecord{}, corrupt(what, "bad page location %d", k)
		}
		if k > 0 {
			d += prev
		}
		prev = d
		f.Ref.Pages = append(f.Ref.Pages, remote.PageLoc{Index: d, Offset: uint32(off), Length: uint32(ln)})
	}
	if len(r) != 0 {
		return frameRecord{}, corrupt(what, "%d trailing bytes", len(r))
	}
	return f, nil
}

// encodeRemoteRef returns the page value of an unfetched page of length n
// in frame record seq (of the same LSN as the page version).
func encodeRemoteRef(n uint64, seq uint32) []byte {
	b := []byte{pageRemoteRef}
	b = binary.AppendUvarint(b, n)
	return binary.AppendUvarint(b, uint64(seq))
}

// pageValue decodes a page value: the bytes of a fetched page (version 1),
// or the length and frame record of an unfetched one (version 2, ref true).
func pageValue(v []byte) (data []byte, n uint64, seq uint32, ref bool, err error) {
	const what = "page version"
	if len(v) == 0 {
		return nil, 0, 0, false, corrupt(what, "empty value")
	}
	switch v[0] {
	case recordV1:
		return v[1:], uint64(len(v) - 1), 0, false, nil
	case pageRemoteRef:
		r := v[1:]
		l, k := binary.Uvarint(r)
		if k <= 0 {
			return nil, 0, 0, false, corrupt(what, "bad remote reference")
		}
		s, k2 := binary.Uvarint(r[k:])
		if k2 <= 0 || s > math.MaxUint32 || k+k2 != len(r) {
			return nil, 0, 0, false, corrupt(what, "bad remote reference")
		}
		return nil, l, uint32(s), true, nil
	}
	return nil, 0, 0, false, corrupt(what, "unknown version %d", v[0])
}

// UnfetchedError reports a read of a page whose bytes are still in the
// remote store while the store has no remote to fetch them from.
type UnfetchedError struct {
	Volume string
	Page   uint64
	LSN    uint64 // the local LSN of the page version
}

// Error says what to do.
func (e *UnfetchedError) Error() string {
	return fmt.Sprintf("graft: volume %q page %d (version of LSN %d) is not fetched from the remote yet, and the store has no remote: open it with Options.Remote or call Store.AttachRemote (or run `echostore volume hydrate %s` first)",
		e.Volume, e.Page, e.LSN, e.Volume)
}

// Unwrap returns ErrNoRemote.
func (e *UnfetchedError) Unwrap() error { return ErrNoRemote }

// pageBytes returns the bytes of the page version (i, lsn) whose value is
// val, fetching it if it is a remote reference.
func (v *Volume) pageBytes(ctx context.Context, i, lsn uint64, val []byte) ([]byte, error) {
	data, _, seq, ref, err := pageValue(val)
	if err != nil || !ref {
		return data, err
	}
	return v.fault(ctx, i, lsn, seq)
}

// fault fetches the frame holding page version (i, lsn) with one ranged
// GET, verifies it, caches every page of the frame that is still unfetched
// (rewriting those versions in place with the same bytes: same key, same
// LSN) and returns page i's bytes.
func (v *Volume) fault(ctx context.Context, i, lsn uint64, seq uint32) ([]byte, error) {
	l := v.remoteLog()
	if l == nil {
		return nil, &UnfetchedError{Volume: v.name, Page: i, LSN: lsn}
	}
	v.faultMu.Lock()
	defer v.faultMu.Unlock()
	// Another read may have fetched it meanwhile.
	var pk [pageKeyLen]byte
	cur, closer, err := v.s.db.Get(putPageKey(&pk, v.id, i, lsn))
	if err != nil {
		return nil, fmt.Errorf("graft: volume %q page %d: %w", v.name, i, err)
	}
	data, _, _, ref, err := pageValue(cur)
	data = bytes.Clone(data)
	closer.Close()
	if err != nil || !ref {
		return data, err
	}
	if err := v.checkFaultRemote(ctx); err != nil {
		return nil, err
	}
	pages, err := v.fetchFrame(ctx, l, lsn, seq)
	if err != nil {
		return nil, fmt.Errorf("fetch from the remote: %w", err)
	}
	for _, p := range pages {
		if p.Index == i {
			return p.Data, nil
		}
	}
	return nil, fmt.Errorf("graft: volume %q page %d: %w", v.name, i,
		corrupt("frame record", "LSN %d frame %d does not list the page", lsn, seq))
}

// fetchFrame fetches and caches frame record (lsn, seq).
func (v *Volume) fetchFrame(ctx context.Context, l *remote.Log, lsn uint64, seq uint32) ([]remote.Page, error) {
	fk := appendFrameKey(nil, v.id, lsn, seq)
	fv, closer, err := v.s.db.Get(fk)
	if err != nil {
		return nil, fmt.Errorf("frame record %d: %w", seq, err)
	}
	fv = bytes.Clone(fv)
	closer.Close()
	fr, err := decodeFrameRecord(fv)
	if err != nil {
		return nil, err
	}
	pages, err := l.FetchFrame(ctx, fr.Segment, fr.Ref)
	if err != nil {
		return nil, err
	}
	return pages, v.cacheFrame(fk, fv, lsn, pages)
}

// cacheFrame rewrites the still-unfetched versions (p, lsn) of pages with
// their bytes and deletes the frame record, in one batch. gcMu keeps GC
// from deleting a version between the check and the write (which would
// bring it back). The frame record must still be fv: a reset or restart
// meanwhile (they hold faultMu, so not during this call) may have replaced
// the versions at lsn by others; then nothing is cached.
func (v *Volume) cacheFrame(fk, fv []byte, lsn uint64, pages []remote.Page) error {
	if v.s.opts.ReadOnly {
		return nil // serve the bytes, cache nothing
	}
	v.gcMu.Lock()
	defer v.gcMu.Unlock()
	cur, closer, err := v.s.db.Get(fk)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	same := bytes.Equal(cur, fv)
	closer.Close()
	if !same {
		return nil
	}
	b := v.s.db.NewBatch()
	defer b.Close()
	var pk [pageKeyLen]byte
	for _, p := range pages {
		k := putPageKey(&pk, v.id, p.Index, lsn)
		cur, closer, err := v.s.db.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			continue // GC or a reset removed it
		}
		if err != nil {
			return err
		}
		_, _, _, ref, _ := pageValue(cur)
		closer.Close()
		if !ref {
			continue
		}
		val := make([]byte, 1+len(p.Data))
		val[0] = recordV1
		copy(val[1:], p.Data)
		if err := b.Set(k, val, nil); err != nil {
			return err
		}
	}
	if err := b.Delete(fk, nil); err != nil {
		return err
	}
	// NoSync: the cache is rebuilt by fetching again if a crash loses it.
	return v.s.commit(b, pebble.NoSync)
}

// Unfetched returns how many frames of the volume are not fetched yet.
func (v *Volume) Unfetched(ctx context.Context) (int, error) {
	lo, hi := volumeSpan(kindFrame, v.id)
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, fmt.Errorf("graft: volume %q: %w", v.name, err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, fmt.Errorf("graft: volume %q: %w", v.name, err)
	}
	return n, nil
}

// Hydrate fetches every unfetched page of the volume, one ranged GET per
// frame, and caches it locally. progress, if not nil, is called after each
// frame with the frames done and the total.
func (v *Volume) Hydrate(ctx context.Context, progress func(done, total int)) error {
	if err := v.s.checkWritable(); err != nil {
		return fmt.Errorf("graft: hydrate volume %q: %w", v.name, err)
	}
	l := v.remoteLog()
	total, err := v.Unfetched(ctx)
	if err != nil || total == 0 {
		return err
	}
	if l == nil {
		return fmt.Errorf("graft: hydrate volume %q: %d frames to fetch and the store has no remote (Options.Remote or Store.AttachRemote): %w", v.name, total, ErrNoRemote)
	}
	if err := v.checkFaultRemote(ctx); err != nil {
		return err
	}
	for done := 0; ; {
		lo, hi := volumeSpan(kindFrame, v.id)
		it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("graft: hydrate volume %q: %w", v.name, err)
		}
		var keys [][2]uint64
		for ok := it.First(); ok && len(keys) < 1024; ok = it.Next() {
			lsn, seq, ok := decodeFrameKey(it.Key(), v.id)
			if !ok {
				_ = it.Close()
				return fmt.Errorf("graft: hydrate volume %q: %w", v.name, corrupt("frame key", "%x", it.Key()))
			}
			keys = append(keys, [2]uint64{lsn, uint64(seq)})
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return fmt.Errorf("graft: hydrate volume %q: %w", v.name, err)
		}
		if len(keys) == 0 {
			return nil
		}
		if err := v.hydrateBatch(ctx, l, keys, func() {
			done++
			if progress != nil {
				progress(min(done, total), total)
			}
		}); err != nil {
			return err
		}
	}
}

// hydrateWorkers is how many frames Hydrate fetches at once.
const hydrateWorkers = 8

// hydrateBatch fetches and caches the frames keys (LSN, frame number) with
// hydrateWorkers requests in flight; each frame is cached under faultMu.
func (v *Volume) hydrateBatch(ctx context.Context, l *remote.Log, keys [][2]uint64, step func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan [2]uint64)
	var mu sync.Mutex // guards first, step
	var first error
	var wg sync.WaitGroup
	for w := 0; w < hydrateWorkers; w++ {
		wg.Go(func() {
			for k := range work {
				err := v.hydrateFrame(ctx, l, k[0], uint32(k[1]))
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("graft: hydrate volume %q: LSN %d frame %d: %w", v.name, k[0], k[1], err)
					cancel()
				}
				if err == nil {
					step()
				}
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		work <- k
	}
	close(work)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = fmt.Errorf("graft: hydrate volume %q: %w", v.name, ctx.Err())
	}
	return first
}

// hydrateFrame fetches frame (lsn, seq) without holding faultMu and caches
// it holding it. A frame record gone meanwhile (a read fetched it) is done.
func (v *Volume) hydrateFrame(ctx context.Context, l *remote.Log, lsn uint64, seq uint32) error {
	fk := appendFrameKey(nil, v.id, lsn, seq)
	fv, closer, err := v.s.db.Get(fk)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	fv = bytes.Clone(fv)
	closer.Close()
	fr, err := decodeFrameRecord(fv)
	if err != nil {
		return err
	}
	pages, err := l.FetchFrame(ctx, fr.Segment, fr.Ref)
	if err != nil {
		return err
	}
	v.faultMu.Lock()
	defer v.faultMu.Unlock()
	return v.cacheFrame(fk, fv, lsn, pages)
}
