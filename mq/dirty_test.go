package mq

import (
	"slices"
	"testing"
)

// TestAppendMarksArchivedStreamsDirty: an append (one record, or a batch)
// to a stream registered as archived adds the stream's key to its slot's
// change feed in the append's script; an append to a stream not
// registered leaves the feed alone.
func TestAppendMarksArchivedStreamsDirty(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		q := queueName(t)
		arch, plain := mustRef(t, q, "arch"), mustRef(t, q, "plain")
		set, member := ArchivedRegistry(arch)
		if err := c.rdb.Do(ctx, c.rdb.B().Sadd().Key(set).Member(member).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		dirty := func() []string {
			t.Helper()
			got, err := c.rdb.Do(ctx, c.rdb.B().Smembers().Key(DirtyOf(arch)).Build()).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			return got
		}
		if _, err := c.Append(ctx, plain, fields("n", "1")...); err != nil {
			t.Fatal(err)
		}
		if got := dirty(); len(got) != 0 {
			t.Fatalf("after an append to a stream not archived, the feed holds %q", got)
		}
		if _, err := c.Append(ctx, arch, fields("n", "1")...); err != nil {
			t.Fatal(err)
		}
		if got := dirty(); !slices.Equal(got, []string{StreamKey(arch)}) {
			t.Fatalf("after an append to an archived stream, the feed holds %q, want %q", got, StreamKey(arch))
		}
		if err := c.rdb.Do(ctx, c.rdb.B().Del().Key(DirtyOf(arch)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AppendBatch(ctx, arch, [][]Field{fields("n", "2"), fields("n", "3")}); err != nil {
			t.Fatal(err)
		}
		if got := dirty(); !slices.Equal(got, []string{StreamKey(arch)}) {
			t.Fatalf("after a batch appended to an archived stream, the feed holds %q, want %q", got, StreamKey(arch))
		}
	})
}
