package archive

import (
	"bytes"
	"context"

	"github.com/echostore/echostore/names"
)

// ArchivedKey reports whether key is the Redis key of an archived stream,
// and which: the stream of a queue, emq:{Q}:stream:S (mq.StreamKey),
// registered in emq:{Q}:archived; or a stream at any key K outside emq:
// (names.ParseKeyRef) registered in its tag's registry of archived keys,
// emq:{T}:archived-keys (IsArchived). It costs one SISMEMBER for either and
// nothing for any other key. With queues only, a key outside emq: is not
// looked up (for a caller that archives queue streams alone).
func ArchivedKey(ctx context.Context, live Live, key []byte, queuesOnly bool) (names.StreamRef, bool, error) {
	var ref names.StreamRef
	if bytes.HasPrefix(key, []byte(names.ReservedKeyPrefix)) {
		var ok bool
		if ref, ok = queueStreamKey(key); !ok {
			return names.StreamRef{}, false, nil
		}
	} else {
		if queuesOnly || len(key) == 0 || len(key) > names.MaxKeyLen {
			return names.StreamRef{}, false, nil
		}
		var err error
		if ref, err = names.ParseKeyRef(string(key)); err != nil {
			return names.StreamRef{}, false, nil
		}
	}
	arch, err := IsArchived(ctx, live, ref)
	if err != nil {
		return names.StreamRef{}, false, err
	}
	return ref, arch, nil
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
