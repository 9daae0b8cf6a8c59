package main

import (
	"bufio"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/spf13/cobra"
)

// printRecords prints records as JSON lines; entries that are not branded
// records are listed on stderr and make the command fail at the end.
func printRecords(g *globals, ref names.StreamRef, seq iter.Seq2[mq.Record, error]) error {
	out := bufio.NewWriter(g.stdout)
	var buf []byte
	foreign := 0
	for rec, err := range seq {
		var ee *mq.EntryError
		switch {
		case errors.As(err, &ee):
			foreign++
			fmt.Fprintf(g.stderr, "echostore: skipped %v\n", ee)
			continue
		case errors.Is(err, archive.ErrNoVolume), errors.Is(err, archive.ErrVolumeBehind):
			out.Flush()
			return fmt.Errorf("%w; give the --remote the stream's archive is pushed to (archive cycle --trim-after remote pushes it), or run the read on the node that folds it", err)
		case errors.Is(err, graft.ErrVolumeNotFound), errors.Is(err, client.ErrNotFound):
			out.Flush()
			return fmt.Errorf("%w; run `echostore archive cycle` there, `echostore volume pull %s` to fetch it, or point --data at the node that folds it", err, ref.Volume())
		case err != nil:
			out.Flush()
			return err
		}
		buf = append(echostore.AppendRecordJSON(buf[:0], ref, rec), '\n')
		if _, err := out.Write(buf); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if foreign > 0 {
		return fmt.Errorf("%d entries of the stream are not branded records (listed above); they were written by another client", foreign)
	}
	return nil
}

func newArchiveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "Fold archived streams into their volumes and trim them; show where the seam is",
	}
	cmd.AddCommand(newArchiveCycleCmd(g), newArchiveStatusCmd(g), newArchiveDeleteCmd(g))
	return cmd
}

func newArchiveCycleCmd(g *globals) *cobra.Command {
	var (
		keep      int64
		maxAge    time.Duration
		trimAfter string
		retain    archive.Retention
		groups    archive.GroupLimits
		stalled   string
		key       string
	)
	cmd := &cobra.Command{
		Use:   "cycle (QUEUE STREAM | --key K) --keep N [--max-age D] [--trim-after local|remote] [--retain-count N] [--retain-age D] [--max-live N] [--max-hold D] [--stalled-groups hold|archive]",
		Short: `Run one fold-then-trim cycle; print {"folded":…,"trimmed":…,"watermark":…[,"dropped":…]}`,
		Long: `Fold the records of the stream outside the window (all but the --keep newest,
and, with --max-age, also those older than it) into the archive volume archive.Q.S
of --data, in one commit per chunk, then trim the live stream by MINID up to the
watermark, never past a consumer group's pending or undelivered entries. With
--trim-after remote the cycle trims only what a push to the remote covers.
The stream is registered as archived: trim-only retention leaves it alone.

--retain-count N and --retain-age D set the archive's retention horizon: after
folding, the archived records beyond the newest N, or minted more than D ago,
are dropped, oldest first (both limits apply; the watermark does not move).
"dropped" is how many this cycle dropped (left out when none).

A consumer group that holds back the trim (its oldest pending or first
undelivered entry is below the cut) by more than --max-live records (default
10 × --keep) or with an oldest held entry older than --max-hold (default
--max-age + 1h) is stalled: "stalled_groups" lists such groups (left out when
none). --stalled-groups hold (the default) keeps their entries live;
--stalled-groups archive trims past them, never past the watermark (they are
archived; their pending entries lists keep the ids). A negative --max-live or
--max-hold turns that limit off (docs/ARCHIVE.md, Consumer groups).

The cycle first reads the head of the remote (--remote, default
file://<data>/remote): if the remote is ahead of the local volume
(another node folded and pushed, and this one takes over the stream's lease) it
pulls the volume before folding; if the local volume is missing and the remote
holds a log of that name while the stream has no seam cache (the history of a
deleted stream) it refuses and says how to delete that log.

With --key K the stream is the application's own key K (its archive volume is
archive-key.… , docs/FORMAT.md); producers keep XADDing to K. A cycle of a
stream whose key does not exist and that was never archived does nothing,
registers nothing, and fails (a mistyped key or name).`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, _, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("keep") && keep < 1 {
				return usageError("--keep %d: want 1 or more (the newest records to leave live); for an age window alone give --max-age and no --keep; nothing was done", keep)
			}
			if maxAge < 0 {
				return usageError("--max-age %v: must not be negative; nothing was done", maxAge)
			}
			if keep == 0 && maxAge == 0 {
				return usageError("give --keep N (the records to leave live) and/or --max-age D; nothing was done")
			}
			ta, err := archive.ParseTrimAfter(trimAfter)
			if err != nil {
				return exitError{exitUsage, fmt.Errorf("--%w", err)}
			}
			if err := retain.Validate(); err != nil {
				return exitError{exitUsage, fmt.Errorf("--retain-age: %w", err)}
			}
			if groups.Stalled, err = archive.ParseStalledPolicy(stalled); err != nil {
				return usageError("--stalled-groups %q: want hold or archive; nothing was done", stalled)
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisRequired)
			if err != nil {
				return err
			}
			defer b.close()
			res, err := b.Cycle(ctx, ref, echostore.CycleOptions{Window: archive.Window{Keep: keep, MaxAge: maxAge, Groups: groups}, TrimAfter: ta, Retain: retain})
			if err != nil {
				return fmt.Errorf("%w; nothing unfolded was trimmed: fix the cause and run the cycle again", err)
			}
			return printJSON(g.stdout, res)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&keep, "keep", 0, "leave the N newest records live")
	f.DurationVar(&maxAge, "max-age", 0, "also fold and trim records older than this (e.g. 24h)")
	f.StringVar(&trimAfter, "trim-after", "local", "trim after the fold is durable locally (local) or pushed (remote)")
	f.Uint64Var(&retain.Count, "retain-count", 0, "keep at most the N newest archived records, dropping older ones (0: no limit)")
	f.DurationVar(&retain.MaxAge, "retain-age", 0, "drop archived records minted longer ago than this (e.g. 720h; 0: no limit)")
	f.Int64Var(&groups.MaxLive, "max-live", 0, "a consumer group holding back more records than this beyond the window is stalled (0: 10 × --keep; negative: no limit)")
	f.DurationVar(&groups.MaxHold, "max-hold", 0, "a consumer group holding back an entry older than this is stalled (0: --max-age + 1h; negative: no limit)")
	f.StringVar(&stalled, "stalled-groups", "hold", "what to do about a stalled consumer group: hold (keep its entries live) or archive (trim past them)")
	f.StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}

