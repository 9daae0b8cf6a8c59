package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Txn stages the pages and metadata of one commit. It is not safe for
// concurrent use. Every Txn must end in Commit or Discard.
//
// The conflict rule: a transaction begun at base LSN B commits only if the
// volume's head is still B when Commit runs; it then becomes LSN B+1. If any
// commit landed on the volume since Begin, whatever pages it touched, Commit
// fails with a *ConflictError (wrapping ErrConflict) and writes nothing. The
// rule is whole-volume, not per page: a Txn is a read-modify-write of the
// volume as of B.
type Txn struct {
	v     *Volume
	base  uint64
	batch *pebble.Batch
	pages map[uint64]int    // staged page → its length
	meta  map[string][]byte // staged metadata
	done  bool
	key   [pageKeyLen]byte

	archive    bool   // an archive page is staged
	minArchive uint64 // the lowest staged archive page index
	dropping   bool   // DropArchiveBelow was called
	dropLow    uint64 // the floor it raises to
}

func newTxn(v *Volume, base uint64) *Txn {
	return &Txn{v: v, base: base, pages: make(map[uint64]int)}
}

// Base returns the LSN the transaction began at; it commits as Base()+1.
func (t *Txn) Base() uint64 { return t.base }

// Put stages data as business page i. i must be below ArchiveBase (else
// *PageRangeError) and data at most Options.MaxPageSize bytes (else
// *PageTooLargeError); a rejected Put stages nothing. Put copies data. A
// second Put of the same page in one Txn replaces the first.
func (t *Txn) Put(i uint64, data []byte) error {
	if i >= ArchiveBase {
		return &PageRangeError{Index: i}
	}
	return t.put(i, data)
}

// PutArchive stages data as archive page ArchiveBase+n, the only way to write
// at or above ArchiveBase. n above MaxArchiveOffset would wrap below
// ArchiveBase and is rejected with *PageRangeError. Otherwise as Put.
func (t *Txn) PutArchive(n uint64, data []byte) error {
	if n > MaxArchiveOffset {
		return &PageRangeError{Archive: true, Index: n}
	}
	return t.put(ArchiveBase+n, data)
}

func (t *Txn) put(i uint64, data []byte) error {
	if t.done {
		return ErrTxnDone
	}
	if len(data) > t.v.s.opts.MaxPageSize {
		return &PageTooLargeError{Index: i, Size: len(data), Max: t.v.s.opts.MaxPageSize}
	}
	if err := t.reserve(pageKeyLen + 1 + len(data)); err != nil {
		return err
	}
	op := t.batch.SetDeferred(pageKeyLen, 1+len(data))
	putPageKey((*[pageKeyLen]byte)(op.Key), t.v.id, i, t.base+1)
	op.Value[0] = recordV1
	copy(op.Value[1:], data)
	if err := op.Finish(); err != nil {
		return fmt.Errorf("graft: stage page %d: %w", i, err)
	}
	t.pages[i] = len(data)
	if i >= ArchiveBase && (!t.archive || i < t.minArchive) {
		t.archive, t.minArchive = true, i
	}
	return nil
}

// SetMeta stages metadata key → value, committed under the same LSN as the
// pages. The key is at most MaxMetaKeyLen bytes and the value at most
// Options.MaxMetaValueSize (else *MetaTooLargeError, nothing staged).
// SetMeta copies value. MetaArchiveLow is reserved (ErrReservedMeta): it
// is set by DropArchiveBelow.
func (t *Txn) SetMeta(key string, value []byte) error {
	if key == MetaArchiveLow {
		return fmt.Errorf("graft: metadata %q is set by DropArchiveBelow: %w", key, ErrReservedMeta)
	}
	return t.setMeta(key, value)
}

func (t *Txn) setMeta(key string, value []byte) error {
	if t.done {
		return ErrTxnDone
	}
	if len(key) > MaxMetaKeyLen || len(value) > t.v.s.opts.MaxMetaValueSize {
		return &MetaTooLargeError{KeyLen: len(key), ValueLen: len(value), MaxKey: MaxMetaKeyLen, MaxValue: t.v.s.opts.MaxMetaValueSize}
	}
	n := metaFixedLen + len(key)
	if err := t.reserve(2*(n+len(value)) + 1); err != nil {
		return err
	}
	op := t.batch.SetDeferred(n, 1+len(value))
	appendMetaKey(op.Key[:0], t.v.id, key, t.base+1)
	op.Value[0] = recordV1
	copy(op.Value[1:], value)
	if err := op.Finish(); err != nil {
		return fmt.Errorf("graft: stage metadata %q: %w", key, err)
	}
	if t.meta == nil {
		t.meta = make(map[string][]byte)
	}
	t.meta[key] = bytes.Clone(op.Value[1:])
	return nil
}

// reserve creates the batch on first use and enforces MaxTxnBytes.
func (t *Txn) reserve(n int) error {
	if err := t.v.s.checkWritable(); err != nil {
		return err
	}
	if t.batch == nil {
		t.batch = t.v.s.db.NewBatch()
	}
	if int64(t.batch.Len())+int64(n) > t.v.s.opts.MaxTxnBytes {
		return fmt.Errorf("graft: transaction on volume %q would stage %d bytes, at most %d (Options.MaxTxnBytes): %w",
			t.v.name, int64(t.batch.Len())+int64(n), t.v.s.opts.MaxTxnBytes, ErrTxnTooLarge)
	}
	return nil
}

