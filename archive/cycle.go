package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Window declares what a cycle leaves live. Both limits apply: a record
// stays live while it is among the newest Keep and younger than MaxAge
// (zero: that limit does not apply). It is the retention window of package
// mq, and the cut is computed by mq, the same way for trim-only retention
// and for the archive.
type Window = mq.Window

// TrimAfter is api.TrimAfter: what a cycle waits for before it trims
// what it folded.
type TrimAfter = api.TrimAfter

// The TrimAfter settings (api's).
const (
	// TrimAfterLocal trims once the fold is durable in the local volume.
	TrimAfterLocal = api.TrimAfterLocal
	// TrimAfterRemote trims only what a push to the remote covers: with
	// more than one node this is what keeps failover lossless.
	TrimAfterRemote = api.TrimAfterRemote
)

// ParseTrimAfter parses "local" or "remote".
func ParseTrimAfter(s string) (TrimAfter, error) {
	switch s {
	case "local":
		return TrimAfterLocal, nil
	case "remote":
		return TrimAfterRemote, nil
	}
	return 0, fmt.Errorf("trim-after %q: want local or remote", s)
}

// Pusher is the replication layer as the archive sees it. graft.Replication
// is the one of graft's own replication (Volume.Push and the volume's sync
// point); its store needs a remote attached (graft.Options.Remote or
// Store.AttachRemote), without one Push fails with graft.ErrNoRemote and
// the cycle does not trim.
type Pusher interface {
	// Push pushes vol's local commits to the remote and returns the new
	// sync point.
	Push(ctx context.Context, vol *graft.Volume) (remote.SyncPoint, error)
	// Pushed returns the newest local LSN of vol that the remote holds
	// (0: none).
	Pushed(ctx context.Context, vol *graft.Volume) (localLSN uint64, err error)
}

// Errors of cycles.
var (
	// ErrNoRemote: TrimAfterRemote without a Pusher (no remote configured).
	ErrNoRemote = errors.New("archive: trim-after remote needs a remote, and none is configured")
	// ErrLeaseHeld: another driver held the stream's lease for longer than
	// Options.LeaseWait.
	ErrLeaseHeld = errors.New("archive: another driver holds the stream's lease")
	// ErrNoStream: a stream whose key does not exist in Redis and that was
	// never archived (the key or the names are likely wrong). A cycle of
	// one does nothing and says so (CycleResult.Missing); callers that run
	// a cycle on a user's request return this error.
	ErrNoStream = errors.New("no such stream in Redis, and it was never archived")
)

// Defaults of Options.
const (
	DefaultLeaseTTL = 5 * time.Second
	DefaultChunk    = 1000
)

// Options configure an Archiver.
type Options struct {
	// Store is the data dir's graft store (<data>/graft), opened writable.
	Store *graft.Store
	// Live is the live tier (a *mq.Client).
	Live Live
	// Logger receives the cycles' logs (default slog.Default()).
	Logger *slog.Logger
	// LeaseTTL is the lease's time to live; a cycle renews it before every
	// chunk, so a dead driver's lease is free after at most this long
	// (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	// LeaseWait bounds how long a cycle waits for a lease held by another
	// driver to expire (default 2×LeaseTTL + 1s).
	LeaseWait time.Duration
	// Chunk is the most records folded in one commit (default DefaultChunk).
	Chunk int
	// TrimAfter: local (default) or remote.
	TrimAfter TrimAfter
	// Pusher is the remote; required by TrimAfterRemote.
	Pusher Pusher
	// Clock gives the time MaxAge and Retain.MaxAge count from (default
	// time.Now).
	Clock func() time.Time
	// Retain is the archive's retention horizon, applied by every cycle
	// after its folds (the zero value keeps every archived record).
	Retain Retention
}

