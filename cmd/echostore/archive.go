package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/lane"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server"
	"github.com/spf13/cobra"
)

// graftDir is where the data dir keeps its graft store.
func graftDir(g *globals) string { return filepath.Join(g.data, "graft") }

// openGraft opens the data dir's graft store. Read-only, a data dir with no
// store yet gives a nil store and no error. A non-nil n announces every local
// commit and push on the volume's LSN lane.
func openGraft(ctx context.Context, g *globals, readOnly bool, n graft.Notifier) (*graft.Store, error) {
	st, err := graft.Open(ctx, graftDir(g), graft.Options{ReadOnly: readOnly, Logger: g.log, Notifier: n})
	switch {
	case err == nil:
		return st, nil
	case readOnly && errors.Is(err, graft.ErrNoStore):
		return nil, nil
	case errors.Is(err, graft.ErrLocked):
		return nil, fmt.Errorf("%w; another echostore process is using --data %s: stop it or run the command there", err, g.data)
	}
	return nil, fmt.Errorf("open data dir %s: %w", g.data, err)
}

// archiveVolume returns the archive volume of q/s in st, nil if there is none.
func archiveVolume(ctx context.Context, st *graft.Store, q, s string) (*graft.Volume, error) {
	ref, err := names.ParseStreamRef(q, s)
	if err != nil || st == nil {
		return nil, err
	}
	v, err := st.Volume(ctx, ref.Volume())
	if errors.Is(err, graft.ErrVolumeNotFound) {
		return nil, nil
	}
	return v, err
}

// archiveReader holds what a read of an archive volume opened: the data
// dir's graft store (read-only until a pull needs it writable) and the
// remote, if any, that a pull and the lazy page faults use.
type archiveReader struct {
	g  *globals
	st *graft.Store
	rs remote.Store
}

// openArchiveReader opens the data dir read-only and returns the archive
// volume of q/s (nil if there is none). A remote given with --remote, or the
// default file://<data>/remote if that folder exists, is attached, so that
// pages a pull left in the remote are fetched on first read.
func openArchiveReader(ctx context.Context, g *globals, q, s string) (*archiveReader, *graft.Volume, error) {
	r := &archiveReader{g: g}
	st, err := openGraft(ctx, g, true, nil)
	if err != nil || st == nil {
		return r, nil, err
	}
	r.st = st
	if err := r.attach(ctx, false); err != nil {
		r.close()
		return nil, nil, err
	}
	vol, err := archiveVolume(ctx, st, q, s)
	if err != nil {
		r.close()
		return nil, nil, err
	}
	return r, vol, nil
}

// attach opens the remote (once) and attaches it to the store. Without
// --remote, the default file remote counts only if its folder exists: a
// read never creates it. need turns a missing remote into an error.
func (r *archiveReader) attach(ctx context.Context, need bool) error {
	if r.rs == nil {
		rs, err := openConfiguredRemote(ctx, r.g, need)
		if err != nil || rs == nil {
			return err
		}
		r.rs = rs
	}
	if r.st != nil {
		r.st.AttachRemote(r.rs)
	}
	return nil
}

// pull is the merge-read's Source.Pull: it reopens the data dir writable,
// creates the archive volume if the remote has commits of it, and pulls it
// up to the remote head. Pages stay in the remote until first read. With
// no remote, or a remote without the volume, it fails wrapping
// archive.ErrNoVolume and creates nothing.
func (r *archiveReader) pull(ctx context.Context, name string) (*graft.Volume, error) {
	if err := r.attach(ctx, true); err != nil {
		return nil, fmt.Errorf("%w: %w", err, archive.ErrNoVolume)
	}
	head, err := remoteHead(ctx, r.rs, name)
	if err != nil {
		return nil, fmt.Errorf("remote %s: %w", r.g.remoteShown(), err)
	}
	if head == 0 {
		return nil, fmt.Errorf("the remote %s has no commit of %s (was it pushed? check --remote): %w", r.g.remoteShown(), name, archive.ErrNoVolume)
	}
	if r.st != nil {
		r.st.Close()
		r.st = nil
	}
	st, err := openGraft(ctx, r.g, false, nil)
	if err != nil {
		return nil, err
	}
	r.st = st
	st.AttachRemote(r.rs)
	vn, err := names.ParseVolume(name)
	if err != nil {
		return nil, err
	}
	v, err := st.Volume(ctx, vn)
	if errors.Is(err, graft.ErrVolumeNotFound) {
		v, err = st.CreateVolume(ctx, vn)
	}
	if err != nil {
		return nil, err
	}
	if _, err := v.Pull(ctx, nil); err != nil {
		return nil, err
	}
	return v, nil
}

// remoteHead returns the newest remote LSN of volume name (0: no commit).
func remoteHead(ctx context.Context, rs remote.Store, name string) (uint64, error) {
	l, err := remote.NewLog(rs, name)
	if err != nil {
		return 0, err
	}
	return l.Head(ctx)
}

func (r *archiveReader) close() {
	if r.st != nil {
		r.st.Close()
	}
	if r.rs != nil {
		r.rs.Close()
	}
}

