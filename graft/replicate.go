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

	"github.com/echostore/echostore/graft/remote"
)

// A Volume is both ends of replication: remote.Source for its writer (Push)
// and remote.Sink for a follower (Pull). The volume record carries the sync
// point (remote LSN, its hash, the local LSN it covers); the pending remote
// commit has a key of its own. docs/GRAFT.md specifies the bytes.
var (
	_ remote.Source = (*Volume)(nil)
	_ remote.Sink   = (*Volume)(nil)
)

// remoteHandle is the remote store a Store replicates to.
type remoteHandle struct {
	store remote.Store
	hooks remote.Hooks
	ident identityCache // the remote's identity (identity.go)
}

// AttachRemote sets the remote store that Push, Pull, Hydrate and page
// faults use (replacing Options.Remote). The Store does not close it.
func (s *Store) AttachRemote(rs remote.Store) {
	h := &remoteHandle{store: rs}
	if cur := s.remote.Load(); cur != nil {
		h.hooks = cur.hooks
	} else {
		h.hooks = s.opts.RemoteHooks
	}
	s.remote.Store(h)
}

// Remote returns the attached remote store, or nil.
func (s *Store) Remote() remote.Store {
	if h := s.remote.Load(); h != nil {
		return h.store
	}
	return nil
}

// remoteLog returns the volume's remote log over the attached store, or
// nil without one. The Log is kept while the store stays the same, so a
// writer's steady-state push skips verifying its base.
func (v *Volume) remoteLog() *remote.Log {
	h := v.s.remote.Load()
	if h == nil {
		return nil
	}
	v.logMu.Lock()
	defer v.logMu.Unlock()
	if v.rlog == nil || v.rlogOf != h {
		l, err := remote.NewLogWithHooks(h.store, v.vol, h.hooks)
		if err != nil {
			return nil // unreachable: volume names are valid remote names
		}
		v.rlog, v.rlogOf = l, h
	}
	return v.rlog
}

// SyncPoint implements remote.Source and remote.Sink: the newest remote
// commit pushed or applied, its hash, and the local LSN it covers.
func (v *Volume) SyncPoint(ctx context.Context) (remote.SyncPoint, error) {
	r := v.state.Load()
	return remote.SyncPoint{Remote: r.RemoteLSN, Hash: r.RemoteHash, Local: r.SyncLocal}, ctx.Err()
}

// LocalHead implements remote.Source.
func (v *Volume) LocalHead(ctx context.Context) (uint64, error) { return v.Head(), ctx.Err() }

// Changes implements remote.Source: the pages changed in local LSNs
// (from, to] at their newest version at or below to, ascending, and the
// metadata set there at its newest value. If GC has collected the commit
// records of that range, it returns every page and metadata key present at
// to instead (a superset that yields the same remote state).
func (v *Volume) Changes(ctx context.Context, from, to uint64) ([]remote.Page, map[string][]byte, error) {
	snap, err := v.SnapshotAt(ctx, to)
	if err != nil {
		return nil, nil, err
	}
	defer snap.Close()
	commits, err := v.Commits(ctx, from+1, to)
	if errors.Is(err, ErrSnapshotGone) {
		return v.everything(ctx, snap)
	}
	if err != nil {
		return nil, nil, err
	}
	set := map[uint64]bool{}
	var meta map[string][]byte
	for _, c := range commits {
		for _, p := range c.Pages {
			set[p] = true
		}
		for _, m := range c.Meta {
			if meta == nil {
				meta = map[string][]byte{}
			}
			meta[m.Key] = m.Value
		}
	}
	pages := make([]remote.Page, 0, len(set))
	for _, i := range slices.Sorted(maps.Keys(set)) {
		b, err := snap.Get(ctx, i)
		if errors.Is(err, ErrNotFound) {
			continue // an archive page dropped by to (DropArchiveBelow): not sent
		}
		if err != nil {
			return nil, nil, err
		}
		pages = append(pages, remote.Page{Index: i, Data: b})
	}
	return pages, meta, nil
}

