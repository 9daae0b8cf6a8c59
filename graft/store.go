package graft

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/diskguard"
	"github.com/echostore/echostore/names"
)

// formatMajorVersion pins Pebble's on-disk format, so that upgrading Pebble
// never silently ratchets a data dir past what an older binary can read.
const formatMajorVersion = pebble.FormatValueSeparation

// tunePebble, set only by tests, adjusts Pebble's options before Open:
// TestPebbleTunings compares tunings in one process, run by run.
var tunePebble func(*pebble.Options)

// Store is one Graft data directory: a Pebble database holding any number of
// volumes. It is safe for concurrent use.
type Store struct {
	db     *pebble.DB
	lock   *pebble.Lock     // held across both opens of a read-write Open; nil read-only
	disk   *diskguard.Guard // nil read-only (see Options.DiskReserve)
	fatal  *fatalState      // set once Pebble met a fatal error (ErrStoreFailed)
	opts   Options
	log    *slog.Logger
	closed atomic.Bool
	remote atomic.Pointer[remoteHandle] // nil: no remote attached

	mu     sync.Mutex // guards vols and nextID (volume creation)
	vols   map[string]*Volume
	nextID uint64

	// lazySyncPoint makes SetSyncPoint commit without an fsync (see
	// there); Open sets it. Tests clear it to compare with a synced sync
	// point.
	lazySyncPoint bool

	// committing counts the batches inside Pebble's commit (store.commit),
	// past every lock of graft's. testHookCommitting, when a test sets it,
	// is told the count each time a batch enters: the group commit waiting
	// on the WAL then has at least that many members.
	committing         atomic.Int64
	testHookCommitting atomic.Pointer[func(n int64)]
}

// Open opens (creating if needed) the store in dir, e.g. "<data>/graft".
// Pebble locks dir: a second Open of the same dir, from this process or
// another, fails with an error wrapping ErrLocked. Open reads the store
// record and the volume records besides what Pebble reads, and refuses with
// *MissingCommitsError a state older than those records claim (see
// checkReplayed); volumes are loaded when first asked for.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("graft: open %s: %w", dir, err)
	}
	opts = opts.withDefaults()
	if opts.ReadOnly {
		if _, err := opts.FS.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("graft: open %s read-only: %w", dir, ErrNoStore)
		}
	} else if err := opts.FS.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("graft: open %s: %w", dir, err)
	}
	lock, err := lockDir(dir, opts)
	if err != nil {
		return nil, err
	}
	// A read-write store is guarded against a full disk (diskfull.go):
	// Pebble's filesystem reports every ENOSPC to the guard, which releases
	// its ballast so that Pebble's retry of that write succeeds.
	pfs := opts.FS
	fatal := &fatalState{log: opts.Logger}
	var guard *diskguard.Guard
	if !opts.ReadOnly {
		guard = diskguard.New(diskguard.Options{Dir: dir, FS: opts.FS, Reserve: opts.DiskReserve, Ballast: opts.Ballast, What: "graft", Logger: opts.Logger})
		pfs = vfs.OnDiskFull(opts.FS, guard.NoSpace)
	}
	bg := &backgroundErrors{log: opts.Logger, g: guard}
	pebbleOpts := func(readOnly bool) *pebble.Options {
		po := &pebble.Options{
			FS:                 pfs,
			EventListener:      eventListener(bg),
			CacheSize:          opts.CacheSize,
			MemTableSize:       opts.MemTableSize,
			FormatMajorVersion: formatMajorVersion,
			Logger:             pebbleLogger{l: opts.Logger, fatal: fatal},
			ReadOnly:           readOnly,
			Lock:               lock,
		}
		if opts.DeferCompactions {
			po.DisableAutomaticCompactions = true
			po.L0StopWritesThreshold = math.MaxInt32
		}
		if tunePebble != nil {
			tunePebble(po)
		}
		return po
	}
	fail := func(err error) (*Store, error) {
		if lock != nil {
			_ = lock.Close()
		}
		return nil, fmt.Errorf("graft: open %s: %w", dir, err)
	}
	// A read-write open flushes what Pebble replays from its write-ahead
	// log, after which the replay can no longer be told from the tables:
	// check it on a read-only open first (under the same lock).
	if !opts.ReadOnly {
		db, err := pebble.Open(dir, pebbleOpts(true))
		switch {
		case errors.Is(err, pebble.ErrDBDoesNotExist): // a new store
		case err != nil:
			return fail(err)
		default:
			if err := errors.Join(checkReplayed(ctx, db), db.Close()); err != nil {
				return fail(err)
			}
			if err := checkRoomToOpen(dir, opts.FS, guard); err != nil {
				return fail(err)
			}
		}
	}
	db, err := pebble.Open(dir, pebbleOpts(opts.ReadOnly))
	if err != nil {
		if opts.ReadOnly && errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("graft: open %s read-only: %w", dir, ErrNoStore)
		}
		if isLocked(err) {
			return fail(fmt.Errorf("%w (%v)", ErrLocked, err))
		}
		return fail(err)
	}
	if opts.ReadOnly {
		if err := checkReplayed(ctx, db); err != nil {
			_ = db.Close()
			return fail(err)
		}
	}
	s := &Store{db: db, lock: lock, disk: guard, fatal: fatal, opts: opts, log: opts.Logger, vols: make(map[string]*Volume), lazySyncPoint: true}
	if opts.Remote != nil {
		s.remote.Store(&remoteHandle{store: opts.Remote, hooks: opts.RemoteHooks})
	}
	if err := s.loadStoreRecord(); err != nil {
		_ = db.Close()
		return fail(err)
	}
	return s, nil
}

