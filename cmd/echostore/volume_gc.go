package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/names"
)

// newVolumeCheckpointCmd appends a checkpoint commit to a volume's remote
// log, so that a fresh follower starts there and GC can collect below it.
func newVolumeCheckpointCmd(g *globals) *cobra.Command {
	return volumeCmd(g, "checkpoint VOLUME",
		"Append a checkpoint commit to the volume's remote log (fresh followers start at the newest)", redisNone,
		func(ctx context.Context, b backend, v names.Volume) (any, error) { return b.Checkpoint(ctx, v) })
}

// newVolumeGCCmd deletes remote segments that no commit at or after the
// oldest retained checkpoint references.
func newVolumeGCCmd(g *globals) *cobra.Command {
	var opts remote.GCOptions
	cmd := volumeCmd(g, "gc VOLUME",
		"Delete the remote segments no retained checkpoint or later commit references", redisNone,
		func(ctx context.Context, b backend, v names.Volume) (any, error) { return b.GC(ctx, v, opts) })
	cmd.Flags().IntVar(&opts.KeepCheckpoints, "keep-checkpoints", 1, "how many of the newest checkpoints to retain; the oldest retained is the horizon")
	cmd.Flags().DurationVar(&opts.MinAge, "min-age", time.Hour, "spare unreferenced segments younger than this (a commit may be in flight)")
	cmd.Flags().BoolVar(&opts.TrimLog, "trim-log", false, "also replace log entries below the horizon with tombstones (followers below it restart from the checkpoint)")
	return cmd
}
