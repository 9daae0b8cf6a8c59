// Package archive is StreamArchive: it folds what retention trims from a
// live stream into the stream's archive volume (graft volume archive.Q.S)
// before the trim, keeps the watermark W, and merge-reads archive and live
// tail as one ordered stream. docs/ARCHIVE.md specifies the formats and
// gives the arguments; this comment says what the package owns and where
// each promise is kept.
//
// What it owns: the record page format (page.go: AppendRecordPage,
// DecodeRecordPage), the archive metadata of a volume (fold.go: MetaW,
// MetaSeq, MetaLow), the fold (Fold), the watermark (Frontier), archive
// reads by id and time range (Read, ReadTime), the merge-read (MergeRead),
// the fold-then-trim cycle with its lease and fencing (Archiver.Cycle,
// Driver), which pulls the volume first when the remote is ahead (a
// takeover) and refuses to start a volume over a leftover remote log
// (remotelog.go), the retention horizon (retain.go: Retain drops archived
// pages below it with graft's DropArchiveBelow; W does not move), and
// deleting an archived stream (Archiver.Delete: the local volume, its
// remote log, then the live keys in one script fenced by the lease), and
// its keys in the live tier with the scripts that use them (live.go,
// scripts.go, lease.go, seam.go: the lease with fencing tokens, the fenced
// trim, the seam cache, the archived set, the fenced delete), run through
// Live, the part of a *mq.Client the package uses.
//
// Invariant 2, no loss (kept in cycle.go and fold.go): a record leaves the
// live stream only after its page and a W ≥ its id are durable in ONE synced
// commit (Fold: pages, archive.seq and archive.w in one graft commit, one
// LSN). The trim is XTRIM MINID at W's successor (never past the window's
// cut, so entries appended during the cycle are never trimmed), capped at
// every consumer group's oldest pending or undelivered entry, in one script
// that also checks the lease's fencing token (fencedTrim in lease.go), so
// a driver that stalled past its lease cannot trim. After each fold the
// stream's last id is raised to W (mq.Client.SetID). A failed fold trims
// nothing. The volume is the truth about W; the seam cache in Redis is
// rewritten after each fold and never trusted over the volume (a volume
// behind the cache is refused: ErrVolumeBehind).
//
// Invariant 3, no gap and no overlap while cycles run (kept in merge.go):
// after each live page MergeRead reads W again (W′), serves the ids up to W′
// from the archive and only ids above W′ from the page. A volume that is
// missing (or behind the seam cache) while the cache says the stream is
// archived is pulled through Source.Pull (the CLI pulls from the remote);
// without a pull, or when it fails, the read fails with ErrNoVolume (or
// ErrVolumeBehind) rather than serving the live tail alone.
//
// One volume, one stream (kept in owner.go): names may hold '.', so two
// streams can map to one volume name (a.b/c and a/b.c: archive.a.b.c).
// The first fold through an Archiver records the owner (MetaOwner); every
// entry point that takes a queue and a stream (Cycle and its fold and
// drop, MergeRead, StreamFrontier, Delete) refuses a volume of another
// stream with an *OwnerError (ErrVolumeOwner) before any side effect.
//
// Pages are id-ordered along the page axis (ArchiveBase + n in fold order,
// folds strictly increasing and above W), so ranges are found by bisection
// over the axis: there is no second index.
package archive