// lockDir takes the directory lock that a read-write open holds across
// its two Pebble opens; a read-only open lets Pebble take it (nil).
func lockDir(dir string, opts Options) (*pebble.Lock, error) {
	if opts.ReadOnly {
		return nil, nil
	}
	lock, err := pebble.LockDirectory(dir, opts.FS)
	if err != nil {
		if isLocked(err) {
			return nil, fmt.Errorf("graft: open %s: %w (%v)", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("graft: open %s: %w", dir, err)
	}
	return lock, nil
}

// isLocked reports a lock held by another process or by this one.
func isLocked(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		(err != nil && strings.Contains(err.Error(), "lock held by current process"))
}

// loadStoreRecord reads the store record, writing it into an empty database.
func (s *Store) loadStoreRecord() error {
	v, closer, err := s.db.Get(storeKey)
	switch {
	case err == nil:
		defer closer.Close()
		r, err := decodeStoreRecord(v)
		if err != nil {
			return err
		}
		s.nextID = r.NextID
		return nil
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	}
	// No store record: the database must be empty, or it is not ours.
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	hasKeys := it.First()
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	if hasKeys {
		return corrupt("store record", "missing in a non-empty database: not a graft store")
	}
	s.nextID = 1
	if s.opts.ReadOnly {
		return nil // an empty store: nothing to read, nothing to write
	}
	return s.set(storeKey, encodeStoreRecord(storeRecord{NextID: 1}), pebble.Sync)
}

// Close flushes the memtable (so that the next Open, read-only or not, has
// no WAL to replay) and closes the database; every Unsynced commit becomes
// durable. Close must not run concurrently with other calls; after it, calls
// fail with ErrClosed. Iterators must be closed first.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		// Pebble's write-ahead log is broken: a flush or a close could
		// reach it (and end the process). Leave the database to the
		// process's end; the directory lock stays held until then.
		return fmt.Errorf("graft: close: not closed, restart the process: %w", err)
	}
	var flushErr error
	if !s.opts.ReadOnly {
		flushErr = s.db.Flush()
	}
	err := errors.Join(flushErr, s.db.Close())
	if s.lock != nil {
		err = errors.Join(err, s.lock.Close())
	}
	if err != nil {
		return fmt.Errorf("graft: close: %w", err)
	}
	return nil
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (s *Store) checkWritable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	return s.failure()
}

// checkRoomToOpen refuses a read-write open of a full data directory whose
// write-ahead log still holds walBytes to flush: Pebble's open flushes it
// before it returns and retries a flush that finds no space until one fits,
// so the open would wait for as long as the disk stays full. The ballast is
// released first (that is what it is for); if the log does not fit even
// then, the open fails at once with an error wrapping ErrDiskFull.
//
// What the log holds is taken as the size of the directory's *.log files
// (an overestimate when Pebble keeps obsolete logs for reuse).
func checkRoomToOpen(dir string, fs vfs.FS, g *diskguard.Guard) error {
	if !g.Full() {
		return nil
	}
	var walBytes uint64
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			if fi, err := fs.Stat(fs.PathJoin(dir, n)); err == nil {
				walBytes += uint64(fi.Size())
			}
		}
	}
	if walBytes == 0 {
		return nil
	}
	if avail, ok := g.Avail(); ok && avail >= walBytes+diskguard.MinRoom {
		return nil
	}
	g.NoSpace() // releases the ballast and measures again
	if avail, ok := g.Avail(); ok && avail < walBytes+diskguard.MinRoom {
		return fmt.Errorf("the data directory %s has %d bytes free, and its write-ahead log holds %d bytes that must be flushed before the store opens: free at least %d bytes and start again: %w",
			dir, avail, walBytes, walBytes+diskguard.MinRoom-avail, ErrDiskFull)
	}
	return nil
}

