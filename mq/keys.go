package mq

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

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
//
// A stream at any key K (names.KeyRef) is K itself; its metadata keys
// carry the slot tag T of K (KeyTag), a tag that puts them in K's Cluster
// slot, and end with K itself, so that they are one-to-one with K (T holds
// no '}', so it ends at the first '}'; the word after it holds no ':'):
//
//	K                           the stream (the application's own key)
//	emq:{T}:key-archived:K      (archive) the seam cache of K (hash: w, xid, lsn)
//	emq:{T}:key-lease:K         (archive) the archive driver's lease on K
//	emq:{T}:key-lease-seq:K     (archive) the counter of K's fencing tokens
//	emq:{T}:archived-keys       the set of archived stream keys of tag T
//	                            (archive writes it; trim and retention refuse
//	                            its members, as they refuse emq:{Q}:archived's)
//
// A stream key never starts with "emq:" (names.ParseKey), so it is never
// one of these keys, nor a key of a queue.

// StreamKey returns the key of the stream ref names: emq:{q}:stream:s for
// stream s of queue q, K itself for a key stream.
func StreamKey(ref names.StreamRef) string {
	if k, ok := ref.Key(); ok {
		return k.String()
	}
	return "emq:{" + ref.Queue().String() + "}:stream:" + ref.Stream().String()
}

// ArchivedSetKey returns the key of the set of archived streams of q:
// emq:{q}:archived.
func ArchivedSetKey(q names.Queue) string { return "emq:{" + q.String() + "}:archived" }

// ArchivedSetPattern matches the key of the set of archived streams of
// every queue (ArchivedSetKey), for SCAN MATCH.
const ArchivedSetPattern = "emq:{*}:archived"

// ArchivedKeysSetKey returns the key of the set of archived stream keys
// whose slot tag is tag (KeyTag): emq:{tag}:archived-keys.
func ArchivedKeysSetKey(tag string) string { return "emq:{" + tag + "}:archived-keys" }

// ArchivedKeysPattern matches every ArchivedKeysSetKey, for SCAN MATCH.
// A match is a registry only if it is the ArchivedKeysSetKey of its
// members' tag (a '*' also matches '}'): readers check that.
const ArchivedKeysPattern = "emq:{*}:archived-keys"

// ArchivedRegistry returns where ref is registered as archived: the set
// and the member. For stream s of queue q: emq:{q}:archived and s; for a
// key stream K: emq:{T}:archived-keys and K, in K's slot.
func ArchivedRegistry(ref names.StreamRef) (set, member string) {
	if k, ok := ref.Key(); ok {
		return ArchivedKeysSetKey(KeyTag(k)), k.String()
	}
	return ArchivedSetKey(ref.Queue()), ref.Stream().String()
}

// DirtySetKey returns the key of the change feed of the archived streams
// whose slot tag is tag (a queue's name, or KeyTag of a key stream):
// emq:{tag}:dirty, a set of stream keys. Appends through mq add an archived
// stream's key to it in the same atomic step as the chunk (the guard
// script of the append transaction, scriptAppendGuard, or scriptAppend on
// a retry); the beat of
// serve takes the keys of its streams out of it before it cycles them.
func DirtySetKey(tag string) string { return "emq:{" + tag + "}:dirty" }

// DirtyOf returns the change feed of ref's slot (DirtySetKey): the queue's,
// or the key's slot tag's.
func DirtyOf(ref names.StreamRef) string {
	if k, ok := ref.Key(); ok {
		return DirtySetKey(KeyTag(k))
	}
	return DirtySetKey(ref.Queue().String())
}

// appendScratchOf returns the scratch key of ref's slot that the append
// transaction's guard keeps a stream's last id in while the transaction
// runs (scriptAppendGuard): emq:{tag}:append-top, the tag DirtyOf's. It
// exists only inside a transaction: no other client ever sees it.
func appendScratchOf(ref names.StreamRef) string {
	return strings.TrimSuffix(DirtyOf(ref), "dirty") + "append-top"
}

// KeyMetaKey returns the metadata key of kind what ("key-archived",
// "key-lease", "key-lease-seq") of the stream at key k:
// emq:{T}:what:K, in K's Cluster slot.
func KeyMetaKey(k names.Key, what string) string {
	return "emq:{" + KeyTag(k) + "}:" + what + ":" + k.String()
}

// HashTag returns the hashtag of key by Redis Cluster's rule: the bytes
// between the first '{' and the first '}' after it, if there are any; ok
// is false when the whole key is hashed.
func HashTag(key string) (tag string, ok bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "", false
	}
	return key[i+1 : i+1+j], true
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hashtag, or of the whole key without one, modulo 16384.
func Slot(key string) uint16 {
	if t, ok := HashTag(key); ok {
		key = t
	}
	return crc16(key) & 16383
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), the CRC Redis
// Cluster hashes keys with.
func crc16(s string) uint16 {
	t := crcTable()
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ t[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable is the byte-at-a-time table of crc16, computed once; it is
// never written after.
var crcTable = sync.OnceValue(func() *[256]uint16 {
	var t [256]uint16
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return &t
})

// KeyTag returns the slot tag of stream key k: a non-empty string without
// '}' such that "{T}" hashes to k's slot, so the metadata keys of k that
// carry it share k's slot (a Lua script may touch them together, also on a
// Cluster). It is k's own hashtag if it has one; else k itself if k holds
// no '}' ("{k}" then hashes exactly as k); else (a '}' without a hashtag:
// "a}b", "{}x") the first of "slot-0", "slot-1", … whose CRC16 slot is
// k's, found deterministically (every one of the 16384 slots is reached
// before slot-MaxSlotTagSearch; mq TestKeyTagEverySlot).
func KeyTag(k names.Key) string {
	s := k.String()
	if t, ok := HashTag(s); ok {
		return t
	}
	if !strings.Contains(s, "}") {
		return s
	}
	return SlotTag(Slot(s))
}

// MaxSlotTagSearch bounds SlotTag's search; every slot is found below it.
const MaxSlotTagSearch = 1 << 20

// SlotTag returns the first of "slot-0", "slot-1", … that hashes to slot
// (mod 16384).
func SlotTag(slot uint16) string { return slotTags()[slot&16383] }

// slotTags is SlotTag of every slot, computed once (about 170,000 CRCs of
// short strings, a few milliseconds) and never written after, so that a
// key stream's every metadata key costs a lookup.
var slotTags = sync.OnceValue(func() *[16384]string {
	var t [16384]string
	left := len(t)
	for n := 0; n < MaxSlotTagSearch && left > 0; n++ {
		tag := "slot-" + strconv.Itoa(n)
		if s := crc16(tag) & 16383; t[s] == "" {
			t[s] = tag
			left--
		}
	}
	return &t
})

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
func where(ref names.StreamRef) string {
	if ref.IsKey() {
		return "stream at " + ref.String()
	}
	return "stream " + ref.String()
}
