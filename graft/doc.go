// Package graft is echostore's local page store: transactional, versioned
// volumes on Pebble.
//
// A Store is one data directory (normally <data>/graft). It holds named
// volumes; a volume is a sparse array of pages indexed by uint64, plus small
// metadata (key → bytes). Every commit to a volume writes any number of
// pages and metadata entries under one LSN. Business pages live below
// ArchiveBase (2^49), archive pages at ArchiveBase+n: Txn.Put rejects
// indexes at or above ArchiveBase, and Txn.PutArchive is the only way to
// write there (invariant 4 of docs/rfc/0001-invariants.md, kept in txn.go before anything is
// staged).
//
// What the package owns: the on-disk layout of page versions, metadata
// versions, commit records and volume records in Pebble (docs/GRAFT.md
// specifies every byte); LSN assignment; the conflict rule; snapshots and
// their pins; GC.
//
// What it promises:
//
//   - LSNs are gap-free and monotone per volume: the first commit is LSN 1,
//     each next one head+1, across restarts and crashes. A commit's pages,
//     metadata, commit record and the new head land in one Pebble batch, so
//     a crash leaves each commit whole or absent, never in part; with
//     Synced it is on disk when Commit returns.
//   - Invariant 7: a read at LSN L returns the same bytes forever, until GC
//     removes L, which is explicit (Volume.GC); after that a read at L fails
//     with ErrSnapshotGone, never with other bytes. Versions are keyed by
//     (volume, page, inverted LSN) and never rewritten (keys.go); a Snapshot
//     pins its LSN so GC keeps what it sees (volume.go, gc.go).
//   - Optimistic concurrency, whole-volume: a Txn begun at head B commits as
//     B+1 only if no other commit landed on the volume since; otherwise
//     Commit returns a *ConflictError (ErrConflict) and writes nothing.
//   - Reads never block writers and take no lock; Snapshot.Get is one seek.
//   - Concurrent Synced commits, on one volume or many, share fsyncs: no
//     lock is held across the sync except the committing volume's own.
//   - Archive pages can be dropped in order (archivelow.go):
//     Txn.DropArchiveBelow raises the volume's archive floor (metadata
//     archive.low, MetaArchiveLow); reads at that commit's LSN and later
//     find nothing below it, older snapshots still read the pages, no
//     commit can write below it again, and GC deletes their versions once
//     its horizon passes the drop. A drop is a metadata commit, so it
//     replicates in the existing remote format.
//   - Bad input (oversized pages or metadata, indexes outside the API's
//     range) is rejected with a typed error before anything is staged;
//     stored bytes that do not decode give ErrCorrupt, never a panic.
//
// Replication to object storage (package graft/remote) is wired in: a
// Volume is the remote.Source of its writer and the remote.Sink of a
// follower. Push publishes the unpushed local commits as one remote commit
// (crash-safe through the pending commit recorded before publishing); Pull
// applies remote commits, whose pages a follower fetches lazily, one ranged
// GET per frame on first read (Hydrate fetches them all); a volume whose
// unpushed commits lost the remote race gets a *DivergedError, and Reset
// drops them; Follow pulls when the volume's LSN lane (Options.Notifier,
// package lane) announces a push. The sync point moves keep-from, so
// GC never passes unpushed history.
package graft
