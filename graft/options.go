package graft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// ArchiveBase is the first archive page index. Business pages live below it,
// archive pages at ArchiveBase+n (docs/rfc/0001-invariants.md, invariant 4).
const ArchiveBase uint64 = 1 << 49

// MaxArchiveOffset is the largest n that Txn.PutArchive accepts:
// ArchiveBase+n must not wrap around.
const MaxArchiveOffset uint64 = math.MaxUint64 - ArchiveBase

// MaxMetaKeyLen is the longest metadata key, in bytes (its length is stored
// in one byte of the key).
const MaxMetaKeyLen = 255

// Unpinned is the keep-from LSN of a volume that the replication layer has
// not constrained: GC may advance up to the head.
const Unpinned uint64 = math.MaxUint64

// Defaults of Options.
const (
	DefaultMaxPageSize      = 1 << 20        // 1 MiB
	DefaultMaxMetaValueSize = 64 << 10       // 64 KiB
	DefaultMaxTxnBytes      = 1<<30 + 64<<20 // 1088 MiB: one record of archive.MaxRecordBytes and its pages' keys
	DefaultCacheSize        = 128 << 20      // 128 MiB, allocated as blocks are read
	DefaultMemTableSize     = 32 << 20       // 32 MiB
)

// MinCacheSize is the least block cache beside memtables of the default
// size: a smaller Options.CacheSize is raised to it (Pebble charges the
// memtables against the cache, see Options.CacheSize).
const MinCacheSize = 4 * DefaultMemTableSize // 128 MiB

// Options configure a Store. The zero value is usable: every zero field takes
// its default.
type Options struct {
	// MaxPageSize is the largest page accepted, in bytes.
	// Default DefaultMaxPageSize.
	MaxPageSize int
	// MaxMetaValueSize is the largest metadata value accepted, in bytes.
	// Default DefaultMaxMetaValueSize.
	MaxMetaValueSize int
	// MaxTxnBytes bounds what one transaction may stage (pages, metadata and
	// key overhead), in bytes. Default DefaultMaxTxnBytes.
	MaxTxnBytes int64
	// CacheSize is Pebble's block cache, in bytes: the blocks read stay
	// in memory decompressed, so a read that finds its blocks here reads
	// neither the file nor the decompressor (a merge-read of an archive
	// larger than the cache reads every block again). Pebble charges live
	// memtables against it, so it must be well above MemTableSize or reads
	// go uncached: it is raised to at least 4 × MemTableSize. Default
	// DefaultCacheSize; Store.CacheSize says what Open applied.
	CacheSize int64
	// MemTableSize is Pebble's memtable size, in bytes. Each full memtable
	// rotates the WAL and is flushed, which briefly stalls commits: larger
	// memtables stall less often. Close flushes the memtable so the next Open
	// replays nothing; after a crash Open replays up to this much WAL.
	// Default DefaultMemTableSize.
	MemTableSize uint64
	// History says how long GC keeps the past states of a volume readable
	// (SnapshotAt, the as-of reads of an archive): the horizon stays at or
	// below the newest commit made more than History(vol) ago, so every
	// state since then can still be opened, at the cost of the page
	// versions later commits replaced. nil, or 0 for a volume: GC keeps no
	// past state beyond the pins and the replication's sync point.
	History func(vol names.Volume) time.Duration
	// Now is the clock History is measured on (nil: time.Now).
	Now func() time.Time
	// ReadOnly opens the store for reading only: Open does no writes and no
	// fsyncs (about 1 ms instead of several), which suits CLI reads. Every
	// write (CreateVolume of a new volume, Commit, GC, SetKeepFrom, Compact)
	// fails with ErrReadOnly. The directory is still locked. Unsynced data
	// in the WAL is replayed into memory, not flushed.
	ReadOnly bool
	// DeferCompactions opens the store with Pebble's automatic
	// compactions off, for a process that reads the store once and
	// briefly (the CLI's export): the compactions the last writer left
	// owing cost memory and time that such a reader need not spend, and
	// the next open without DeferCompactions does them. Writes are not
	// stalled for the tables that pile up in the meantime.
	DeferCompactions bool
	// FS is the filesystem Pebble runs on; nil means the operating system's.
	// Tests pass vfs.NewMem or vfs.NewCrashableMem.
	FS vfs.FS
	// Remote is the object store the volumes replicate to: Push, Pull,
	// Hydrate and the page faults of a follower use it. nil: none (see
	// Store.AttachRemote). The Store does not close it.
	Remote remote.Store
	// RemoteHooks are fault hooks of pushes, for crash tests (remote.Hooks).
	RemoteHooks remote.Hooks
	// Notifier, if set, receives an Event for every local commit and every
	// push, and is what Volume.Follow waits on (see package lane).
	Notifier Notifier
	// DiskReserve is the free space, in bytes, that the data directory's
	// filesystem keeps: below it commits and volume creations fail with an
	// error wrapping ErrDiskFull (reads, GC, pushes and pulls go on), and
	// they are accepted again by themselves once that much is free. 0:
	// 64 MiB, at most a tenth of the filesystem; negative: no reserve.
	// Only a filesystem that reports its free space is guarded (not
	// vfs.NewMem).
	DiskReserve int64
	// Ballast is the size, in bytes, of the file BALLAST that a read-write
	// Open lays in the directory: space held back so that the writes under
	// way when the disk fills from outside can finish (Pebble ends the
	// process when its write-ahead log meets ENOSPC). The first ENOSPC
	// releases it; it is laid anew once the reserve and it fit again. 0:
	// 16 MiB, at most a twentieth of the filesystem; negative: none.
	Ballast int64
	// Logger receives Pebble's messages (Info at Debug level) and the store's
	// own; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxPageSize <= 0 {
		o.MaxPageSize = DefaultMaxPageSize
	}
	if o.MaxMetaValueSize <= 0 {
		o.MaxMetaValueSize = DefaultMaxMetaValueSize
	}
	if o.MaxTxnBytes <= 0 {
		o.MaxTxnBytes = DefaultMaxTxnBytes
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	o.CacheSize = max(o.CacheSize, 4*int64(o.MemTableSize)) // room for blocks beside the memtables

	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Durability says when Commit returns.
type Durability uint8

const (
	// Synced: the commit is fsynced to the write-ahead log before Commit
	// returns; a crash after that never loses it. Concurrent Synced commits,
	// on one volume or many, share fsyncs (group commit). The zero value.
	Synced Durability = iota
	// Unsynced: Commit returns once the commit is in the write-ahead log's
	// buffer. A crash may lose it (and the Unsynced commits after it), never
	// a part of it. The next Synced commit or Store.Close makes it durable.
	Unsynced
)

// String returns "synced" or "unsynced".
func (d Durability) String() string {
	switch d {
	case Synced:
		return "synced"
	case Unsynced:
		return "unsynced"
	}
	return fmt.Sprintf("Durability(%d)", uint8(d))
}

// pebbleLogger routes Pebble's log lines to slog. Fatalf fails the store
// (see ErrStoreFailed) and panics with a fatalPanic, which the store's
// commit recovers when it is Pebble's fatal commit error; anywhere else the
// panic goes on, as before.
type pebbleLogger struct {
	l     *slog.Logger
	fatal *fatalState
}

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	var cause error = errors.New(msg)
	for _, a := range args {
		if e, ok := a.(error); ok {
			cause = fmt.Errorf("%s: %w", msg, e)
			break
		}
	}
	panic(fatalPanic{err: p.fatal.fail(cause)})
}
