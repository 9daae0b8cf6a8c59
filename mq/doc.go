// Package mq is EchoMQ, echostore's live tier on Redis (≥ 7, tested with 7.0), a
// single server or a Redis Cluster: streams of records, their
// retention, lanes that announce events to blocked followers, job queues
// with consumer groups, retries and dead letters, and the script primitive
// (Script, Client.Run) on which package archive keeps its own keys beside
// the streams (its lease, seam cache and archived set).
//
// # What it promises
//
// Order (invariant 1). A record's id is minted here with a brand.Minter and
// XADD always uses that id's Redis id, so stream order is mint order.
// Appends go in chunks, each appended whole or not at all: one transaction
// (MULTI, a guard script that checks the stream's top, the chunk's XADDs,
// EXEC; Redis runs it with no other command in between, and the guard
// makes every XADD fail when the chunk is not above the top), or through
// one server-side script (a chunk of fewer than 16 records, a retry, or
// Options.ScriptAppend). A chunk whose first id is not above the
// stream's top is re-minted above it and sent again, so producers in many
// processes, even sharing a node number, never lose an append and never
// break the order. A chunk whose reply was lost is sent again with the same
// ids and is found in place if it had landed, so it is never appended twice.
// A chunk that a restarted server refuses with LOADING (it is still loading
// its data) is sent again the same way, with the same bounded backoff.
//
// Trim (invariant 2, the trim side). Nothing here trims by MAXLEN except
// lanes, which are announcement channels. Streams are trimmed by XTRIM
// MINID, which cannot remove an entry appended during the trim's cycle,
// never past the oldest pending or undelivered entry of any consumer group
// of the stream, and never on a stream registered as archived (ErrArchived):
// an archived stream is trimmed only by the archive driver, after its fold.
// The refusal and the trim are one script. SetID raises a stream's last id
// so that no append can land at or below the archive's watermark.
//
// No eviction (invariant 9). Connect refuses a server whose
// maxmemory-policy is anything but noeviction (ErrEvictingPolicy), checking
// every master of a Cluster, unless explicitly overridden.
//
// Records. A record is a Redis stream id (xid.ID) and an ordered list of
// fields, byte strings as Redis keeps them: every entry Redis stores reads
// as a record, whatever its id or bytes. Input of this package's appends
// with no fields, duplicate field names, invalid UTF-8 or beyond Limits is
// rejected with a typed error before anything is sent; a whole batch is
// checked before its first chunk, and appended ids are branded. Reads report
// a reply that is not an entry as an *EntryError instead of skipping it. A
// record's JSON form {"id":"EVT_…","fields":{…}} (other forms for ids
// without a branded id and fields that are not a UTF-8 object) is rendered
// in exactly one place (AppendJSONAs), so a record prints the same bytes
// wherever it comes from.
//
// Jobs. A job id enqueued within the dedup window is enqueued once; a later
// enqueue of it is a no-op reported as Duplicate. EnqueueBatch sends a
// batch of jobs in chunks, each through one script, with the same outcome
// for each job as one Enqueue after another (Enqueue is a batch of one).
// Every job is checked and every missing id minted before the first chunk
// goes, so bad input enqueues nothing; a chunk whose reply was lost is sent
// again with the same ids, and the jobs of it that had landed come back
// Duplicate instead of being enqueued twice.
//
// # Connecting
//
// Connect takes a URL: redis://[user[:password]@]host[:port][,host[:port]…][/db]
// with options such as ?timeout=10s&dial_timeout=5s, or rediss:// for TLS
// (see Endpoint). Several hosts are seeds: a Cluster is discovered from any
// of them. The client (rueidis, chosen by the benchmark in
// docs/BENCHMARKS.md) reconnects by itself and pipelines concurrent calls.
//
// # Keys
//
// All keys of queue Q share the hashtag {Q}; every script touches keys of
// one queue only, so all of this works on a Cluster (the seam cache, lease
// and archived set are package archive's keys, listed here for the whole
// layout):
//
//	emq:{Q}:stream:S            stream S
//	emq:{Q}:stream:S:archived   seam cache of S: hash w (EVT_…), xid, lsn
//	emq:{Q}:stream:S:lease      archive driver's lease on S (value: fencing token)
//	emq:{Q}:stream:S:lease:seq  counter the fencing tokens are drawn from
//	emq:{Q}:archived            set of the archived streams of Q
//	emq:{Q}:lane:L              lane L, a capped stream; each entry starts
//	                            with prev, the id of the entry before it
//	emq:{Q}:jobs                job stream, one consumer group
//	emq:{Q}:jobs:dead           dead letters, a stream
//	emq:{Q}:jobs:delayed        delayed jobs, sorted set by due time (ms)
//	emq:{Q}:jobs:ids            recent job ids (dedup), sorted set by expiry
//	emq:{Q}:jobs:digests        digest of each recent job id's fields, hash
//	                            (the same id with other fields: a conflict)
//	emq:{Q}:stream:O            with JobOptions.Outcomes = O: the outcome
//	                            of every delivery that ended (jobs_lua.go),
//	                            a stream like any other
//	emq:{vol.V}:lane:lsn        LSN lane of volume V
//
// The seam cache is a cache: the archive volume holds the truth. ScanKeys
// and SetMembers walk the keys of every master and a set's members with
// SCAN and SSCAN in bounded steps (archive.ArchivedStreams lists the
// emq:{Q}:archived sets with them).
package mq
