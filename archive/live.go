package archive

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Live is the live tier as the archive uses it: the stream reads of the
// merge-read and the fold, the id raise after a fold, the window cut that
// retention computes, the scripts of the archive's own keys (its lease,
// fenced trim, seam cache and delete; see scripts.go), run with Run, and
// the plain commands that read the seam cache and read and write the
// archived set. A *mq.Client is one.
type Live interface {
	// Read yields the records of stream s of queue q with ids in
	// [from, to] (mq.Client.Read).
	Read(ctx context.Context, ref names.StreamRef, from, to xid.ID, count int, reverse bool) iter.Seq2[mq.Record, error]
	// NewCursor returns a cursor over the same range, read page by page
	// (mq.Client.NewCursor).
	NewCursor(ref names.StreamRef, from, to xid.ID, reverse bool) (*mq.Cursor, error)
	// Info describes stream s of queue q (mq.Client.Info).
	Info(ctx context.Context, ref names.StreamRef) (mq.StreamInfo, error)
	// SetID raises the stream's last id to id, never lowers it
	// (mq.Client.SetID).
	SetID(ctx context.Context, ref names.StreamRef, id xid.ID) (xid.ID, error)
	// WindowCut is the lowest id window w keeps live at now, computed as
	// mq's retention computes its trim point (mq.Client.WindowCut).
	WindowCut(ctx context.Context, ref names.StreamRef, w Window, now time.Time) (cut xid.ID, ok bool, err error)
	// Run runs one of the archive's scripts (mq.Client.Run).
	Run(ctx context.Context, script *mq.Script, keys, args []string) mq.Reply
	// ScanKeys yields the keys of a pattern and type on every master
	// (mq.Client.ScanKeys); SetMembers the members of a set
	// (mq.Client.SetMembers). ArchivedStreams lists with them.
	ScanKeys(ctx context.Context, pattern, typ string) iter.Seq2[string, error]
	SetMembers(ctx context.Context, key string) iter.Seq2[string, error]
	// HGetAll reads a hash (the seam cache), SIsMember and SAdd the
	// archived set (mq.Client.HGetAll, SIsMember, SAdd).
	HGetAll(ctx context.Context, key string) (map[string]string, error)
	SIsMember(ctx context.Context, key, member string) (bool, error)
	SAdd(ctx context.Context, key, member string) error
}

// present reports whether live is a live tier: neither nil nor a nil
// *mq.Client (which callers pass for "Redis is unreachable").
func present(live Live) bool {
	if c, ok := live.(*mq.Client); ok {
		return c != nil
	}
	return live != nil
}

// Keys of the archive in the live tier, beside the stream they serve
// (every one carries the queue's hashtag; the whole layout is listed in
// package mq, keys.go).

// SeamKey returns the key of the seam cache of stream s of queue q:
// emq:{q}:stream:s:archived; of a key stream K: emq:{T}:key-archived:K
// (mq.KeyMetaKey, in K's slot).
func SeamKey(ref names.StreamRef) string {
	if k, ok := ref.Key(); ok {
		return mq.KeyMetaKey(k, "key-archived")
	}
	return mq.StreamKey(ref) + ":archived"
}

// LeaseKey returns the key of the archive driver's lease on stream s of
// queue q: emq:{q}:stream:s:lease; of a key stream K: emq:{T}:key-lease:K.
// Its value is the holder's fencing token.
func LeaseKey(ref names.StreamRef) string {
	if k, ok := ref.Key(); ok {
		return mq.KeyMetaKey(k, "key-lease")
	}
	return mq.StreamKey(ref) + ":lease"
}

// LeaseSeqKey returns the key of the counter that mints fencing tokens for
// the lease on stream s: emq:{q}:stream:s:lease:seq; of a key stream K:
// emq:{T}:key-lease-seq:K. It outlives every lease, so tokens increase
// across holders.
func LeaseSeqKey(ref names.StreamRef) string {
	if k, ok := ref.Key(); ok {
		return mq.KeyMetaKey(k, "key-lease-seq")
	}
	return LeaseKey(ref) + ":seq"
}

// checkRef refuses the zero StreamRef: the names types are checked when
// made, so "no name" is all that is left to refuse.
func checkRef(ref names.StreamRef) error {
	if ref.IsZero() {
		return fmt.Errorf("no stream given: %w", names.ErrInvalid)
	}
	return nil
}

// where names a stream in error messages.
func where(ref names.StreamRef) string { return "stream " + ref.String() }
