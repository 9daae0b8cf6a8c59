package archive

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// ErrBadSeam: the seam cache hash holds values that are not a seam.
var ErrBadSeam = errors.New("malformed seam cache")

// Seam is where a stream's archive ends and its live tail begins: the
// watermark W (the highest archived id) and the volume LSN that made W
// durable.
type Seam struct {
	W   xid.ID // the watermark: the highest archived id
	LSN uint64 // the archive volume's LSN that made W durable
}

// PutArchived writes the seam cache of stream s of queue q, the hash
// emq:{q}:stream:s:archived (SeamKey) with fields w (W as EVT_… when W has
// a branded id, else W's Redis id again), xid (W's Redis id, the truth) and
// lsn (decimal), and registers s in emq:{q}:archived
// (mq.ArchivedSetKey), in one atomic step. Any Redis client can read the
// hash to learn where the live tail begins; it is a cache: the truth stays
// in the archive volume, and the archive overwrites the cache after each
// fold.
func PutArchived(ctx context.Context, live Live, ref names.StreamRef, seam Seam) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	set, member := mq.ArchivedRegistry(ref)
	keys := []string{SeamKey(ref), set}
	args := []string{member, formatID(seam.W), seam.W.String(), strconv.FormatUint(seam.LSN, 10)}
	if err := live.Run(ctx, scriptSeam, keys, args).Err(); err != nil {
		return fmt.Errorf("write seam cache of %s: %w", where(ref), err)
	}
	return nil
}

// GetArchived reads the seam cache of stream s of queue q. ok is false when
// there is none. Fields that do not form a seam (xid not a Redis id, w not
// xid's EVT form or, for an id without one, not xid itself, lsn not a
// number) fail with ErrBadSeam.
func GetArchived(ctx context.Context, live Live, ref names.StreamRef) (seam Seam, ok bool, err error) {
	if err := checkRef(ref); err != nil {
		return Seam{}, false, err
	}
	key := SeamKey(ref)
	m, err := live.HGetAll(ctx, key)
	if err != nil {
		return Seam{}, false, fmt.Errorf("read seam cache %s: %w", key, err)
	}
	if len(m) == 0 {
		return Seam{}, false, nil
	}
	return parseSeam(key, m)
}

func parseSeam(key string, m map[string]string) (Seam, bool, error) {
	w, err := xid.Parse(m["xid"])
	if err != nil {
		return Seam{}, false, fmt.Errorf("seam cache %s: xid: %w: %w", key, ErrBadSeam, err)
	}
	if m["w"] != formatID(w) {
		return Seam{}, false, fmt.Errorf("seam cache %s: w %q is not the id of xid %s (%s): %w",
			key, clip(m["w"]), w, formatID(w), ErrBadSeam)
	}
	lsn, err := strconv.ParseUint(m["lsn"], 10, 64)
	if err != nil {
		return Seam{}, false, fmt.Errorf("seam cache %s: lsn %q: %w", key, clip(m["lsn"]), ErrBadSeam)
	}
	return Seam{W: w, LSN: lsn}, true, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// RegisterArchived adds stream s to the archived streams of queue q. From
// then on mq's TrimMinID and its Retention driver refuse to trim it.
func RegisterArchived(ctx context.Context, live Live, ref names.StreamRef) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	set, member := mq.ArchivedRegistry(ref)
	if err := live.SAdd(ctx, set, member); err != nil {
		return fmt.Errorf("register %s as archived: %w", where(ref), err)
	}
	return nil
}

// IsArchived reports whether stream s is registered as archived in queue q.
func IsArchived(ctx context.Context, live Live, ref names.StreamRef) (bool, error) {
	if err := checkRef(ref); err != nil {
		return false, err
	}
	set, member := mq.ArchivedRegistry(ref)
	ok, err := live.SIsMember(ctx, set, member)
	if err != nil {
		return false, fmt.Errorf("is %s archived: %w", where(ref), err)
	}
	return ok, nil
}