// everything returns every page and metadata key present at snap.
func (v *Volume) everything(ctx context.Context, snap *Snapshot) ([]remote.Page, map[string][]byte, error) {
	var pages []remote.Page
	it := snap.Scan(ctx, 0, ^uint64(0))
	for it.Next() {
		pages = append(pages, remote.Page{Index: it.Index(), Data: bytes.Clone(it.Value())})
	}
	if err := it.Close(); err != nil {
		return nil, nil, err
	}
	keys, err := v.metaKeys(ctx)
	if err != nil {
		return nil, nil, err
	}
	var meta map[string][]byte
	for _, k := range keys {
		val, err := snap.Meta(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if meta == nil {
			meta = map[string][]byte{}
		}
		meta[k] = val
	}
	return pages, meta, nil
}

// metaKeys lists the metadata keys that have any version.
func (v *Volume) metaKeys(ctx context.Context) ([]string, error) {
	lo, hi := volumeSpan(kindMeta, v.id)
	it, err := v.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("graft: volume %q: %w", v.name, err)
	}
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < metaFixedLen || len(k) != metaFixedLen+int(k[9]) {
			_ = it.Close()
			return nil, fmt.Errorf("graft: volume %q: %w", v.name, corrupt("metadata key", "%x", k))
		}
		mk := string(k[10 : 10+int(k[9])])
		if n := len(keys); n == 0 || keys[n-1] != mk {
			keys = append(keys, mk)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("graft: volume %q: %w", v.name, err)
	}
	return keys, nil
}

// Pending implements remote.Source: the recorded pending remote commit, or
// nil.
func (v *Volume) Pending(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if v.noPending.Load() {
		return nil, nil // known absent: no read (a deleted key leaves tombstones to step over)
	}
	val, closer, err := v.s.db.Get(pendingKey(v.id))
	if errors.Is(err, pebble.ErrNotFound) {
		v.noPending.Store(true)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("graft: volume %q: pending remote commit: %w", v.name, err)
	}
	defer closer.Close()
	if len(val) < 2 || val[0] != recordV1 {
		return nil, fmt.Errorf("graft: volume %q: %w", v.name, corrupt("pending remote commit", "%d bytes, version %v", len(val), val[:min(1, len(val))]))
	}
	return bytes.Clone(val[1:]), nil
}

