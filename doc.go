// Package echostore is an echostore node as a Go API: a data directory, its
// Redis and its remote, opened once by Open and closed by Node.Close.
//
// A Node bounds Redis streams and folds what retention trims into Graft, a
// versioned page store replicated to object storage. Its methods are the
// whole user contract, the one `echostore serve` answers over HTTP and the
// CLI runs: Append, Read (a merge-read over the archive and the live
// stream), Cycle, Status and Delete of a stream; Enqueue, Claim, Ack, Dead,
// Redrive and QueueStatus of a job queue; Volumes, VolumeInfo, Push, Pull,
// Hydrate, Reset, Checkpoint and GC of a volume. Every method takes checked
// names (names.StreamRef, names.Queue, names.Volume), so no layer below
// checks a name again.
//
// # Running a node
//
// A Node keeps its streams bounded by itself: Declare gives a stream its
// StreamPolicy (archived or trim-only, its window, when to trim, the
// archive's retention), and Run beats every declared stream until its
// context ends, by archive cycles (fold, push when TrimAfterRemote, trim)
// or trim-only retention, and checkpoints the accept outbox when asked.
// Replication (Config.ReplicateEvery) and the remote GC (Config.GCEvery)
// run in the background from Open to Close. `echostore serve` runs the same
// Run, with its own beat around Node.Beat (its group's share, discovery,
// metrics and events); a program needs no serve (ExampleNode_Run).
//
// # Layout
//
// Open owns the data directory (Config.Data, mode 0700): the graft store
// in Data/graft, locked while the Node is open, and the accept outbox in
// Data/accept/outbox. The remote defaults to file://<Data>/remote.
//
// # Redis
//
// Config.Redis is optional. Without it a Node has its volumes alone
// (Volumes, VolumeInfo, Push, Pull, Hydrate, Reset, Checkpoint, GC, and
// Read with ReadArchiveOnly); every stream and job operation fails with
// ErrNoRedis.
//
// # JSON
//
// Every result is a struct of this package (types.go) with JSON tags, and
// its field order is the key order of its JSON object: serve's HTTP answers
// (docs/SERVE.md), the CLI's output and json.Marshal of a result print the
// same keys in the same order. No result is a map. A field added to a
// result goes where its key should print.
//
// # Archive status
//
// Status, like a merge-read, pulls the stream's archive volume from the
// remote when the seam cache in Redis says the stream is archived further
// than this data dir's volume holds (or the data dir has none), so that it
// never reports a stale watermark; without the volume on the remote it
// fails wrapping archive.ErrNoVolume. (serve used to refuse in that case,
// and the CLI to pull: both now do what Status does.)
//
// # Close order
//
// Close closes the accept tier (its committers finish the batches they
// hold; what is pending stays in the outbox for the next Open), then the
// outbox, the graft store (releasing the data dir's lock), the remote and
// Redis.
package echostore