// dropArchived deletes the seam cache of stream s of queue q if its W is
// still w (the stream stays registered as archived). It is for an archive
// volume that a confirmed reset emptied: a cache naming folds that no
// longer exist anywhere would make every read and cycle refuse the volume
// as behind it. It reports whether it deleted the cache.
func dropArchived(ctx context.Context, live Live, ref names.StreamRef, w xid.ID) (bool, error) {
	if err := checkRef(ref); err != nil {
		return false, err
	}
	n, err := live.Run(ctx, scriptSeamDrop, []string{SeamKey(ref)}, []string{formatID(w)}).Int()
	if err != nil {
		return false, fmt.Errorf("drop seam cache of %s: %w", where(ref), err)
	}
	return n == 1, nil
}

// ArchivedStreams yields every stream registered as archived: the members
// of every set emq:{Q}:archived (mq.ArchivedSetKey), then the key streams,
// members of every emq:{T}:archived-keys (archivedKeys), found with SCAN on
// each master (every master of a Cluster; replicas are skipped), each set
// read with SSCAN (mq.Client.ScanKeys and SetMembers: no round trip asks
// more than a bounded number of keys or members of the server, so a large
// keyspace or set never blocks it, and the caller can stop at any time). A
// key that looks like such a set but does not name a valid queue
// (emq:{a:b}:archived), and a member that is not a valid stream name (or
// whose archive volume name would not be valid), are skipped, not errors:
// the names come from Redis, so they are checked here. Each stream is yielded once; one registered or
// removed while the scan runs may or may not be yielded (SCAN guarantees
// only the keys that exist throughout). A failed round trip yields its
// error and ends the iteration.
func ArchivedStreams(ctx context.Context, live Live) iter.Seq2[names.StreamRef, error] {
	return func(yield func(names.StreamRef, error) bool) {
		seen := map[names.StreamRef]bool{}
		for key, err := range live.ScanKeys(ctx, mq.ArchivedSetPattern, "set") {
			if err != nil {
				yield(names.StreamRef{}, fmt.Errorf("scan for archived streams: %w", err))
				return
			}
			qs, ok := strings.CutPrefix(key, "emq:{")
			if qs, ok = strings.CutSuffix(qs, "}:archived"); !ok {
				continue
			}
			q, err := names.ParseQueue(qs)
			if err != nil {
				continue
			}
			for s, err := range live.SetMembers(ctx, key) {
				if err != nil {
					yield(names.StreamRef{}, fmt.Errorf("read %s: %w", key, err))
					return
				}
				st, err := names.ParseStream(s)
				if err != nil {
					continue
				}
				ref, err := names.NewStreamRef(q, st)
				if err != nil || seen[ref] {
					continue
				}
				seen[ref] = true
				if !yield(ref, nil) {
					return
				}
			}
		}
		archivedKeys(ctx, live, seen, yield)
	}
}

// archivedKeys yields the key streams registered as archived: the members
// K of every set emq:{T}:archived-keys (mq.ArchivedKeysPattern) that is
// the registry of K's own slot tag (mq.ArchivedRegistry), so a set the
// pattern matches by accident, or a member in the wrong set, is skipped,
// as is a member that is not a valid key. It reports whether to go on.
func archivedKeys(ctx context.Context, live Live, seen map[names.StreamRef]bool, yield func(names.StreamRef, error) bool) bool {
	for key, err := range live.ScanKeys(ctx, mq.ArchivedKeysPattern, "set") {
		if err != nil {
			yield(names.StreamRef{}, fmt.Errorf("scan for archived stream keys: %w", err))
			return false
		}
		for m, err := range live.SetMembers(ctx, key) {
			if err != nil {
				yield(names.StreamRef{}, fmt.Errorf("read %s: %w", key, err))
				return false
			}
			ref, err := names.ParseKeyRef(m)
			if err != nil || seen[ref] {
				continue
			}
			if set, _ := mq.ArchivedRegistry(ref); set != key {
				continue
			}
			seen[ref] = true
			if !yield(ref, nil) {
				return false
			}
		}
	}
	return true
}