// Archiver folds and trims archived streams and reads them back.
type Archiver struct {
	opts Options
	log  *slog.Logger

	// Test hooks, nil outside tests: after each fold's commit, and
	// before the trim.
	afterFold, beforeTrim func()
	afterDrop             func(token int64) // Delete, between the drop and Redis
	// maxRecord, when positive, stands for MaxRecordBytes in the cycle's
	// folds: tests meet an entry too large to archive without a Redis
	// configured to hold one above 1 GiB.
	maxRecord int

	// headMu guards checked: per stream, the lease token of this
	// archiver's last cycle that found the remote head at or below the
	// volume's remote LSN (openVolume).
	headMu  sync.Mutex
	checked map[names.StreamRef]int64
}

// New returns an Archiver.
func New(opts Options) (*Archiver, error) {
	if opts.Store == nil || !present(opts.Live) {
		return nil, errors.New("archive: Options.Store and Options.Live are required")
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.LeaseWait <= 0 {
		opts.LeaseWait = 2*opts.LeaseTTL + time.Second
	}
	if opts.Chunk <= 0 {
		opts.Chunk = DefaultChunk
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := opts.Retain.Validate(); err != nil {
		return nil, err
	}
	return &Archiver{opts: opts, log: opts.Logger}, nil
}

// checkLocalOwner refuses, with an *OwnerError, the archive volume of o
// (o.Volume()) in the store when it records an owner other than o. No
// volume passes.
func (a *Archiver) checkLocalOwner(ctx context.Context, o names.StreamRef) error {
	vol, err := a.opts.Store.Volume(ctx, o.Volume())
	if errors.Is(err, graft.ErrVolumeNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("archive %s: %w", o, err)
	}
	return CheckOwner(ctx, vol, o)
}

// CycleResult says what one cycle did.
type CycleResult struct {
	Folded   int64  // records folded by this cycle
	Dropped  int64  // archived records dropped by retention in this cycle
	Trimmed  int64  // live entries trimmed by this cycle
	State    State  // the archive after the cycle
	MinXID   string // what the stream was trimmed to ("" if no trim)
	CappedBy string // the consumer group that held the trim back, if any
	Token    int64  // the lease's fencing token
	// Stalled lists the consumer groups that held the trim back past the
	// window's GroupLimits (groups.go), Passed under StalledArchive.
	Stalled []StalledGroup
	// Missing: the stream's key does not exist and the stream was never
	// archived, so the cycle did nothing at all (registered nothing, took
	// no lease). A declared stream nobody has written yet is one; so is a
	// mistyped key (NoStreamError).
	Missing bool
	// AppTrimmed reports entries above the watermark that another client
	// removed (MAXLEN, XTRIM, XDEL) before this cycle could fold them
	// (apptrim.go); the zero AppTrim when none.
	AppTrimmed AppTrim
	// TooLarge names the entry this cycle could not archive because it is
	// larger than MaxRecordBytes (only a Redis configured beyond its
	// default limits holds one). The watermark stopped below it and the
	// trim held there: the entry and every one after it stay live, and
	// each cycle reports it again until it is removed from the stream (or
	// the stream deleted). Folded does not count it.
	TooLarge []*TooLargeError
}

// Cycle runs one fold-then-trim cycle on stream s of queue q: it takes the
// stream's lease (waiting, bounded, for a dead driver's lease to expire),
// registers the stream as archived (so trim-only retention refuses it),
// brings the volume up to the remote's head if a remote is attached and
// ahead (a takeover: see openVolume), folds the records outside w that are above W, in chunks of at most
// Options.Chunk records, each one commit, and then trims the stream by MINID
// at W's successor (never past the window's cut, never past a consumer
// group's oldest pending or undelivered entry) in one script that checks the
// lease's fencing token. After each fold the stream's last id is raised to
// W and the seam cache rewritten. After the folds, Options.Retain drops the
// archived records below the retention horizon (Retain), before a push;
// with retention set, a cycle that succeeded ends with the volume's GC,
// which reclaims dropped pages no snapshot or unpushed LSN needs.
//
// The volume records its owner, q/s (MetaOwner), in the commit of its
// first fold. A volume that belongs to another stream (names with '.'
// share volume names) is refused with an *OwnerError (ErrVolumeOwner)
// before the lease is taken, the stream registered, anything folded,
// dropped or trimmed.
//
// On any error nothing beyond what was folded is trimmed: the stream
// over-retains. The error is logged and returned.
func (a *Archiver) Cycle(ctx context.Context, ref names.StreamRef, w Window) (res CycleResult, err error) {
	if missing, err := a.missing(ctx, ref); err != nil || missing {
		res.Missing = missing
		return res, err
	}
	defer func() {
		if err != nil {
			// The next cycle reads the remote head whatever its lease: a
			// push that failed as diverged (another process's late push
			// landed first) moved the remote under this archiver's feet.
			a.forgetHead(ref)
			a.log.Error("archive cycle failed; the stream keeps what was not trimmed",
				ref.LogAttr(), "folded", res.Folded, "err", err)
		}
	}()
	vname := ref.Volume().String()
	if w.Keep < 0 || w.MaxAge < 0 {
		return res, fmt.Errorf("archive cycle %s: negative window (keep %d, max age %v)", ref, w.Keep, w.MaxAge)
	}
	if err := w.Validate(); err != nil {
		return res, fmt.Errorf("archive cycle %s: %w", ref, err)
	}
	if a.opts.TrimAfter == TrimAfterRemote && a.opts.Pusher == nil {
		return res, fmt.Errorf("archive cycle %s: %w; pass --trim-after local or configure the remote", ref, ErrNoRemote)
	}
	// A volume of another stream (names with '.' share volume names) is
	// refused before the lease is taken; again once the volume is open
	// (a takeover may have pulled it), and by every fold and drop.
	if err := a.checkLocalOwner(ctx, ref); err != nil {
		return res, err
	}
	live := a.opts.Live
	token, err := a.acquire(ctx, ref)
	if err != nil {
		return res, err
	}
	res.Token = token
	defer func() {
		if _, rerr := releaseLease(context.WithoutCancel(ctx), live, ref, token); rerr != nil {
			a.log.Warn("archive lease not released; it expires by itself", ref.LogAttr(), "err", rerr)
		}
	}()
	seam, ok, err := GetArchived(ctx, live, ref)
	if err != nil {
		return res, err
	}
	vol, err := whileHeld(ctx, live, ref, token, a.opts.LeaseTTL, func() (*graft.Volume, error) {
		return a.openVolume(ctx, ref, seam, ok, token)
	})
	if err != nil {
		return res, err
	}
	if err := CheckOwner(ctx, vol, ref); err != nil {
		return res, err
	}
	if err := RegisterArchived(ctx, live, ref); err != nil {
		return res, err
	}
	defer func() {
		if err == nil {
			a.keepStalled(ctx, ref, w, res.Stalled)
		}
	}()
	if !a.opts.Retain.IsZero() {
		defer func() {
			if err == nil {
				a.reclaim(ctx, ref, vol)
			}
		}()
	}
	st, err := Frontier(ctx, vol)
	if err != nil {
		return res, err
	}
	res.State = st
	if ok && !st.Covers(seam.W) {
		return res, fmt.Errorf("archive cycle %s: %s ends at %s, the seam cache at %s: refusing to fold or trim; pull the volume first: %w",
			ref, vname, formatW(st), formatID(seam.W), ErrVolumeBehind)
	}
	if !st.Empty() {
		// Entries above W removed by another client since the last cycle
		// (apptrim.go): reported, and the cycle goes on.
		info, ierr := live.Info(ctx, ref)
		m, merr := live.HGetAll(ctx, SeamKey(ref))
		if ierr == nil && merr == nil {
			res.AppTrimmed = a.detectAppTrim(ctx, ref, st, info, m)
		}
	}
	defer func() {
		if err == nil {
			a.observeLiveFirst(ctx, ref, res.State)
		}
	}()
	// With TrimAfterRemote the cache follows the pushes (it is rewritten
	// after this cycle's push, only ever upwards): here only the stream's
	// last id is raised to the local W.
	if !st.Empty() && (!ok || seam.W != st.W || seam.LSN != st.LSN) {
		if err := a.publish(ctx, ref, st, a.localCache(st)); err != nil {
			return res, err
		}
	}
	cut, hasCut, err := live.WindowCut(ctx, ref, w, a.opts.Clock())
	if err != nil {
		return res, err
	}
	if !hasCut {
		// Nothing to cut, so no push of this cycle's: a cache left behind
		// pushes made outside a cycle is raised here (a cycle that folds
		// rewrites it after its own push).
		if a.opts.TrimAfter == TrimAfterRemote && ok {
			if err := a.followPushes(ctx, ref, vol, st, seam); err != nil {
				return res, err
			}
		}
		_, err := a.retain(ctx, ref, vol, st, &res)
		return res, err
	}
	for {
		if _, err := takeLease(ctx, live, ref, token, a.opts.LeaseTTL); err != nil {
			return res, err
		}
		from := xid.Min
		if !st.Empty() {
			if !st.W.Less(cut) {
				break
			}
			from, _ = st.W.Next() // st.W < cut ≤ xid.Max: it has one
		}
		last, hasLast := cut.Prev()
		if !hasLast || last.Less(from) {
			break
		}
		slice, full, err := a.slice(ctx, ref, from, last)
		if err != nil {
			return res, err
		}
		if len(slice) == 0 {
			break
		}
		prev := st
		var big []*TooLargeError
		if st, big, err = foldAs(ctx, vol, slice, &ref, a.maxRecord); err != nil {
			return res, err
		}
		folded := len(slice)
		if len(big) > 0 {
			// W stopped below the entry: the trim holds there (bound.W).
			a.tooLarge(ref, big)
			res.TooLarge = append(res.TooLarge, big...)
			folded = slice2index(slice, big[0].ID)
		}
		res.Folded += int64(folded)
		res.State = st
		if a.afterFold != nil {
			a.afterFold()
		}
		if err := a.publish(ctx, ref, st, a.localCache(st)); err != nil {
			return res, err
		}
		if !full || st.Empty() || st.W == prev.W || len(big) > 0 {
			break
		}
	}
	if st, err = a.retain(ctx, ref, vol, st, &res); err != nil {
		return res, err
	}
	bound := st
	if a.opts.TrimAfter == TrimAfterRemote {
		if bound, err = whileHeld(ctx, live, ref, token, a.opts.LeaseTTL, func() (State, error) { return a.pushed(ctx, vol) }); err != nil {
			return res, err
		}
		if !ok || !bound.W.Less(seam.W) {
			if err := a.publish(ctx, ref, st, bound); err != nil {
				return res, err
			}
		}
	}
	if bound.Empty() {
		return res, nil
	}
	minID := cut
	if bound.W.Less(cut) {
		minID, _ = bound.W.Next()
	}
	if _, err := takeLease(ctx, live, ref, token, a.opts.LeaseTTL); err != nil {
		return res, err
	}
	if a.beforeTrim != nil {
		a.beforeTrim()
	}
	if res.Stalled, err = stalledGroups(ctx, live, ref, w, minID.String(), a.opts.Clock()); err != nil {
		return res, err
	}
	tr, err := fencedTrim(ctx, live, ref, token, minID, passing(w.Groups.Stalled, res.Stalled)...)
	if err != nil {
		return res, err
	}
	res.Trimmed, res.MinXID, res.CappedBy = tr.Trimmed, tr.MinXID, tr.CappedBy
	a.log.Debug("archive cycle", ref.LogAttr(), "folded", res.Folded, "trimmed", res.Trimmed,
		"w", formatW(st), "lsn", st.LSN, "capped_by", tr.CappedBy, "stalled", len(res.Stalled))
	return res, nil
}

// missing reports whether ref's key does not exist while the stream is
// not registered as archived. Such a cycle does nothing, before anything
// is written: registering it would make trim-only retention refuse a
// stream nobody archives, and the key or names are likely mistyped. A
// registered stream whose key is gone (all of it deleted) still cycles:
// its archive stays readable and retained.
func (a *Archiver) missing(ctx context.Context, ref names.StreamRef) (bool, error) {
	if err := checkRef(ref); err != nil {
		return false, err
	}
	set, member := mq.ArchivedRegistry(ref)
	n, err := a.opts.Live.Run(ctx, scriptMissing, []string{mq.StreamKey(ref), set}, []string{member}).Int()
	if err != nil {
		return false, fmt.Errorf("archive cycle %s: does the stream exist: %w", ref, err)
	}
	return n == 1, nil
}

// scriptMissing replies 1 when the stream KEYS[1] does not exist and
// ARGV[1] is not a member of its archived registry KEYS[2], else 0: one
// atomic look, so a stream created meanwhile is never taken for missing.
// A key that holds another type than a stream fails with Redis's
// WRONGTYPE (the XLEN), so that a cycle of it is refused
// (mq.ErrWrongType) before it takes a lease or creates a volume.
var scriptMissing = mq.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return 1 end
  return 0
end
redis.call('XLEN', KEYS[1])
return 0
`)

// NoStreamError returns the error of a cycle of ref that found no stream
// (CycleResult.Missing), wrapping ErrNoStream.
func NoStreamError(ref names.StreamRef) error {
	return fmt.Errorf("archive cycle %s: key %s does not exist: %w; nothing was registered, folded or trimmed",
		ref, strconv.Quote(mq.StreamKey(ref)), ErrNoStream)
}

// retain applies Options.Retain to vol, whose state is st, and records
// what it dropped in res.
func (a *Archiver) retain(ctx context.Context, ref names.StreamRef, vol *graft.Volume, st State, res *CycleResult) (State, error) {
	if a.opts.Retain.IsZero() || st.Empty() {
		return st, nil
	}
	if _, err := takeLease(ctx, a.opts.Live, ref, res.Token, a.opts.LeaseTTL); err != nil {
		return st, err
	}
	next, n, err := retainAs(ctx, vol, a.opts.Retain, a.opts.Clock(), &ref)
	if err != nil {
		return st, err
	}
	res.State = next
	if n == 0 {
		return next, nil
	}
	res.Dropped += int64(n)
	a.log.Info("archive retention dropped records", ref.LogAttr(), "dropped", n, "low", next.Low, "lsn", next.LSN)
	return next, a.publish(ctx, ref, next, a.localCache(next))
}

// reclaim runs the volume's GC after a successful cycle with retention, so
// that dropped pages leave the disk once no snapshot and no unpushed LSN
// needs them (graft's horizon rule). A failure is logged, not returned: the
// cycle's work is done, and the next cycle tries again.
func (a *Archiver) reclaim(ctx context.Context, ref names.StreamRef, vol *graft.Volume) {
	st, err := vol.GC(ctx)
	if err != nil {
		a.log.Warn("archive GC failed; dropped pages stay on disk until the next cycle", ref.LogAttr(), "err", err)
		return
	}
	if st.DroppedPages > 0 {
		a.log.Info("archive GC reclaimed dropped pages", ref.LogAttr(), "pages", st.DroppedPages, "horizon", st.Horizon)
	}
}

// sliceBytes bounds the bytes of one slice (one fold's commit): a slice
// ends at the record that reaches it, and a record larger than it is a
// slice of its own, so a commit stages at most twice sliceBytes, or one
// record (at most MaxRecordBytes), below graft's transaction limit.
const sliceBytes = 64 << 20

// maxSlicePage is the most entries one read of a slice asks Redis for.
const maxSlicePage = 512

// slice reads up to one chunk of live records in [from, to]: at most
// Options.Chunk records, ending early at the one that brings the slice to
// sliceBytes, or before one larger than sliceBytes that others precede.
// full reports whether a bound ended it (more may follow). Its first read
// asks for one entry and the next ones for as many as fit in what is left
// of sliceBytes at the largest size seen, so that a read of large entries
// never brings a page of them at once.
func (a *Archiver) slice(ctx context.Context, ref names.StreamRef, from, to xid.ID) (out []mq.Record, full bool, err error) {
	cur, err := a.opts.Live.NewCursor(ref, from, to, false)
	if err != nil {
		return nil, false, fmt.Errorf("archive cycle %s: read the slice to fold: %w", ref, err)
	}
	size, largest, count := 0, 1, 1
	for !cur.Done() && len(out) < a.opts.Chunk {
		p, err := cur.Next(ctx, min(count, a.opts.Chunk-len(out)))
		if err == nil && len(p.Foreign) > 0 {
			err = p.Foreign[0]
		}
		if err != nil {
			return nil, false, fmt.Errorf("archive cycle %s: read the slice to fold: %w", ref, err)
		}
		for _, rec := range p.Records {
			n := recordBodySize(rec)
			if n > sliceBytes && len(out) > 0 {
				return out, true, nil // it is the next slice, alone
			}
			out = append(out, rec)
			largest = max(largest, n)
			if size += n; size >= sliceBytes {
				return out, true, nil
			}
		}
		count = max(1, min(maxSlicePage, (sliceBytes-size)/largest))
	}
	return out, len(out) >= a.opts.Chunk, nil
}

// slice2index returns the index of the record of id in slice (len(slice)
// when none has it).
func slice2index(slice []mq.Record, id xid.ID) int {
	for i, r := range slice {
		if r.ID == id {
			return i
		}
	}
	return len(slice)
}

// tooLarge logs the records a fold did not archive for their size.
func (a *Archiver) tooLarge(ref names.StreamRef, big []*TooLargeError) {
	for _, e := range big {
		a.log.Warn("archive cycle: an entry larger than the archive holds is not archived; the trim holds below it, so it and the entries after it stay live until it is removed",
			ref.LogAttr(), "id", e.XID, "bytes", e.Bytes, "max", e.Max)
	}
}

// publish raises the stream's last id to top's W and rewrites the seam
// cache with cache (unless cache is empty: then the cache is left as is).
//
// The seam cache names the W that every copy of the volume a read or a
// cycle uses must cover, because the stream may be trimmed up to it. With
// TrimAfterLocal that is the local fold's W (the trim follows the fold);
// with TrimAfterRemote it is the W the remote holds (the trim follows the
// push, and only to what it covers), so the cache never names a W that
// only unpushed local commits hold: a reset to the remote after a failed
// push, which drops them, leaves the cache covered and the stream readable
// and trimmable, and a copy behind the cache can always pull what it lacks.
func (a *Archiver) publish(ctx context.Context, ref names.StreamRef, top, cache State) error {
	if _, err := a.opts.Live.SetID(ctx, ref, top.W); err != nil {
		return err
	}
	if cache.Empty() {
		return nil
	}
	return PutArchived(ctx, a.opts.Live, ref, Seam{W: cache.W, LSN: cache.LSN})
}

// localCache is what the seam cache says after a local change of the
// volume to st: st with TrimAfterLocal; nothing new with TrimAfterRemote
// (the cache follows the pushes).
func (a *Archiver) localCache(st State) State {
	if a.opts.TrimAfter == TrimAfterRemote {
		return State{}
	}
	return st
}

// remoteState returns the archive state of vol at the newest local LSN the
// remote holds (empty if none), without pushing.
func (a *Archiver) remoteState(ctx context.Context, vol *graft.Volume) (State, error) {
	lsn, err := a.opts.Pusher.Pushed(ctx, vol)
	if err != nil {
		return State{}, fmt.Errorf("archive: pushed LSN of %s: %w", vol.Name(), err)
	}
	if lsn == 0 {
		return State{}, nil
	}
	snap, err := vol.SnapshotAt(ctx, lsn)
	if err != nil {
		return State{}, fmt.Errorf("archive: state of %s at pushed LSN %d: %w", vol.Name(), lsn, err)
	}
	defer snap.Close()
	return stateAt(ctx, snap)
}

// followPushes raises the seam cache of ref to the state of vol the remote
// holds, when a push outside a cycle (background replication, a push after
// a kill) carried folds the cache does not name yet: with TrimAfterRemote
// the cache follows the pushes, and only a cycle's own push rewrote it, so
// a cycle with nothing to cut (which pushes nothing, and calls this) left
// it behind them. st is the local state; the cache only ever rises. A
// cache at the pushed LSN costs one look at the sync point.
func (a *Archiver) followPushes(ctx context.Context, ref names.StreamRef, vol *graft.Volume, st State, seam Seam) error {
	lsn, err := a.opts.Pusher.Pushed(ctx, vol)
	if err != nil {
		return fmt.Errorf("archive: pushed LSN of %s: %w", vol.Name(), err)
	}
	if lsn <= seam.LSN {
		return nil
	}
	bound, err := a.remoteState(ctx, vol)
	if err != nil || bound.Empty() || !seam.W.Less(bound.W) {
		return err
	}
	return a.publish(ctx, ref, st, bound)
}

// pushed pushes vol and returns the archive state at the newest LSN the
// remote holds.
func (a *Archiver) pushed(ctx context.Context, vol *graft.Volume) (State, error) {
	if _, err := a.opts.Pusher.Push(ctx, vol); err != nil {
		return State{}, fmt.Errorf("archive: push %s: %w", vol.Name(), err)
	}
	return a.remoteState(ctx, vol)
}

// acquire takes the stream's lease, waiting for a held one to expire, at
// most Options.LeaseWait.
func (a *Archiver) acquire(ctx context.Context, ref names.StreamRef) (int64, error) {
	deadline := time.Now().Add(a.opts.LeaseWait)
	for {
		l, err := takeLease(ctx, a.opts.Live, ref, 0, a.opts.LeaseTTL)
		if err != nil {
			return 0, err
		}
		if !l.Held {
			return l.Token, nil
		}
		wait := max(l.TTL, time.Millisecond)
		if l.TTL < 0 || time.Until(deadline) < wait {
			return 0, fmt.Errorf("archive cycle %s: lease held by token %d for %v more: %w; retry later",
				ref, l.Token, l.TTL, ErrLeaseHeld)
		}
		a.log.Info("archive lease held; waiting for it to expire", ref.LogAttr(), "token", l.Token, "ttl", l.TTL)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// Report says what a Driver's cycle did to one stream.
type Report struct {
	Ref    names.StreamRef // the stream
	Window Window          // its declared window
	Result CycleResult     // what the cycle did
	Err    error           // why it failed, nil if it did not
}

// Driver runs cycles on a beat over its declared archived streams.
type Driver struct {
	a       *Archiver
	windows mq.Windows
}

// NewDriver returns a driver with no streams declared.
func (a *Archiver) NewDriver() *Driver {
	return &Driver{a: a}
}

// Declare sets the window of stream s of queue q.
func (d *Driver) Declare(ref names.StreamRef, w Window) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("archive window of %s: %w", ref, err)
	}
	d.windows.Set(ref, w)
	return nil
}

// Declared returns the declared streams and their windows, in name order.
func (d *Driver) Declared() []mq.StreamWindow { return d.windows.Sorted() }

// Forget stops driving stream s of queue q.
func (d *Driver) Forget(ref names.StreamRef) { d.windows.Delete(ref) }

// Cycle runs one cycle on every declared stream, in name order. One
// stream's failure does not stop the others; the error joins theirs.
func (d *Driver) Cycle(ctx context.Context) ([]Report, error) { return d.CycleFunc(ctx, nil) }

// CycleFunc is Cycle over the declared streams for which keep reports
// true (nil: all of them): a node that shares the streams with others
// cycles its own share and leaves the rest declared. The reports are of
// the streams cycled.
func (d *Driver) CycleFunc(ctx context.Context, keep func(names.StreamRef) bool) ([]Report, error) {
	declared := d.windows.Sorted()
	reps := make([]Report, 0, len(declared))
	for _, sw := range declared {
		if keep == nil || keep(sw.Ref) {
			reps = append(reps, Report{Ref: sw.Ref, Window: sw.Window})
		}
	}
	var errs []error
	for i := range reps {
		r := &reps[i]
		r.Result, r.Err = d.a.Cycle(ctx, r.Ref, r.Window)
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return reps, errors.Join(errs...)
}

// Run runs Cycle every interval until ctx ends and returns ctx's error.
// Failed cycles are logged (by Cycle) and retried on the next beat.
func (d *Driver) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		d.Cycle(ctx)
	}
}
