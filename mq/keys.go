package mq

import (
	"fmt"

	"github.com/echostore/echostore/names"
)

// Redis keys. Every key of a queue Q carries the hashtag {Q}, so all keys a
// script touches hash to one Cluster slot. Names cannot contain '{', '}' or
// ':' (names.Check), so no two of these keys collide. The keys marked
// (archive) are package archive's, which builds them on StreamKey and
// ArchivedSetKey and reads and writes them with its own scripts (Script);
// mq's trim and retention only read the archived set, to refuse its streams.
//
//	emq:{Q}:stream:S            the stream S (a Redis stream)
//	emq:{Q}:stream:S:archived   (archive) the seam cache of S (hash: w, xid, lsn)
//	emq:{Q}:stream:S:lease      (archive) the archive driver's lease on S (string: fencing token)
//	emq:{Q}:stream:S:lease:seq  (archive) the counter fencing tokens are drawn from
//	emq:{Q}:archived            the set of archived streams of Q (archive writes it)
//	emq:{Q}:lane:L              lane L (a capped stream)
//	emq:{Q}:jobs                the job stream (one consumer group)
//	emq:{Q}:jobs:dead           dead letters (a stream)
//	emq:{Q}:jobs:delayed        jobs waiting for their time (sorted set)
//	emq:{Q}:jobs:ids            job ids seen lately, for idempotent enqueue
//	                            (sorted set, score = when the id is forgotten)
//	emq:{vol.V}:lane:lsn        the LSN lane of volume V

// StreamKey returns the key of stream s of queue q: emq:{q}:stream:s.
func StreamKey(q, s string) string { return "emq:{" + q + "}:stream:" + s }

// ArchivedSetKey returns the key of the set of archived streams of q:
// emq:{q}:archived.
func ArchivedSetKey(q string) string { return "emq:{" + q + "}:archived" }

// LaneKey returns the key of lane l under hashtag tag: emq:{tag}:lane:l. A
// queue's lanes use the queue name as tag; a volume's use "vol." + volume.
func LaneKey(tag, l string) string { return "emq:{" + tag + "}:lane:" + l }

// JobsKey returns the key of the job stream of q: emq:{q}:jobs.
func JobsKey(q string) string { return "emq:{" + q + "}:jobs" }

// DeadKey returns the key of the dead-letter stream of q: emq:{q}:jobs:dead.
func DeadKey(q string) string { return JobsKey(q) + ":dead" }

// DelayedKey returns the key of the delayed jobs of q: emq:{q}:jobs:delayed.
func DelayedKey(q string) string { return JobsKey(q) + ":delayed" }

// JobIDsKey returns the key of the recently enqueued job ids of q:
// emq:{q}:jobs:ids.
func JobIDsKey(q string) string { return JobsKey(q) + ":ids" }

// JobDigestsKey returns the key of the digests of the fields of the job ids
// in JobIDsKey(q), by id: emq:{q}:jobs:digests. An id enqueued again with
// other fields is a conflict, not a duplicate.
func JobDigestsKey(q string) string { return JobsKey(q) + ":digests" }

// checkQS checks a queue and a stream name.
func checkQS(q, s string) error {
	if err := names.Check(names.KindQueue, q); err != nil {
		return err
	}
	return names.Check(names.KindStream, s)
}

// checkQ checks a queue name.
func checkQ(q string) error { return names.Check(names.KindQueue, q) }

// where names a stream in error messages.
func where(q, s string) string { return fmt.Sprintf("stream %s/%s", q, s) }
