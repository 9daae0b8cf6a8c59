package mq

import (
	"fmt"

	"github.com/echostore/echostore/names"
)

// Redis keys. Every key of a queue Q carries the hashtag {Q}, so all keys a
// script touches hash to one Cluster slot. Names cannot contain '{', '}' or
// ':' (names.ParseQueue, ParseStream), so no two of these keys collide. The keys marked
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
func StreamKey(ref names.StreamRef) string {
	return "emq:{" + ref.Queue().String() + "}:stream:" + ref.Stream().String()
}

// ArchivedSetKey returns the key of the set of archived streams of q:
// emq:{q}:archived.
func ArchivedSetKey(q names.Queue) string { return "emq:{" + q.String() + "}:archived" }

// ArchivedSetPattern matches the key of the set of archived streams of
// every queue (ArchivedSetKey), for SCAN MATCH.
const ArchivedSetPattern = "emq:{*}:archived"

// LaneKey returns the key of lane l under hashtag tag: emq:{tag}:lane:l. A
// queue's lanes use the queue name as tag; a volume's use "vol." + volume.
func LaneKey(tag, l string) string { return "emq:{" + tag + "}:lane:" + l }

// JobsKey returns the key of the job stream of q: emq:{q}:jobs.
func JobsKey(q names.Queue) string { return "emq:{" + q.String() + "}:jobs" }

// DeadKey returns the key of the dead-letter stream of q: emq:{q}:jobs:dead.
func DeadKey(q names.Queue) string { return JobsKey(q) + ":dead" }

// DelayedKey returns the key of the delayed jobs of q: emq:{q}:jobs:delayed.
func DelayedKey(q names.Queue) string { return JobsKey(q) + ":delayed" }

// JobIDsKey returns the key of the recently enqueued job ids of q:
// emq:{q}:jobs:ids.
func JobIDsKey(q names.Queue) string { return JobsKey(q) + ":ids" }

// JobDigestsKey returns the key of the digests of the fields of the job ids
// in JobIDsKey(q), by id: emq:{q}:jobs:digests. An id enqueued again with
// other fields is a conflict, not a duplicate.
func JobDigestsKey(q names.Queue) string { return JobsKey(q) + ":digests" }

// checkRef refuses the zero StreamRef: the names types are checked when
// made, so "no name" is all that is left to refuse.
func checkRef(ref names.StreamRef) error {
	if ref.IsZero() {
		return fmt.Errorf("no stream given: %w", names.ErrInvalid)
	}
	return nil
}

// checkQueue refuses the zero Queue.
func checkQueue(q names.Queue) error {
	if q.IsZero() {
		return fmt.Errorf("no queue given: %w", names.ErrInvalid)
	}
	return nil
}

// where names a stream in error messages.
func where(ref names.StreamRef) string { return "stream " + ref.String() }
