package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/lane"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server"
)

// newVolumeCmd is `echostore volume`: volume state and replication.
func newVolumeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "volume",
		Short: "Volume state and replication to the remote (ls, info, push, pull, hydrate, reset, checkpoint, gc)",
		Long: `Inspect the Graft volumes of the data dir (<data>/graft) and replicate them to
and from the remote (--remote, default file://<data>/remote). Output is JSON.
push publishes the local commits not yet pushed as one remote commit; pull
follows the remote (pages are fetched on first read); hydrate fetches every
page not yet local; reset --to-remote drops local commits that were never
pushed and follows the remote (the way out of a diverged volume). checkpoint
appends a checkpoint commit to the remote log (fresh followers start at the
newest); gc deletes the remote segments that no commit at or after the oldest
retained checkpoint references.`,
	}
	cmd.AddCommand(
		&cobra.Command{
			Use: "ls", Short: "List the volumes", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if done, err := volumesViaServe(cmd.Context(), g); done {
					return err
				}
				st, err := openGraft(cmd.Context(), g, true, nil)
				if err != nil || st == nil {
					if err == nil {
						return writeJSON(g, []graft.Info{})
					}
					return err
				}
				defer st.Close()
				infos, err := st.Volumes(cmd.Context())
				if err != nil {
					return err
				}
				if infos == nil {
					infos = []graft.Info{}
				}
				return writeJSON(g, infos)
			},
		},
		&cobra.Command{
			Use: "info VOLUME", Short: "Show a volume's LSNs, pages and bytes", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				if err := names.Check(names.KindVolume, args[0]); err != nil {
					return err
				}
				if done, err := volumeViaServe(ctx, g, args[0], "", nil); done {
					return err
				}
				st, err := openGraft(ctx, g, true, nil)
				if err != nil {
					return err
				}
				if st == nil {
					return noVolume(g, args[0])
				}
				defer st.Close()
				v, err := volumeOf(ctx, g, st, args[0], false)
				if err != nil {
					return err
				}
				return writeVolumeInfo(ctx, g, v, nil)
			},
		},
		replicaCmd(g, "push VOLUME", "Push the local commits not yet pushed as one remote commit", false, nil,
			func(ctx context.Context, v *graft.Volume, _ *mq.Client) (map[string]any, error) {
				sp, err := v.Push(ctx)
				return map[string]any{"hash": sp.Hash.String()}, err
			}),
		replicaCmd(g, "pull VOLUME", "Follow the remote: apply its new commits (pages are fetched on first read)", true, nil,
			func(ctx context.Context, v *graft.Volume, _ *mq.Client) (map[string]any, error) {
				p := newBar(g, "pull")
				defer p.done()
				sp, err := v.Pull(ctx, p.set)
				return map[string]any{"hash": sp.Hash.String()}, err
			}),
		replicaCmd(g, "hydrate VOLUME", "Fetch every page of the volume that is not local yet", false, nil,
			func(ctx context.Context, v *graft.Volume, _ *mq.Client) (map[string]any, error) {
				n, err := v.Unfetched(ctx)
				if err != nil {
					return nil, err
				}
				p := newBar(g, "hydrate")
				defer p.done()
				return map[string]any{"frames_fetched": n}, v.Hydrate(ctx, p.set)
			}),
		newVolumeResetCmd(g),
		newVolumeCheckpointCmd(g),
		newVolumeGCCmd(g),
	)
	return cmd
}

func newVolumeResetCmd(g *globals) *cobra.Command {
	var toRemote bool
	var discard uint64
	cmd := replicaCmd(g, "reset VOLUME --to-remote [--discard N]", "Drop local commits never pushed and follow the remote", false,
		func() url.Values {
			q := url.Values{"to_remote": {"true"}}
			if discard > 0 {
				q.Set("discard", strconv.FormatUint(discard, 10))
			}
			return q
		},
		func(ctx context.Context, v *graft.Volume, live *mq.Client) (map[string]any, error) {
			return server.ResetVolume(ctx, v, live, discard)
		})
	cmd.Long = `Drop the local commits of VOLUME that were never pushed and follow the remote
(the way out of a diverged volume). The reset refuses, dropping nothing, when
those commits hold acknowledged records that exist nowhere else: archived
records of an archive volume (archive.Q.S) no longer in the live stream, or
jobs of an accept volume (accept.Q.N), which the remote does not have. The
error says how many; to discard them for good, repeat that count with
--discard N (a wrong count refuses again).`
	cmd.PreRunE = func(_ *cobra.Command, args []string) error {
		if !toRemote {
			return fmt.Errorf("volume reset %s: pass --to-remote: the reset drops the local commits that were never pushed and follows the remote", args[0])
		}
		return nil
	}
	cmd.Flags().BoolVar(&toRemote, "to-remote", false, "drop unpushed local commits and follow the remote (required)")
	cmd.Flags().Uint64Var(&discard, "discard", 0, "the number of acknowledged records a refused reset named: discard them for good")
	return cmd
}

