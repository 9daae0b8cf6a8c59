package resp

import (
	"context"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// QueueLookup is the Lookup of echostore's queue streams over a Redis
// client: the key emq:{Q}:stream:S (mq.StreamKey) is archived when S is
// registered in emq:{Q}:archived (archive.IsArchived). Any other key is
// not.
type QueueLookup struct {
	// Live is the Redis the streams are in (a *mq.Client).
	Live archive.Live
}

// Archived implements Lookup: one SISMEMBER for a key of the form
// emq:{Q}:stream:S with valid names, nothing for any other key.
func (l QueueLookup) Archived(ctx context.Context, key []byte) (names.StreamRef, bool, error) {
	return archive.ArchivedKey(ctx, l.Live, key, true)
}

// Watermark implements Watermarks: W from the seam cache of ref
// (archive.GetArchived).
func (l QueueLookup) Watermark(ctx context.Context, ref names.StreamRef) (xid.ID, bool, error) {
	return watermark(ctx, l.Live, ref)
}

func watermark(ctx context.Context, live archive.Live, ref names.StreamRef) (xid.ID, bool, error) {
	seam, ok, err := archive.GetArchived(ctx, live, ref)
	if err != nil || !ok {
		return xid.ID{}, false, err
	}
	return seam.W, true, nil
}

// StreamLookup is the Lookup of every archived stream over a Redis client
// (archive.ArchivedKey): the key of a stream of a queue, emq:{Q}:stream:S,
// as QueueLookup finds it, and a stream at any key K (names.ParseKey: a
// key outside emq:) registered in its tag's registry of archived keys,
// emq:{T}:archived-keys: one SISMEMBER for either. A node is the same
// lookup over its own Redis (echostore.Node.Archived).
type StreamLookup struct {
	// Live is the Redis the streams are in (a *mq.Client).
	Live archive.Live
}

// Archived implements Lookup.
func (l StreamLookup) Archived(ctx context.Context, key []byte) (names.StreamRef, bool, error) {
	return archive.ArchivedKey(ctx, l.Live, key, false)
}

// Watermark implements Watermarks: W from the seam cache of ref, a queue's
// stream or a key stream (archive.GetArchived).
func (l StreamLookup) Watermark(ctx context.Context, ref names.StreamRef) (xid.ID, bool, error) {
	return watermark(ctx, l.Live, ref)
}
