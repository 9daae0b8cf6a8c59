package echostore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
	goredis "github.com/redis/go-redis/v9"
)

// TestLiveTail: the live side of the seam counts the entries above W
// apart from those a consumer group holds at or below it, and how far the
// newest is ahead of W; the RESP front's lookup (Archived, Watermark) and
// VolumeStatus answer from the node; a delete takes the stream out of its
// change feed.
func TestLiveTail(t *testing.T) {
	ctx := t.Context()
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	ref := streamRef(t, "tail")
	key := mq.StreamKey(ref)
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })

	if tail, err := node.LiveTail(ctx, ref, archive.State{}); err != nil || tail != (echostore.LiveTail{}) {
		t.Fatalf("LiveTail of no stream = %+v, %v; want zero", tail, err)
	}
	if _, ok, err := node.Archived(ctx, []byte(key)); ok || err != nil {
		t.Fatalf("Archived(%s) before any fold = %v, %v", key, ok, err)
	}
	appendN(t, node, ref, 10)
	if err := rdb.XGroupCreate(ctx, key, "holder", "0").Err(); err != nil { // holds every entry back from the trim
		t.Fatal(err)
	}
	res, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 2}})
	if err != nil || res.Folded != 8 || res.Trimmed != 0 {
		t.Fatalf("cycle: folded %d, trimmed %d, %v; want 8 folded and the trim held by the group", res.Folded, res.Trimmed, err)
	}
	tail, err := node.LiveTail(ctx, ref, res.State)
	if err != nil || tail.Length != 10 || tail.AboveW != 2 {
		t.Fatalf("LiveTail = %+v, %v; want 10 live, 2 above W", tail, err)
	}
	info, err := rdb.XInfoStream(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := lagOf(t, info.LastGeneratedID, res.State); tail.Lag != want {
		t.Fatalf("LiveTail lag %v, want %v", tail.Lag, want)
	}
	got, ok, err := node.Archived(ctx, []byte(key))
	if err != nil || !ok || got != ref {
		t.Fatalf("Archived(%s) = %v, %v, %v; want %s", key, got, ok, err, ref)
	}
	if _, ok, err := node.Archived(ctx, []byte("emq:{x}:jobs")); ok || err != nil {
		t.Fatalf("Archived of a key that is no stream's = %v, %v", ok, err)
	}
	if w, ok, err := node.Watermark(ctx, ref); err != nil || !ok || w != res.State.W {
		t.Fatalf("Watermark = %v, %v, %v; want %v", w, ok, err, res.State.W)
	}
	st, err := node.VolumeStatus(ctx, ref.Volume())
	if err != nil || st.LocalLSN != res.State.LSN {
		t.Fatalf("VolumeStatus = %+v, %v; want local LSN %d", st, err, res.State.LSN)
	}
	if _, err := node.VolumeStatus(ctx, streamRef(t, "none").Volume()); !errors.Is(err, graft.ErrVolumeNotFound) {
		t.Fatalf("VolumeStatus of no volume: %v, want graft.ErrVolumeNotFound", err)
	}

	appendN(t, node, ref, 1) // through the node: the key is in the change feed
	feed := mq.DirtyOf(ref)
	if keys, err := rdb.SMembers(ctx, feed).Result(); err != nil || !slices.Contains(keys, key) {
		t.Fatalf("change feed %s = %v, %v; want %s in it", feed, keys, err, key)
	}
	if _, err := node.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if keys, err := rdb.SMembers(ctx, feed).Result(); err != nil || slices.Contains(keys, key) {
		t.Fatalf("change feed %s after the delete = %v, %v; want %s out of it", feed, keys, err, key)
	}
}

// lagOf is how far the Redis id last is ahead of st's watermark.
func lagOf(t *testing.T, last string, st archive.State) time.Duration {
	t.Helper()
	id, err := xid.Parse(last)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(int64(id.Ms)-int64(st.W.Ms)) * time.Millisecond
}
