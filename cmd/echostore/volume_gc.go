package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
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
// oldest retained checkpoint references, and reports what it removed (as
// JSON, or with --text as a table of objects and bytes by kind).
func newVolumeGCCmd(g *globals) *cobra.Command {
	var opts remote.GCOptions
	var text bool
	cmd := &cobra.Command{
		Use:   "gc VOLUME",
		Short: "Delete the remote segments no retained checkpoint or later commit references, and report what was removed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := names.ParseVolume(args[0])
			if err != nil {
				return err
			}
			b, err := open(ctx, g, redisNone)
			if err != nil {
				return err
			}
			defer b.close()
			res, err := b.GC(ctx, v, opts)
			if err != nil {
				return volumeError(v, err)
			}
			if text {
				return printGCText(g.stdout, res)
			}
			return printJSON(g.stdout, res)
		},
	}
	cmd.Flags().IntVar(&opts.KeepCheckpoints, "keep-checkpoints", 1, "how many of the newest checkpoints to retain; the oldest retained is the horizon")
	cmd.Flags().DurationVar(&opts.MinAge, "min-age", time.Hour, "spare unreferenced segments younger than this (a commit may be in flight)")
	cmd.Flags().DurationVar(&opts.Grace, "grace", 0, "take as the horizon only a checkpoint at least this old (readers that pulled within it fault no deleted object)")
	cmd.Flags().BoolVar(&opts.TrimLog, "trim-log", false, "also replace log entries below the horizon with tombstones (followers below it restart from the checkpoint)")
	cmd.Flags().BoolVar(&text, "text", false, "print a table of the objects and bytes removed by kind instead of JSON")
	return cmd
}

// printGCText prints a GC's result as a table: objects and bytes removed
// per kind, then the totals.
func printGCText(w io.Writer, r echostore.GCResult) error {
	if r.Horizon == 0 {
		if _, err := fmt.Fprintf(w, "volume %s: no checkpoint old enough to be the horizon; nothing removed\n", r.Volume); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintf(w, "volume %s: horizon LSN %d, %d segments kept\n", r.Volume, r.Horizon, r.SegmentsKept); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "removed\tobjects\tbytes\t")
	fmt.Fprintf(tw, "segments\t%d\t%d\t\n", r.SegmentsDeleted, r.SegmentBytes)
	fmt.Fprintf(tw, "commits (tombstoned)\t%d\t%d\t\n", r.LogTrimmed, r.LogBytes)
	fmt.Fprintf(tw, "checkpoint markers\t%d\t%d\t\n", r.MarkersDeleted, r.MarkerBytes)
	fmt.Fprintf(tw, "total\t%d\t%d\t\n", r.ObjectsRemoved, r.BytesRemoved)
	return tw.Flush()
}