// Volume returns the named volume, or an error wrapping ErrVolumeNotFound.
// The same *Volume is returned for the same name until Close. The zero
// names.Volume (no name) fails wrapping names.ErrInvalid.
func (s *Store) Volume(ctx context.Context, vol names.Volume) (*Volume, error) {
	return s.volume(ctx, vol, false)
}

// CreateVolume returns the named volume, creating it (head LSN 0, no pages)
// if it does not exist. Creation is synced before it returns.
func (s *Store) CreateVolume(ctx context.Context, vol names.Volume) (*Volume, error) {
	return s.volume(ctx, vol, true)
}

func (s *Store) volume(ctx context.Context, vol names.Volume, create bool) (*Volume, error) {
	if vol.IsZero() {
		return nil, fmt.Errorf("graft: no volume name: %w", names.ErrInvalid)
	}
	name := vol.String()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("graft: volume %q: %w", name, err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vols[name]; ok {
		return v, nil
	}
	key := volumeKey(name)
	val, closer, err := s.db.Get(key)
	switch {
	case err == nil:
		rec, derr := decodeVolumeRecord(val)
		closer.Close()
		if derr != nil {
			return nil, fmt.Errorf("graft: volume %q: %w", name, derr)
		}
		v := newVolume(s, vol, key, rec)
		s.vols[name] = v
		return v, nil
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, fmt.Errorf("graft: volume %q: %w", name, err)
	case !create:
		return nil, fmt.Errorf("graft: volume %q: %w", name, ErrVolumeNotFound)
	}
	if err := s.checkWritable(); err != nil {
		return nil, fmt.Errorf("graft: create volume %q: %w", name, err)
	}
	if err := s.CheckRoom(); err != nil {
		return nil, fmt.Errorf("graft: create volume %q: %w", name, err)
	}
	rec := volumeRecord{ID: s.nextID, KeepFrom: Unpinned, Created: time.Now().UnixNano()}
	b := s.db.NewBatch()
	defer b.Close()
	if err := errors.Join(
		b.Set(key, encodeVolumeRecord(rec), nil),
		b.Set(storeKey, encodeStoreRecord(storeRecord{NextID: s.nextID + 1}), nil),
		s.commit(b, pebble.Sync),
	); err != nil {
		return nil, fmt.Errorf("graft: create volume %q: %w", name, err)
	}
	s.nextID++
	v := newVolume(s, vol, key, rec)
	s.vols[name] = v
	s.log.Debug("graft: volume created", "volume", name, "id", rec.ID)
	return v, nil
}

// Volumes lists every volume of the store, by name.
func (s *Store) Volumes(ctx context.Context) ([]Info, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: []byte{kindVolume}, UpperBound: []byte{kindVolume + 1},
	})
	if err != nil {
		return nil, fmt.Errorf("graft: list volumes: %w", err)
	}
	var out []Info
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("graft: list volumes: %w", err)
		}
		name := string(it.Key()[volPrefixLen:])
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("graft: list volumes: %w", err)
		}
		rec, err := decodeVolumeRecord(val)
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("graft: volume %q: %w", name, err)
		}
		vol, err := names.ParseVolume(name)
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("graft: list volumes: a stored volume name: %w", err)
		}
		out = append(out, rec.info(vol))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("graft: list volumes: %w", err)
	}
	return out, nil // keys sort by name
}

// Compact asks Pebble to compact the whole keyspace, so that the space GC
// freed is returned to the filesystem now rather than when background
// compactions reach it.
func (s *Store) Compact(ctx context.Context) error {
	if err := s.checkWritable(); err != nil {
		return err
	}
	if err := s.db.Compact(ctx, []byte{0x00}, []byte{0xff}, true); err != nil {
		return fmt.Errorf("graft: compact: %w", err)
	}
	return nil
}

// CacheSize returns the block cache the store opened with, in bytes
// (Options.CacheSize with its default and floor applied).
func (s *Store) CacheSize() int64 { return s.opts.CacheSize }

// DiskUsage returns the bytes the store occupies on its filesystem (tables,
// WAL, manifests), as Pebble accounts them.
func (s *Store) DiskUsage() uint64 {
	if s.closed.Load() {
		return 0
	}
	return s.db.Metrics().DiskSpaceUsage()
}