// readMerged prints a merge-read (or, with archiveOnly, an archive read that
// needs no Redis) of q/s. A volume that is missing here (or behind the seam
// cache) is pulled from the remote first; without one the read fails with
// archive.ErrNoVolume, it never serves the live tail alone.
func readMerged(ctx context.Context, g *globals, q, s string, r archive.Range, archiveOnly bool) error {
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		return err
	}
	ar, vol, err := openArchiveReader(ctx, g, q, s)
	if err != nil {
		return err
	}
	defer ar.close()
	src := archive.Source{Ref: ref, Volume: vol, Pull: ar.pull}
	if archiveOnly {
		if vol == nil {
			return fmt.Errorf("no archive of %s in --data %s (volume %s): run `echostore archive cycle` there, `echostore volume pull %s` to fetch it, or point --data at the node that folds it",
				ref, g.data, ref.Volume(), ref.Volume())
		}
	} else {
		c, err := connectMQ(ctx, g)
		if err != nil {
			return fmt.Errorf("%w (--archive-only reads the archive without Redis)", err)
		}
		defer c.Close()
		src.Live = c
	}
	return printRecords(g, archive.MergeRead(ctx, src, r))
}

// printRecords prints records as JSON lines; entries that are not branded
// records are listed on stderr and make the command fail at the end.
func printRecords(g *globals, seq iter.Seq2[mq.Record, error]) error {
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
		case err != nil:
			out.Flush()
			return err
		}
		buf = append(mq.AppendJSON(buf[:0], rec), '\n')
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

// watermark renders W for JSON: "EVT_…", or null before the first fold.
func watermark(st archive.State) any {
	if st.Empty() {
		return nil
	}
	return brand.EVT.Format(st.W)
}

func newArchiveCycleCmd(g *globals) *cobra.Command {
	var (
		keep      int64
		maxAge    time.Duration
		trimAfter string
		retain    archive.Retention
	)
	cmd := &cobra.Command{
		Use:   "cycle QUEUE STREAM --keep N [--max-age D] [--trim-after local|remote] [--retain-count N] [--retain-age D]",
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

When a remote is configured (--remote, or the folder <data>/remote exists) the
cycle first reads the remote's head: if the remote is ahead of the local volume
(another node folded and pushed, and this one takes over the stream's lease) it
pulls the volume before folding; if the local volume is missing and the remote
holds a log of that name while the stream has no seam cache (the history of a
deleted stream) it refuses and says how to delete that log.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, s := args[0], args[1]
			ref, err := names.ParseStreamRef(q, s)
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
				return fmt.Errorf("--%w", err)
			}
			ctx := cmd.Context()
			if err := retain.Validate(); err != nil {
				return fmt.Errorf("--retain-age: %w", err)
			}
			viaTrim := trimAfter
			if !cmd.Flags().Changed("trim-after") {
				viaTrim = "" // through serve: the stream's own trim_after
			}
			if done, err := archiveCycleViaServe(ctx, g, q, s, keep, maxAge, viaTrim, retain); done {
				return err
			}
			c, err := connectMQ(ctx, g)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := openGraft(ctx, g, false, lane.New(c))
			if err != nil {
				return err
			}
			defer st.Close()
			opts := archive.Options{Store: st, Live: c, Logger: g.log, TrimAfter: ta, Retain: retain}
			var rs remote.Store
			if ta == archive.TrimAfterRemote {
				if rs, err = remote.Open(ctx, g.remoteURL(), drivers.All()...); err != nil {
					return fmt.Errorf("--trim-after remote: remote %s: %w; check --remote (file:///dir or s3://bucket?endpoint=…), or use --trim-after local", g.remoteShown(), err)
				}
				opts.Pusher = graft.Replication{}
			} else if rs, err = openConfiguredRemote(ctx, g, false); err != nil {
				return err
			}
			if rs != nil {
				defer rs.Close()
				st.AttachRemote(rs)
			}
			a, err := archive.New(opts)
			if err != nil {
				return err
			}
			res, err := a.Cycle(ctx, ref, archive.Window{Keep: keep, MaxAge: maxAge})
			if err != nil {
				return fmt.Errorf("%w; nothing unfolded was trimmed: fix the cause and run the cycle again", err)
			}
			return json.NewEncoder(g.stdout).Encode(cycleOut{res.Folded, res.Trimmed, watermark(res.State), res.Dropped})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&keep, "keep", 0, "leave the N newest records live")
	f.DurationVar(&maxAge, "max-age", 0, "also fold and trim records older than this (e.g. 24h)")
	f.StringVar(&trimAfter, "trim-after", "local", "trim after the fold is durable locally (local) or pushed (remote); through serve, unset means the stream's configured setting")
	f.Uint64Var(&retain.Count, "retain-count", 0, "keep at most the N newest archived records, dropping older ones (0: no limit)")
	f.DurationVar(&retain.MaxAge, "retain-age", 0, "drop archived records minted longer ago than this (e.g. 720h; 0: no limit)")
	return cmd
}

func newArchiveStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status QUEUE STREAM",
		Short: `Print {"watermark":…,"archived":…,"live":…,"volume":…,"lsn":…[,"low":…,"retained":…]}`,
		Long: `Print where the seam of the stream is: the watermark W (the newest archived id,
read from the volume, which is the truth), the number of archived records ever
folded, the number of entries in the live stream, the archive volume and its
LSN. Once retention (archive cycle --retain-count/--retain-age) has dropped
archived records, "low" is the sequence number of the first archived record kept
and "retained" how many are still readable (archived − low); before that both
are left out (low 0, retained = archived).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, s := args[0], args[1]
			ref, err := names.ParseStreamRef(q, s)
			if err != nil {
				return err
			}
			name := ref.Volume().String()
			ctx := cmd.Context()
			if done, err := archiveStatusViaServe(ctx, g, q, s); done {
				return err
			}
			c, err := connectMQ(ctx, g)
			if err != nil {
				return err
			}
			defer c.Close()
			ar, vol, err := openArchiveReader(ctx, g, q, s)
			if err != nil {
				return err
			}
			defer ar.close()
			seam, archived, err := archive.GetArchived(ctx, c, ref)
			if err != nil {
				return err
			}
			var state archive.State
			if vol != nil {
				if state, err = archive.StreamFrontier(ctx, vol, ref); err != nil {
					return err
				}
			}
			if archived && (vol == nil || !state.Covers(seam.W)) {
				// Missing or behind the seam cache here: pull it.
				if vol, err = ar.pull(ctx, name); err != nil {
					return fmt.Errorf("%s/%s is archived up to %s but %s is not in --data %s: %w; give --remote, or run status on the node that folds it",
						q, s, brand.EVT.Format(seam.W), name, g.data, err)
				}
				if state, err = archive.StreamFrontier(ctx, vol, ref); err != nil {
					return err
				}
			}
			n, err := c.Len(ctx, ref)
			if err != nil {
				return err
			}
			return json.NewEncoder(g.stdout).Encode(statusOut{watermark(state), state.Pages, n, name, state.LSN, retentionField(state.Low, state), retentionField(state.Retained(), state)})
		},
	}
}

// retentionField returns &v once retention has dropped records (low > 0),
// else nil: status prints "low" and "retained" only then, and otherwise
// the same bytes as before retention existed.
func retentionField(v uint64, st archive.State) *uint64 {
	if st.Low == 0 {
		return nil
	}
	return &v
}

// confirmDeleteFlag is the flag archive delete insists on.
const confirmDeleteFlag = "yes-delete-history"

func newArchiveDeleteCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete QUEUE STREAM --" + confirmDeleteFlag,
		Short: `Delete an archived stream and its archive in --data; print {"deleted":…,"volume":…,…}`,
		Long: `Delete the archived stream: first its archive volume archive.Q.S in --data,
then, under the stream's archive lease (a running cycle is waited for), the live
stream, its seam cache, its entry in the queue's archived set and the lease. The
counter of lease tokens is kept, so fencing tokens keep increasing if the stream
is archived again. Without --` + confirmDeleteFlag + ` nothing is deleted.

When a remote is configured (--remote, or the folder <data>/remote exists) the
volume's log in it is deleted too (its commit objects newest first, then its
checkpoints and segments); "remote_objects" counts them. Without one the remote
log is kept ("remote_log_kept": true), and a later cycle with that remote refuses
to start a new volume archive.Q.S over it until a delete with the remote runs.
Not deleted: copies of the volume in other nodes' data dirs.

While echostore serve holds --data, the delete goes through it: serve deletes
with its own remote and stops cycling the stream (docs/SERVE.md).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, s := args[0], args[1]
			ref, err := names.ParseStreamRef(q, s)
			if err != nil {
				return err
			}
			name := ref.Volume().String()
			if !yes {
				return fmt.Errorf("archive delete %s/%s deletes the stream and its whole archived history (%s); nothing was deleted: add --%s to confirm",
					q, s, name, confirmDeleteFlag)
			}
			ctx := cmd.Context()
			if done, err := archiveDeleteViaServe(ctx, g, q, s); done {
				return err
			}
			c, err := connectMQ(ctx, g)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := openGraft(ctx, g, false, nil)
			if err != nil {
				return err
			}
			defer st.Close()
			rs, err := openConfiguredRemote(ctx, g, false)
			if err != nil {
				return err
			}
			if rs != nil {
				defer rs.Close()
				st.AttachRemote(rs)
			}
			a, err := archive.New(archive.Options{Store: st, Live: c, Logger: g.log})
			if err != nil {
				return err
			}
			res, err := a.Delete(ctx, ref)
			if err != nil {
				return err
			}
			return json.NewEncoder(g.stdout).Encode(server.DeleteOut{Deleted: true, Volume: res.Volume, VolumeDropped: res.VolumeDropped,
				LiveEntries: res.LiveEntries, RemoteKept: !res.RemoteDeleted, RemoteObjects: res.RemoteObjects})
		},
	}
	cmd.Flags().BoolVar(&yes, confirmDeleteFlag, false, "confirm: delete the stream and its archived history")
	return cmd
}