func newArchiveStatusCmd(g *globals) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "status (QUEUE STREAM | --key K)",
		Short: `Print {"watermark":…,"archived":…,"live":…,"volume":…,"lsn":…[,"low":…,"retained":…]}`,
		Long: `Print where the seam of the stream is: the watermark W (the newest archived id,
read from the volume, which is the truth), the number of archived records ever
folded, the number of entries in the live stream, the archive volume and its
LSN. Once retention (archive cycle --retain-count/--retain-age) has dropped
archived records, "low" is the sequence number of the first archived record kept
and "retained" how many are still readable (archived − low); before that both
are left out (low 0, retained = archived).`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, _, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			return withBackend(cmd, g, redisRequired, func(b backend) error {
				st, err := b.Status(cmd.Context(), ref)
				if err != nil {
					if errors.Is(err, archive.ErrNoVolume) || errors.Is(err, client.ErrConflict) {
						return fmt.Errorf("%w; give --remote, or run status on the node that folds it", err)
					}
					return err
				}
				return printJSON(g.stdout, st)
			})
		},
	}
	cmd.Flags().StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}

// confirmDeleteFlag is the flag archive delete insists on.
const confirmDeleteFlag = echostore.DeleteConfirm

func newArchiveDeleteCmd(g *globals) *cobra.Command {
	var yes bool
	var key string
	cmd := &cobra.Command{
		Use:   "delete (QUEUE STREAM | --key K) --" + confirmDeleteFlag,
		Short: `Delete an archived stream and its archive in --data; print {"deleted":…,"volume":…,…}`,
		Long: `Delete the archived stream: first its archive volume archive.Q.S in --data,
then, under the stream's archive lease (a running cycle is waited for), the live
stream, its seam cache, its entry in the queue's archived set and the lease. The
counter of lease tokens is kept, so fencing tokens keep increasing if the stream
is archived again. Without --` + confirmDeleteFlag + ` nothing is deleted.

The volume's log in the remote (--remote, default file://<data>/remote) is
deleted too (its commit objects newest first, then its checkpoints and
segments); "remote_objects" counts them. A log in another remote is kept, and
a later cycle with that remote refuses to start a new volume archive.Q.S over
it until a delete with that remote runs. Not deleted: copies of the volume in
other nodes' data dirs.

While echostore serve holds --data, the delete goes through it: serve deletes
with its own remote and stops cycling the stream (docs/SERVE.md).

With --key K the stream deleted is the key K itself, with its metadata keys.`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, _, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			if !yes {
				return fmt.Errorf("archive delete %s deletes the stream and its whole archived history (%s); nothing was deleted: add --%s to confirm",
					ref, ref.Volume(), confirmDeleteFlag)
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisRequired)
			if err != nil {
				return err
			}
			defer b.close()
			res, err := b.Delete(ctx, ref)
			if err != nil {
				return err
			}
			return printJSON(g.stdout, res)
		},
	}
	cmd.Flags().BoolVar(&yes, confirmDeleteFlag, false, "confirm: delete the stream and its archived history")
	cmd.Flags().StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}
