// Package accept is the accept tier: an outbox of accepted jobs
// ("intents") that takes records at in-heap speed and bounds what a crash
// can lose to K records (the asynchronous half of invariant 5: an `async`
// enqueue is acknowledged once its intent is recorded), and Tier, the
// two-tier enqueue that commits batches of intents to Graft and pushes them
// before a `sync` enqueue is acknowledged (the synchronous half).
//
// # What it owns
//
// One directory, opened by one Outbox at a time (an flock on dir/LOCK):
//
//   - log segments, log-<first block seq, 16 hex>.log: a header, then
//     framed blocks appended in order, each holding the records of one
//     batch, CRC-32C checksummed, written with one write and one fsync;
//   - snapshots, snap-<block seq, 16 hex>.snap: every uncommitted intent as
//     of a block boundary, one checksummed file, written through a
//     temporary file, fsync, rename and a directory fsync.
//
// docs/ACCEPT.md specifies every byte.
//
// # Promises
//
//   - Loss window. At no time are more than Options.K appended log records
//     (accepted or committed) not durable: Record and MarkCommitted wait,
//     honouring their context, rather than exceed it. Flush makes
//     everything appended so far durable; a partial block is also cut
//     after Options.FlushInterval.
//   - Incremental. A block holds only the records appended since the last
//     one, never the whole map: the cost of durability does not grow with
//     the number of pending intents. A background flusher encodes, writes
//     and fsyncs one block while the next one fills, as far as K allows
//     (Options.BlockMax sets how a window of K splits into blocks).
//   - Compaction. When the log since the last snapshot outgrows
//     CompactRatio × max(live intents, CompactMin) records, a snapshot is
//     taken in O(1) (the CHAMP map value at a block boundary) and written in
//     the background; a new log segment starts at that boundary. The
//     previous snapshot and the log since it are kept as the fallback;
//     older files are deleted.
//   - Recovery. Open loads the newest intact snapshot the log reaches back
//     to and replays the blocks after it. A torn or corrupt tail of the
//     newest segment is dropped and the file truncated to its intact
//     prefix, which is what a crash during a write leaves; damage anywhere
//     else (including damage followed by an intact next block), or no
//     usable snapshot, is an error wrapping ErrCorrupt. An
//     unreadable snapshot is set aside (renamed *.corrupt) when an older
//     one is used instead. Nothing on disk can make recovery panic; every
//     decoder is total and fuzzed.
//   - Input. Record rejects id 0, an intent without a queue (a
//     names.Queue is checked when made; one read back from disk is checked
//     by the decoder), a payload over Options.MaxPayload, and an id already
//     pending, with a typed error and no side effect.
//   - Order. Pending returns the uncommitted intents in id order; All
//     iterates over an O(1) snapshot in an order fixed by the set of ids.
//
// # The two-tier enqueue
//
// Tier joins the outbox to Graft and the job stream (the `sync` half of
// invariant 5). Enqueue with Async returns once the intent is recorded; with
// Sync once its batch is one commit of the queue's accept volume accept.Q.N
// and that commit is pushed (the Receipt carries the remote LSN). One
// committer goroutine per queue takes everything pending when it is free,
// so concurrent sync callers share one commit and one push; committed jobs
// are then put on the job stream by id and marked committed in the outbox.
// NewTier recovers: it dispatches again what the volume holds above its
// safe index and re-commits only the intents the volume does not hold.
// Delivery is at least once, keyed by the job id. docs/ACCEPT.md specifies
// the page layout and the argument.
package accept
