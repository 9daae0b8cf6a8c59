package echostore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Append appends records to the live stream, in order, as one batch, and
// returns their ids. A record may hold any bytes and repeated names, as
// Redis stores them (what a read yields appends back byte for byte); it
// must have a field and be within mq's limits (mq.Limits.CheckSize).
func (n *Node) Append(ctx context.Context, ref names.StreamRef, records [][]Field) (AppendResult, error) {
	live, err := n.live()
	if err != nil {
		return AppendResult{}, err
	}
	if ref.IsZero() {
		return AppendResult{}, fmt.Errorf("append: no stream: %w", names.ErrInvalid)
	}
	ids, err := live.AppendBytes(ctx, ref, records)
	if err != nil {
		return AppendResult{}, err
	}
	return AppendResult{IDs: mq.FormatIDs(ids, api.StreamIDForm(ref))}, nil
}

// Read yields the records of the stream in opts' range. The merge-read
// (ReadMerged) serves the archive up to the watermark and the live stream
// above it as one ordered sequence, each id once, while cycles run beside
// it; if the seam cache says the stream is archived further than this data
// dir's volume holds (or the data dir has none), the volume is pulled from
// the remote once first, and without it there the read fails wrapping
// archive.ErrNoVolume (it never serves the live tail alone). ReadLiveOnly
// reads the live stream; ReadArchiveOnly reads the data dir's volume
// alone, without Redis, failing wrapping graft.ErrVolumeNotFound if there
// is none. Every entry is a record, whatever its id or bytes; a reply that
// is not an entry yields a *mq.EntryError and the read goes on; any other
// error ends it.
func (n *Node) Read(ctx context.Context, ref names.StreamRef, opts ReadOptions) iter.Seq2[Record, error] {
	fail := func(err error) iter.Seq2[Record, error] {
		return func(yield func(Record, error) bool) { yield(Record{}, err) }
	}
	if ref.IsZero() {
		return fail(fmt.Errorf("read: no stream: %w", names.ErrInvalid))
	}
	to := opts.To
	if to.IsZero() {
		to = xid.Max
	}
	rg := archive.Range{From: opts.From, To: to, Limit: opts.Limit, Reverse: opts.Reverse}
	if !opts.AsOf.IsZero() {
		switch {
		case opts.Side == ReadLiveOnly:
			return fail(fmt.Errorf("read as of %s: an as-of read reads the archive; the live stream keeps no past: %w", opts.AsOf, ErrInvalid))
		case opts.AsOf.LSN != 0 && !opts.AsOf.Time.IsZero():
			return fail(fmt.Errorf("read as of: give an LSN or a time, not both: %w", ErrInvalid))
		}
		if err := n.needData("read as of"); err != nil {
			return fail(err)
		}
		return n.readAsOf(ctx, ref, rg, opts.AsOf)
	}
	switch opts.Side {
	case ReadLiveOnly:
		live, err := n.live()
		if err != nil {
			return fail(err)
		}
		return live.Read(ctx, ref, rg.From, rg.To, rg.Limit, rg.Reverse)
	case ReadMerged, ReadArchiveOnly:
		if err := n.needData("read (ReadLiveOnly reads the live stream alone)"); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("read: side %d: %w", opts.Side, ErrInvalid))
	}
	vol, err := n.archiveVolume(ctx, ref)
	if err != nil {
		return fail(err)
	}
	src := archive.Source{Ref: ref, Volume: vol, Store: n.store}
	if opts.Side == ReadArchiveOnly {
		if vol == nil {
			return fail(fmt.Errorf("no archive of %s in this data dir (volume %s): %w", ref, ref.Volume(), graft.ErrVolumeNotFound))
		}
	} else {
		if src.Live, err = n.live(); err != nil {
			return fail(fmt.Errorf("%w (ReadArchiveOnly reads the archive without Redis)", err))
		}
		src.Pull = func(ctx context.Context, name string) (*graft.Volume, error) { return n.pullArchive(ctx, ref) }
	}
	return archive.MergeRead(ctx, src, rg)
}

// watermark renders W as the stream's ids print (FormatID), or nil before
// the first fold.
func watermark(ref names.StreamRef, st archive.State) *string {
	if st.Empty() {
		return nil
	}
	w := FormatID(ref, st.W)
	return &w
}

