package echostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// LiveTail is the live side of a stream's seam as one reading found it:
// what serve's gauges and cycle events show of it.
type LiveTail struct {
	// Length is the entries of the live stream (XINFO STREAM; 0 for a
	// stream whose key does not exist).
	Length int64
	// AboveW is how many of them the archive does not hold: those above
	// the watermark (all of them before the first fold).
	AboveW int64
	// Lag is how far the newest live entry is ahead of the watermark, by
	// the milliseconds of their ids (0 when nothing is above it).
	Lag time.Duration
}

// LiveTail reads the live side of the seam of ref against the archive
// state st (a cycle's CycleResult.State; the zero State: before any fold,
// every live entry above W). Entries at or below W stay live only while a
// consumer group holds them back, so the part it reads entry by entry is
// small.
func (n *Node) LiveTail(ctx context.Context, ref names.StreamRef, st archive.State) (LiveTail, error) {
	live, err := n.live()
	if err != nil {
		return LiveTail{}, err
	}
	info, err := live.Info(ctx, ref)
	if err != nil {
		return LiveTail{}, err
	}
	out := LiveTail{Length: info.Length, AboveW: info.Length}
	if info.Length == 0 || st.Empty() {
		return out, nil
	}
	first, err := xid.Parse(info.FirstXID)
	if err != nil {
		return LiveTail{}, fmt.Errorf("live entries of %s above W: %w", ref, err)
	}
	if last, err := xid.Parse(info.LastXID); err == nil && st.W.Less(last) {
		out.Lag = time.Duration(int64(last.Ms)-int64(st.W.Ms)) * time.Millisecond
	}
	if st.W.Less(first) {
		return out, nil
	}
	var below int64
	for _, rerr := range live.Read(ctx, ref, first, st.W, 0, false) {
		var ee *mq.EntryError
		if rerr != nil && !errors.As(rerr, &ee) {
			return LiveTail{}, rerr
		}
		below++
	}
	out.AboveW = max(info.Length-below, 0)
	return out, nil
}

// UsedMemory returns the bytes the node's Redis uses (INFO memory's
// used_memory; of a cluster, the sum over its masters).
func (n *Node) UsedMemory(ctx context.Context) (int64, error) {
	live, err := n.live()
	if err != nil {
		return 0, err
	}
	return live.UsedMemory(ctx)
}

// Archived reports whether key is the Redis key of an archived stream, and
// which (archive.ArchivedKey: a queue's stream emq:{Q}:stream:S, or a
// stream at a key outside emq: registered in its tag's emq:{T}:archived-keys;
// one SISMEMBER). It is the lookup of serve's RESP front (resp.Lookup).
func (n *Node) Archived(ctx context.Context, key []byte) (names.StreamRef, bool, error) {
	live, err := n.live()
	if err != nil {
		return names.StreamRef{}, false, err
	}
	return archive.ArchivedKey(ctx, live, key, false)
}

// Watermark returns the watermark W of the archived stream ref as its seam
// cache in Redis holds it (archive.GetArchived: one HGETALL), and false for
// a stream never archived. It is what the write rule of serve's RESP front
// checks a trim against (resp.Watermarks).
func (n *Node) Watermark(ctx context.Context, ref names.StreamRef) (xid.ID, bool, error) {
	live, err := n.live()
	if err != nil {
		return xid.ID{}, false, err
	}
	seam, ok, err := archive.GetArchived(ctx, live, ref)
	if err != nil || !ok {
		return xid.ID{}, false, err
	}
	return seam.W, true, nil
}