// Discard drops the transaction. It is a no-op after Commit.
func (t *Txn) Discard() {
	if t.done {
		return
	}
	t.done = true
	if t.batch != nil {
		_ = t.batch.Close()
		t.batch = nil
	}
	t.pages, t.meta = nil, nil
}

// Commit makes the staged pages and metadata LSN Base()+1 of the volume, in
// one Pebble batch with the commit record and the updated volume record:
// all of it lands or none of it does. It returns the new LSN.
//
// A transaction with neither pages nor metadata fails with ErrEmptyCommit
// (an LSN always changes something). If the head moved since Begin it fails
// with *ConflictError (see Txn). With Synced, the commit is on disk when
// Commit returns; with Unsynced it may be lost by a crash, but only whole
// and only with the commits after it. The Txn is finished either way.
func (t *Txn) Commit(ctx context.Context, d Durability) (uint64, error) {
	if t.done {
		return 0, ErrTxnDone
	}
	defer t.Discard()
	v := t.v
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("graft: commit to volume %q: %w", v.name, err)
	}
	if err := v.s.checkWritable(); err != nil {
		return 0, fmt.Errorf("graft: commit to volume %q: %w", v.name, err)
	}
	var staged int64
	if t.batch != nil {
		staged = int64(t.batch.Len())
	}
	if err := v.s.CheckRoomFor(staged); err != nil {
		return 0, fmt.Errorf("graft: commit to volume %q (%d bytes staged): %w", v.name, staged, err)
	}
	if len(t.pages) == 0 && len(t.meta) == 0 {
		return 0, fmt.Errorf("graft: commit to volume %q: %w", v.name, ErrEmptyCommit)
	}
	if v.state.Load().Head != t.base { // fail fast; rechecked under the lock
		return 0, t.conflict()
	}
	// The floor at base, read without the lock like the sizes below: if the
	// head moved the commit fails anyway.
	if err := t.checkArchiveFloor(ctx); err != nil {
		return 0, err
	}
	lsn := t.base + 1
	if lsn == 0 {
		return 0, fmt.Errorf("graft: volume %q has used every LSN", v.name)
	}
	pages := slices.Sorted(maps.Keys(t.pages))
	// The sizes of the versions these pages replace, read at base. Reading
	// without the lock is exact: if the commit goes ahead the head is still
	// base, and nothing at or below base ever changes.
	newPages, deltaBytes, err := t.sizeDelta(ctx, pages)
	if err != nil {
		return 0, err
	}
	c := Commit{LSN: lsn, Time: time.Now(), Pages: pages}
	if len(t.meta) > 0 {
		c.Meta = make([]MetaEntry, 0, len(t.meta))
		for _, k := range slices.Sorted(maps.Keys(t.meta)) {
			c.Meta = append(c.Meta, MetaEntry{Key: k, Value: t.meta[k]})
		}
	}
	var ck [commitKeyLen]byte
	if err := t.batch.Set(appendCommitKey(ck[:0], v.id, lsn), encodeCommitRecord(c), nil); err != nil {
		return 0, fmt.Errorf("graft: commit to volume %q: %w", v.name, err)
	}
	opt := pebble.Sync
	if d == Unsynced {
		opt = pebble.NoSync
	}

	v.commitMu.Lock()
	unlocked := false
	defer func() {
		if !unlocked {
			v.commitMu.Unlock()
		}
	}()
	if err := v.checkDropped("commit to"); err != nil {
		return 0, err
	}
	cur := v.state.Load()
	if cur.Head != t.base {
		return 0, t.conflict()
	}
	rec := *cur
	rec.Head = lsn
	rec.Pages += newPages
	rec.Bytes = uint64(int64(rec.Bytes) + deltaBytes)
	if err := errors.Join(
		t.batch.Set(v.key, encodeVolumeRecord(rec), nil),
		v.s.commit(t.batch, opt),
	); err != nil {
		return 0, fmt.Errorf("graft: commit LSN %d to volume %q: %w", lsn, v.name, err)
	}
	v.state.Store(&rec)
	v.commitMu.Unlock()
	unlocked = true
	v.notify(ctx, EventCommit, lsn)
	return lsn, nil
}

func (t *Txn) conflict() error {
	return &ConflictError{Volume: t.v.name, Base: t.base, Head: t.v.state.Load().Head}
}

// sizeDelta returns how many of pages are new at base+1 and by how many bytes
// the volume's total changes.
func (t *Txn) sizeDelta(ctx context.Context, pages []uint64) (newPages uint64, delta int64, err error) {
	for _, p := range pages {
		delta += int64(t.pages[p])
	}
	if t.base == 0 || len(pages) == 0 {
		return uint64(len(pages)), delta, nil
	}
	v := t.v
	lower, upper := pageBounds(v.id, pages[0], pages[len(pages)-1])
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, 0, fmt.Errorf("graft: commit to volume %q: %w", v.name, err)
	}
	for _, p := range pages {
		if !it.SeekGE(putPageKey(&t.key, v.id, p, t.base)) {
			newPages++
			continue
		}
		if q, _, ok := decodePageKey(it.Key(), v.id); !ok || q != p {
			newPages++
			continue
		}
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return 0, 0, fmt.Errorf("graft: commit to volume %q: %w", v.name, err)
		}
		_, n, _, _, err := pageValue(val)
		if err != nil {
			_ = it.Close()
			return 0, 0, fmt.Errorf("graft: volume %q page %d: %w", v.name, p, err)
		}
		delta -= int64(n)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, 0, fmt.Errorf("graft: commit to volume %q: %w", v.name, err)
	}
	return newPages, delta, nil
}