// FormatID renders id the way the ids of ref print everywhere (appends,
// reads, watermarks): "EVT_…" for a stream of a queue, whose ids echostore
// minted, and the Redis id "<ms>-<seq>" (e.g. 1733052000000-0) for a
// stream at a key, whose ids are the application's (api.StreamIDForm
// chooses).
func FormatID(ref names.StreamRef, id xid.ID) string {
	return mq.FormatID(id, api.StreamIDForm(ref))
}

// AppendRecordJSON appends rec as one JSON object
// {"id":…,"fields":{…}}, its id as FormatID renders it for ref (for a
// stream of a queue exactly mq.AppendJSON).
func AppendRecordJSON(dst []byte, ref names.StreamRef, rec Record) []byte {
	return mq.AppendJSONAs(dst, rec, api.StreamIDForm(ref))
}

// Cycle runs one fold-then-trim cycle of the stream now: the records
// outside opts.Window are folded into the archive volume archive.Q.S, then
// trimmed from the live stream (never past a consumer group's pending or
// undelivered entries; with TrimAfterRemote only what a push covers), and
// the stream is registered as archived. With opts.Retain the archived
// records beyond the horizon are dropped after the folds. A failed cycle
// trims nothing unfolded; its result says what it did before the error.
// A cycle of a stream whose key does not exist and that was never archived
// does nothing (registers nothing) and fails wrapping archive.ErrNoStream.
func (n *Node) Cycle(ctx context.Context, ref names.StreamRef, opts CycleOptions) (CycleResult, error) {
	if opts.Window.Keep < 0 || opts.Window.MaxAge < 0 || opts.Window.Keep == 0 && opts.Window.MaxAge == 0 {
		return CycleResult{}, fmt.Errorf("cycle %s: give the window's Keep (the records to leave live) and/or MaxAge, neither negative: %w", ref, ErrInvalid)
	}
	if err := opts.Retain.Validate(); err != nil {
		return CycleResult{}, fmt.Errorf("cycle %s: retention: %w: %w", ref, err, ErrInvalid)
	}
	if err := opts.Window.Validate(); err != nil {
		return CycleResult{}, fmt.Errorf("cycle %s: window: %w: %w", ref, err, ErrInvalid)
	}
	a, err := n.archiver(opts.TrimAfter, opts.Retain)
	if err != nil {
		return CycleResult{}, err
	}
	if n.takeFault(ref) { // ArmFault: this cycle folds, then fails before its trim
		if a, err = n.faultyArchiver(); err != nil {
			return CycleResult{}, err
		}
	}
	return n.cycleWith(ctx, a, ref, opts.Window)
}

// cycleWith runs one cycle of the stream with the archiver a and returns
// its result as Cycle does.
func (n *Node) cycleWith(ctx context.Context, a *archive.Archiver, ref names.StreamRef, w Window) (CycleResult, error) {
	if ref.IsZero() {
		return CycleResult{}, fmt.Errorf("cycle: no stream: %w", names.ErrInvalid)
	}
	res, err := a.Cycle(ctx, ref, w)
	if err == nil && res.Missing {
		err = archive.NoStreamError(ref)
	}
	out := CycleResult{Folded: res.Folded, Trimmed: res.Trimmed, Watermark: watermark(ref, res.State), Dropped: res.Dropped,
		StalledGroups: res.Stalled, State: res.State, TooLarge: res.TooLarge}
	if t := res.AppTrimmed; t.Detected() {
		out.AppTrimmed = &t
	}
	return out, err
}