// replicaCmd is a volume command that opens the store read-write with the
// remote attached, runs run and prints the volume's info with run's fields.
// While a serve holds the data dir, the command is its route POST
// /v1/volumes/{vid}/<op> with query instead (op: the first word of use).
func replicaCmd(g *globals, use, short string, create bool, query func() url.Values,
	run func(ctx context.Context, v *graft.Volume, live *mq.Client) (map[string]any, error)) *cobra.Command {
	op, _, _ := strings.Cut(use, " ")
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := names.Check(names.KindVolume, args[0]); err != nil {
				return err
			}
			var q url.Values
			if query != nil {
				q = query()
			}
			if done, err := volumeViaServe(ctx, g, args[0], op, q); done {
				return err
			}
			rs, err := remote.Open(ctx, g.remoteURL(), drivers.All()...)
			if err != nil {
				return fmt.Errorf("remote %s: %w; check --remote (file:///dir or s3://bucket?endpoint=…)", g.remoteShown(), err)
			}
			defer rs.Close()
			n, live, closeLane := laneNotifier(ctx, g)
			defer closeLane()
			st, err := openGraft(ctx, g, false, n)
			if err != nil {
				return err
			}
			defer st.Close()
			st.AttachRemote(rs)
			if create {
				if err := remoteHasVolume(ctx, g, st, rs, args[0]); err != nil {
					return err
				}
			}
			v, err := volumeOf(ctx, g, st, args[0], create)
			if err != nil {
				return err
			}
			extra, err := run(ctx, v, live)
			if err != nil {
				return err
			}
			return writeVolumeInfo(ctx, g, v, extra)
		},
	}
}

func volumeOf(ctx context.Context, g *globals, st *graft.Store, name string, create bool) (*graft.Volume, error) {
	vn, err := names.ParseVolume(name)
	if err != nil {
		return nil, err
	}
	var v *graft.Volume
	if create {
		v, err = st.CreateVolume(ctx, vn)
	} else {
		v, err = st.Volume(ctx, vn)
	}
	if errors.Is(err, graft.ErrVolumeNotFound) {
		return nil, noVolume(g, name)
	}
	return v, err
}

// remoteHasVolume refuses to create a local volume that the remote has no
// commit of (a misspelt name or the wrong --remote): one LIST.
func remoteHasVolume(ctx context.Context, g *globals, st *graft.Store, rs remote.Store, name string) error {
	if vn, err := names.ParseVolume(name); err == nil {
		if _, err := st.Volume(ctx, vn); err == nil {
			return nil
		}
	}
	l, err := remote.NewLog(rs, name)
	if err != nil {
		return err
	}
	head, err := l.Head(ctx)
	if err != nil {
		return fmt.Errorf("volume %s: remote %s: %w", name, g.remoteShown(), err)
	}
	if head == 0 {
		return fmt.Errorf("volume %q has no commits on the remote %s: check the name and --remote", name, g.remoteShown())
	}
	return nil
}

func noVolume(g *globals, name string) error {
	return fmt.Errorf("volume %q not found in %s; `echostore volume ls` lists the volumes, `echostore volume pull %s` fetches it from the remote", name, graftDir(g), name)
}

// writeVolumeInfo prints the volume's Info as one JSON object, with extra
// fields and the frames not yet fetched (server.VolumeInfo).
func writeVolumeInfo(ctx context.Context, g *globals, v *graft.Volume, extra map[string]any) error {
	out, err := server.VolumeInfo(ctx, v, extra)
	if err != nil {
		return err
	}
	return writeJSON(g, out)
}

func writeJSON(g *globals, x any) error {
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(g.stdout, "%s\n", b)
	return err
}

// bar is a progress bar on a terminal, nothing otherwise.
type bar struct {
	g    *globals
	desc string
	pb   *progressbar.ProgressBar
}

func newBar(g *globals, desc string) *bar { return &bar{g: g, desc: desc} }

func (b *bar) set(done, total int) {
	if !isTerminal(b.g.stdout) {
		return
	}
	if b.pb == nil || b.pb.GetMax() != total {
		b.pb = progressbar.NewOptions(total, progressbar.OptionSetWriter(b.g.stderr),
			progressbar.OptionSetDescription(b.desc), progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
	}
	_ = b.pb.Set(done)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (b *bar) done() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}

// laneNotifier connects to --redis, if it answers within a few seconds, so
// that a push or pull from the CLI is announced on the volume's LSN lane as
// it is from serve. Without Redis the replication still runs; followers that
// wait on the lane catch up at the next announcement.
//
// The client is returned too (nil without Redis): a reset counts with it
// the archived records no longer in the live stream.
func laneNotifier(ctx context.Context, g *globals) (graft.Notifier, *mq.Client, func()) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := connectMQ(cctx, g)
	if err != nil {
		g.log.Info("LSN events not announced: Redis is not reachable", "redis", mq.Redact(g.redis), "err", err)
		return nil, nil, func() {}
	}
	return lane.New(c), c, c.Close
}
