package main

import (
	"context"
	"fmt"
	"time"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/names"
	"github.com/spf13/cobra"
)

// remoteLogCmd is a volume command that works on the volume's remote log
// alone (no data dir): it opens --remote, runs op on the log and prints op's
// result as JSON.
func remoteLogCmd(g *globals, use, short string, op func(ctx context.Context, volume string, l *remote.Log) (any, error)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := names.Check(names.KindVolume, args[0]); err != nil {
				return err
			}
			rs, err := remote.Open(ctx, g.remoteURL(), drivers.All()...)
			if err != nil {
				return fmt.Errorf("remote %s: %w; check --remote (file:///dir or s3://bucket?endpoint=…)", g.remoteShown(), err)
			}
			defer rs.Close()
			l, err := remote.NewLog(rs, args[0])
			if err != nil {
				return err
			}
			head, err := l.Head(ctx)
			if err != nil {
				return fmt.Errorf("volume %s: remote %s: %w", args[0], g.remoteShown(), err)
			}
			if head == 0 {
				return fmt.Errorf("volume %q has no commits on the remote %s: check the name and --remote", args[0], g.remoteShown())
			}
			out, err := op(ctx, args[0], l)
			if err != nil {
				return fmt.Errorf("volume %s: %w", args[0], err)
			}
			return writeJSON(g, out)
		},
	}
}

// newVolumeCheckpointCmd appends a checkpoint commit to a volume's remote
// log, so that a fresh follower starts there and GC can collect below it.
func newVolumeCheckpointCmd(g *globals) *cobra.Command {
	return remoteLogCmd(g, "checkpoint VOLUME",
		"Append a checkpoint commit to the volume's remote log (fresh followers start at the newest)",
		func(ctx context.Context, volume string, l *remote.Log) (any, error) {
			e, err := l.WriteCheckpoint(ctx)
			if err != nil {
				return nil, err
			}
			return map[string]any{"volume": volume, "checkpoint_lsn": e.LSN()}, nil
		})
}

// newVolumeGCCmd deletes remote segments that no commit at or after the
// oldest retained checkpoint references.
func newVolumeGCCmd(g *globals) *cobra.Command {
	var opts remote.GCOptions
	cmd := remoteLogCmd(g, "gc VOLUME",
		"Delete the remote segments no retained checkpoint or later commit references",
		func(ctx context.Context, volume string, l *remote.Log) (any, error) {
			res, err := l.GC(ctx, opts)
			if err != nil {
				return nil, err
			}
			return map[string]any{
				"volume":           volume,
				"horizon":          res.Horizon,
				"segments_kept":    res.SegmentsKept,
				"segments_deleted": res.SegmentsDeleted,
				"log_trimmed":      res.LogTrimmed,
				"markers_deleted":  res.MarkersDeleted,
			}, nil
		})
	cmd.Flags().IntVar(&opts.KeepCheckpoints, "keep-checkpoints", 1, "how many of the newest checkpoints to retain; the oldest retained is the horizon")
	cmd.Flags().DurationVar(&opts.MinAge, "min-age", time.Hour, "spare unreferenced segments younger than this (a commit may be in flight)")
	cmd.Flags().BoolVar(&opts.TrimLog, "trim-log", false, "also replace log entries below the horizon with tombstones (followers below it restart from the checkpoint)")
	return cmd
}