// Status returns where the seam of the stream is, read from its archive
// volume (the truth) and the live stream. When the seam cache says the
// stream is archived further than this data dir's volume holds, or the
// data dir has no volume of an archived stream, Status pulls the volume
// from the remote first, as a merge-read does, so that it never reports a
// stale watermark; a remote without it fails wrapping archive.ErrNoVolume.
func (n *Node) Status(ctx context.Context, ref names.StreamRef) (ArchiveStatus, error) {
	if err := n.needData("status"); err != nil {
		return ArchiveStatus{}, err
	}
	live, err := n.live()
	if err != nil {
		return ArchiveStatus{}, err
	}
	if ref.IsZero() {
		return ArchiveStatus{}, fmt.Errorf("status: no stream: %w", names.ErrInvalid)
	}
	vol, err := n.archiveVolume(ctx, ref)
	if err != nil {
		return ArchiveStatus{}, err
	}
	var state archive.State
	if vol != nil {
		if state, err = archive.StreamFrontier(ctx, vol, ref); err != nil {
			return ArchiveStatus{}, err
		}
	}
	seam, archived, err := archive.GetArchived(ctx, live, ref)
	if err != nil {
		return ArchiveStatus{}, err
	}
	if archived && (vol == nil || !state.Covers(seam.W)) {
		if vol, err = n.pullArchive(ctx, ref); err != nil {
			return ArchiveStatus{}, fmt.Errorf("%s is archived up to %s but %s is not in this data dir: %w",
				ref, FormatID(ref, seam.W), ref.Volume(), err)
		}
		if state, err = archive.StreamFrontier(ctx, vol, ref); err != nil {
			return ArchiveStatus{}, err
		}
	}
	length, err := live.Len(ctx, ref)
	if err != nil {
		return ArchiveStatus{}, err
	}
	out := ArchiveStatus{Watermark: watermark(ref, state), Archived: state.Pages, Live: length, Volume: ref.Volume().String(), LSN: state.LSN}
	if state.Low != 0 { // archive retention dropped the oldest pages
		low, kept := state.Low, state.Retained()
		out.Low, out.Retained = &low, &kept
	}
	if at, groups, err := archive.StalledGroups(ctx, live, ref); errors.Is(err, archive.ErrBadStalled) {
		// The verdict is a cache the next cycle rewrites: a malformed one
		// (written by hand) must not hide the watermark and counts.
		n.log.Warn("archive status: the seam cache's stalled-groups verdict does not decode; the next cycle rewrites it",
			"stream", ref.String(), "err", err)
	} else if err != nil {
		return ArchiveStatus{}, err
	} else if len(groups) > 0 {
		out.StalledGroups, out.StalledAt = groups, &at
	}
	t, err := archive.AppTrimStatus(ctx, live, ref, state)
	if err != nil {
		return ArchiveStatus{}, err
	}
	if t.Detected() {
		out.AppTrimmed = &t
	}
	return out, nil
}

// Delete deletes the archived stream: its archive volume in the data dir
// and its log in the remote, then, under the stream's archive lease (a
// running cycle is waited for), the live stream, its seam cache, its entry
// in the queue's archived set and the lease. Copies of the volume in other
// nodes' data dirs are not deleted. A declared stream is no longer kept
// bounded (Undeclare): its key is gone.
func (n *Node) Delete(ctx context.Context, ref names.StreamRef) (DeleteResult, error) {
	if ref.IsZero() {
		return DeleteResult{}, fmt.Errorf("delete: no stream: %w", names.ErrInvalid)
	}
	a, err := n.archiver(archive.TrimAfterLocal, archive.Retention{})
	if err != nil {
		return DeleteResult{}, err
	}
	// No beat cycles the stream after this: one in flight is waited for,
	// and the next ones do not list it (a cycle would make the volume
	// again). A failed delete declares it again as it was.
	n.sched.beat.Lock()
	defer n.sched.beat.Unlock()
	p, declared := n.Undeclare(ref)
	res, err := a.Delete(ctx, ref)
	if err != nil {
		if declared { // as it was, unless it was declared again meanwhile
			if _, derr := n.declare(ref, p, true); derr != nil {
				n.log.Error("echostore: stream not declared again after a failed delete", ref.LogAttr(), "err", derr)
			}
		}
		return DeleteResult{}, err
	}
	// Its key leaves the change feed (no append adds it again: it is no
	// longer registered as archived).
	if ferr := n.mq.TakeFromFeed(ctx, mq.DirtyOf(ref), mq.StreamKey(ref)); ferr != nil {
		n.log.Warn("echostore: a deleted stream left in the change feed", ref.LogAttr(), "err", ferr)
	}
	return DeleteResult{Deleted: true, Volume: res.Volume, VolumeDropped: res.VolumeDropped, LiveEntries: res.LiveEntries,
		RemoteKept: !res.RemoteDeleted, RemoteObjects: res.RemoteObjects}, nil
}
