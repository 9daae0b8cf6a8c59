// Package remote is the object-storage side of Graft replication: the
// stores a volume's remote log lives in, the self-describing formats of its
// objects, and the log protocol over them. It does not depend on the local
// engine; the engine pushes and pulls through Log.
//
// # What it owns
//
//   - Store: a flat key space of immutable objects with a conditional create
//     (PutIfAbsent), and Open, which dispatches a URL to the first of the
//     Drivers it is given that opens its scheme. The drivers are packages
//     of their own, so that this package (and graft) links no cloud SDK:
//     graft/remote/file (file://, atomic and durable across processes:
//     write temp, fsync, link(2), fsync the folder), graft/remote/s3 (S3,
//     MinIO, Tigris, R2), gcs (gs://), azblob (azblob://) and mem (mem://)
//     over gocloud.dev/blob; graft/remote/drivers.All lists them all. A bad
//     URL is ErrBadURL with its secrets hidden (an unknown scheme an
//     *UnknownSchemeError); a store that cannot be reached or refuses this
//     client is ErrUnavailable, never ErrNotFound or ErrCorrupt; Probe
//     checks a store with one cheap GET.
//   - The formats (docs/REMOTE.md specifies every byte): commit objects,
//     segments of independent zstd frames, checkpoint markers. Every object
//     starts with a magic and a version and ends with a CRC-32C of the rest;
//     decoders are total: bad bytes give ErrCorrupt, never a panic.
//   - Log: one volume's remote log. Head is one LIST; Append uploads
//     segments (unless the pages go inline) and then creates the commit
//     object at head+1 if absent; LatestCheckpoint is one LIST and one GET;
//     FetchFrame is one ranged GET of one frame, verified; State folds the
//     log into live page references; WriteCheckpoint appends a checkpoint
//     built from the log alone; GC is explicit, and trimming leaves
//     tombstones so that trimmed LSNs stay fenced.
//   - Push and Pull: replication written against two small interfaces the
//     local engine implements (Source for the writer, Sink for a follower),
//     with the pending remote commit that makes a push crash-safe.
//
// # What it promises
//
// Invariant 6 (the fence) is kept in Log.Publish over Store.PutIfAbsent:
// a commit object is created only if its key is absent, and the key is a
// function of the volume and the LSN alone, so of two writers pushing from
// the same base exactly one wins each LSN; the other gets a *DivergedError
// (errors.Is(err, ErrDiverged)). Re-publishing a commit that landed is a
// success, so a writer that crashed or lost a response retries safely.
// Every commit names the hash of its predecessor, so a reader (Since, Check)
// detects a rewritten or forked log. The file:// store keeps the fence
// across processes with link(2), which fails if the key exists; the bucket
// stores leave it to the server's conditional write (If-None-Match: * on
// S3).
//
// Invariant 7 (snapshots) is kept by LSNs that are a function of the key
// and objects that are never rewritten; invariant 8 (bad input never
// corrupts) by decoders that verify before use and by EncodeCommit and
// Prepare, which reject invalid input before any upload.
package remote
