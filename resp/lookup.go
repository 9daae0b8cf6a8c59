package resp

import (
	"bytes"
	"context"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// QueueLookup is the Lookup of echostore's queue streams: the key
// emq:{Q}:stream:S (mq.StreamKey) is archived when S is registered in
// emq:{Q}:archived (archive.IsArchived). Any other key is not.
type QueueLookup struct {
	// Live is the node's Redis (a *mq.Client).
	Live archive.Live
}

// Archived implements Lookup: one SISMEMBER for a key of the form
// emq:{Q}:stream:S with valid names, nothing for any other key.
func (l QueueLookup) Archived(ctx context.Context, key []byte) (names.StreamRef, bool, error) {
	ref, ok := queueStreamKey(key)
	if !ok {
		return names.StreamRef{}, false, nil
	}
	arch, err := archive.IsArchived(ctx, l.Live, ref)
	if err != nil {
		return names.StreamRef{}, false, err
	}
	return ref, arch, nil
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

// queueStreamKey parses emq:{Q}:stream:S.
func queueStreamKey(key []byte) (names.StreamRef, bool) {
	rest, ok := bytes.CutPrefix(key, []byte("emq:{"))
	if !ok {
		return names.StreamRef{}, false
	}
	q, s, ok := bytes.Cut(rest, []byte("}:stream:"))
	if !ok {
		return names.StreamRef{}, false
	}
	ref, err := names.ParseStreamRef(string(q), string(s))
	if err != nil {
		return names.StreamRef{}, false
	}
	return ref, true
}

// StreamLookup is the Lookup of every archived stream: the key of a stream
// of a queue, emq:{Q}:stream:S, as QueueLookup finds it, and a stream at
// any key K (names.ParseKey: a key outside emq:) registered in its tag's
// registry of archived keys, emq:{T}:archived-keys (archive.IsArchived of
// names.KeyRef(K)): one SISMEMBER for either.
type StreamLookup struct {
	// Live is the node's Redis (a *mq.Client).
	Live archive.Live
}

// Archived implements Lookup.
func (l StreamLookup) Archived(ctx context.Context, key []byte) (names.StreamRef, bool, error) {
	if bytes.HasPrefix(key, []byte(names.ReservedKeyPrefix)) {
		return QueueLookup(l).Archived(ctx, key)
	}
	if len(key) == 0 || len(key) > names.MaxKeyLen {
		return names.StreamRef{}, false, nil
	}
	ref, err := names.ParseKeyRef(string(key))
	if err != nil {
		return names.StreamRef{}, false, nil
	}
	arch, err := archive.IsArchived(ctx, l.Live, ref)
	if err != nil {
		return names.StreamRef{}, false, err
	}
	return ref, arch, nil
}

// Watermark implements Watermarks: W from the seam cache of ref, a queue's
// stream or a key stream (archive.GetArchived).
func (l StreamLookup) Watermark(ctx context.Context, ref names.StreamRef) (xid.ID, bool, error) {
	return watermark(ctx, l.Live, ref)
}