// SetPending implements remote.Source: it records the remote commit about
// to be published, synced, before Publish. In the same batch it lowers
// keep-from to the local LSN the commit starts from, so that GC keeps the
// range it covers readable until SetSyncPoint (a push whose segments remote
// GC removed prepares the same range again).
func (v *Volume) SetPending(ctx context.Context, commit []byte) error {
	if err := v.s.checkWritable(); err != nil {
		return fmt.Errorf("graft: volume %q: pending remote commit: %w", v.name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := remote.DecodeCommit(commit)
	if err != nil {
		return fmt.Errorf("graft: volume %q: pending remote commit: %w", v.name, err)
	}
	val := append([]byte{recordV1}, commit...)
	v.noPending.Store(false)
	v.commitMu.Lock()
	defer v.commitMu.Unlock()
	v.pinMu.Lock()
	defer v.pinMu.Unlock()
	if err := v.checkDropped("sync state of"); err != nil {
		return err
	}
	rec := *v.state.Load()
	b := v.s.db.NewBatch()
	defer b.Close()
	if c.LocalFrom < rec.KeepFrom && c.LocalFrom >= v.floor {
		rec.KeepFrom = c.LocalFrom
		if err := b.Set(v.key, encodeVolumeRecord(rec), nil); err != nil {
			return err
		}
	}
	if err := errors.Join(b.Set(pendingKey(v.id), val, nil), v.s.commit(b, pebble.Sync)); err != nil {
		return fmt.Errorf("graft: volume %q: pending remote commit: %w", v.name, err)
	}
	v.state.Store(&rec)
	return nil
}

// SetSyncPoint implements remote.Source: it records the new sync point,
// moves keep-from to the local LSN it covers (GC never passes unpushed
// history) and clears the pending commit, in one synced batch.
//
// With Store.lazySyncPoint the batch is not fsynced (one fsync fewer per
// push): the pending record is the truth until a later synced write makes
// the sync point durable. Pebble's WAL is ordered and replayed as a
// prefix, so a crash either keeps this batch or loses it together with
// everything written after it; the next synced batch of any volume
// (SetPending of the next push, a Synced commit, Apply, Reset) or
// Store.Close makes it durable. Lost, it leaves the volume as a crash
// between the PUT and this batch does: the old sync point and the synced
// pending commit, whose keep-from still guards the range it covers. Push
// publishes that commit again (the same bytes at its LSN: landed), and
// Pull and Reset first settle it against the remote (settlePending).
func (v *Volume) SetSyncPoint(ctx context.Context, sp remote.SyncPoint) error {
	if err := v.s.checkWritable(); err != nil {
		return fmt.Errorf("graft: volume %q: sync point: %w", v.name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v.commitMu.Lock()
	defer v.commitMu.Unlock()
	v.pinMu.Lock()
	defer v.pinMu.Unlock()
	if err := v.checkDropped("sync state of"); err != nil {
		return err
	}
	rec := *v.state.Load()
	if sp.Local > rec.Head || sp.Local < rec.SyncLocal || sp.Remote < rec.RemoteLSN {
		return fmt.Errorf("graft: volume %q: sync point remote %d local %d does not follow remote %d local %d (head %d): %w",
			v.name, sp.Remote, sp.Local, rec.RemoteLSN, rec.SyncLocal, rec.Head, ErrCorrupt)
	}
	rec.RemoteLSN, rec.RemoteHash, rec.SyncLocal = sp.Remote, sp.Hash, sp.Local
	if sp.Local >= v.floor {
		rec.KeepFrom = sp.Local
	}
	d := pebble.Sync
	if v.s.lazySyncPoint {
		d = pebble.NoSync
	}
	b := v.s.db.NewBatch()
	defer b.Close()
	if err := errors.Join(
		b.Set(v.key, encodeVolumeRecord(rec), nil),
		b.Delete(pendingKey(v.id), nil),
		b.Commit(d),
	); err != nil {
		return fmt.Errorf("graft: volume %q: sync point: %w", v.name, err)
	}
	v.noPending.Store(true)
	v.state.Store(&rec)
	return nil
}

// Apply implements remote.Sink: it records remote commit e as the next
// local LSN — inline pages with their bytes, frame pages as remote
// references fetched on first read, the metadata, the commit record and the
// new sync point — in one synced batch. A volume with local commits that
// were never pushed cannot follow: the error is a *DivergedError.
func (v *Volume) Apply(ctx context.Context, e remote.Entry) error {
	return v.install(ctx, e, false)
}

// Restart implements remote.Sink: it drops the volume's local state and
// installs checkpoint cp in its place as the next local LSN, which becomes
// the GC horizon (reads below it fail with ErrSnapshotGone). It fails if
// snapshots are open.
func (v *Volume) Restart(ctx context.Context, cp remote.Entry) error {
	return v.install(ctx, cp, true)
}

func (v *Volume) install(ctx context.Context, e remote.Entry, restart bool) error {
	if err := v.s.checkWritable(); err != nil {
		return fmt.Errorf("graft: volume %q: apply: %w", v.name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := e.Commit
	if restart {
		v.faultMu.Lock()
		defer v.faultMu.Unlock()
		v.gcMu.Lock()
		defer v.gcMu.Unlock()
	}
	v.commitMu.Lock()
	defer v.commitMu.Unlock()
	if err := v.checkDropped("apply to"); err != nil {
		return err
	}
	st := v.state.Load()
	if st.Head != st.SyncLocal {
		return &DivergedError{Volume: v.name, Head: st.Head, SyncLocal: st.SyncLocal, SyncRemote: st.RemoteLSN, RemoteLSN: c.LSN}
	}
	if !restart && (c.LSN != st.RemoteLSN+1 || c.Prev != st.RemoteHash) {
		return &remote.DivergedError{Volume: v.name, LSN: c.LSN, Want: st.RemoteHash, Got: c.Prev,
			Reason: fmt.Sprintf("the follower is at remote LSN %d", st.RemoteLSN)}
	}
	if !restart && adoptable(c) {
		// A checkpoint built from the log on top of this volume's sync
		// point holds exactly the state the volume has: record it as the
		// sync point and write no page (the volume keeps its own bytes,
		// rather than turning them into remote references).
		rec := *st
		rec.RemoteLSN, rec.RemoteHash = c.LSN, e.Hash
		if err := v.s.set(v.key, encodeVolumeRecord(rec), pebble.Sync); err != nil {
			return fmt.Errorf("graft: volume %q: apply checkpoint at remote LSN %d: %w", v.name, c.LSN, err)
		}
		v.state.Store(&rec)
		return nil
	}
	refs := c.Pages()
	lsn := st.Head + 1
	rec := *st
	b := v.s.db.NewBatch()
	defer b.Close()
	if restart {
		v.pinMu.Lock()
		n := len(v.pins)
		v.pinMu.Unlock()
		if n > 0 {
			return fmt.Errorf("graft: volume %q: restart from a checkpoint: %d snapshots are open; close them first: %w", v.name, n, ErrConflict)
		}
		if err := deleteVolumeData(b, v.id); err != nil {
			return err
		}
		rec.Pages, rec.Bytes, rec.Horizon = 0, 0, lsn
	} else if len(refs) > 0 {
		idx := make([]uint64, len(refs))
		lens := make(map[uint64]int, len(refs))
		for k, r := range refs {
			idx[k] = r.Index
			lens[r.Index] = pageLen(r)
		}
		t := &Txn{v: v, base: st.Head, pages: lens}
		np, delta, err := t.sizeDelta(ctx, idx)
		if err != nil {
			return err
		}
		rec.Pages += np
		rec.Bytes = uint64(int64(rec.Bytes) + delta)
	}
	if restart {
		for _, r := range refs {
			rec.Pages++
			rec.Bytes += uint64(pageLen(r))
		}
	}
	var pk [pageKeyLen]byte
	for _, r := range refs {
		if r.Inline() {
			if err := b.Set(putPageKey(&pk, v.id, r.Index, lsn), append([]byte{recordV1}, r.Data...), nil); err != nil {
				return err
			}
		}
	}
	seq := uint32(0)
	for _, s := range c.Segments {
		for _, f := range s.Frames {
			if err := b.Set(appendFrameKey(nil, v.id, lsn, seq), encodeFrameRecord(frameRecord{Segment: s.Key, Ref: f}), nil); err != nil {
				return err
			}
			for _, loc := range f.Pages {
				if err := b.Set(putPageKey(&pk, v.id, loc.Index, lsn), encodeRemoteRef(uint64(loc.Length), seq), nil); err != nil {
					return err
				}
			}
			seq++
		}
	}
	lc := Commit{LSN: lsn, Time: time.Now()}
	for _, r := range refs {
		lc.Pages = append(lc.Pages, r.Index)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Meta)) {
		lc.Meta = append(lc.Meta, MetaEntry{Key: k, Value: c.Meta[k]})
		if err := b.Set(appendMetaKey(nil, v.id, k, lsn), append([]byte{recordV1}, c.Meta[k]...), nil); err != nil {
			return err
		}
	}
	if len(lc.Pages) > 0 || len(lc.Meta) > 0 {
		if err := b.Set(appendCommitKey(nil, v.id, lsn), encodeCommitRecord(lc), nil); err != nil {
			return err
		}
		rec.Head = lsn
	} else if restart {
		return fmt.Errorf("graft: volume %q: %w", v.name, corrupt("checkpoint", "remote LSN %d holds nothing", c.LSN))
	}
	rec.RemoteLSN, rec.RemoteHash, rec.SyncLocal, rec.KeepFrom = c.LSN, e.Hash, rec.Head, rec.Head
	// Synced, even with a lazy push sync point: a follower has no pending
	// record to fall back on. It also makes a lazy sync point written
	// before it durable (Pebble's WAL is ordered).
	if err := errors.Join(b.Set(v.key, encodeVolumeRecord(rec), nil), v.s.commit(b, pebble.Sync)); err != nil {
		return fmt.Errorf("graft: volume %q: apply remote LSN %d: %w", v.name, c.LSN, err)
	}
	if restart {
		v.pinMu.Lock()
		v.floor = rec.Horizon
		v.pinMu.Unlock()
		v.noPending.Store(true)
	}
	v.state.Store(&rec)
	return nil
}

// adoptable reports whether c is a checkpoint built from the log alone
// (remote.Log.WriteCheckpoint: it covers no local commit), which holds
// exactly the state of the commit before it.
func adoptable(c *remote.Commit) bool {
	return c.Checkpoint && c.LocalFrom == c.LocalTo
}

// adoptCheckpoints records as the sync point each checkpoint built from
// the log that follows it on the remote (`echostore volume checkpoint`
// run beside the writer), so that neither the writer's next push diverges
// on it nor a pull turns the volume's pages into remote references. The
// caller holds pushMu. It returns how many it adopted.
func (v *Volume) adoptCheckpoints(ctx context.Context, l *remote.Log) (int, error) {
	n := 0
	for {
		st := v.state.Load()
		if st.RemoteLSN == 0 {
			return n, nil
		}
		e, err := l.Read(ctx, st.RemoteLSN+1)
		if errors.Is(err, remote.ErrNotFound) || errors.Is(err, remote.ErrTrimmed) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read remote LSN %d: %w", st.RemoteLSN+1, err)
		}
		if !adoptable(e.Commit) || e.Commit.Prev != remote.Hash(st.RemoteHash) {
			return n, nil
		}
		if err := v.SetSyncPoint(ctx, remote.SyncPoint{Remote: e.LSN(), Hash: e.Hash, Local: st.SyncLocal}); err != nil {
			return n, err
		}
		v.s.log.Info("graft: checkpoint adopted as the sync point; the volume keeps its pages", "volume", v.name, "remote_lsn", e.LSN())
		n++
	}
}

func pageLen(r remote.PageRef) int {
	if r.Inline() {
		return len(r.Data)
	}
	return int(r.Loc.Length)
}

// deleteVolumeData stages the deletion of every page and metadata version,
// commit record, frame record and the pending commit of volume vid.
func deleteVolumeData(b *pebble.Batch, vid uint64) error {
	for _, k := range []byte{kindPage, kindCommit, kindMeta, kindFrame} {
		lo, hi := volumeSpan(k, vid)
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
	}
	return b.Delete(pendingKey(vid), nil)
}
