package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
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
				return withBackend(cmd, g, redisNone, func(b backend) error {
					res, err := b.Volumes(cmd.Context())
					if err != nil {
						return err
					}
					if res.Volumes == nil {
						res.Volumes = []echostore.VolumeStatus{}
					}
					return printJSON(g.stdout, res.Volumes)
				})
			},
		},
		volumeCmd(g, "info VOLUME", "Show a volume's LSNs, pages and bytes", redisNone,
			func(ctx context.Context, b backend, v names.Volume) (any, error) { return b.VolumeInfo(ctx, v) }),
		volumeCmd(g, "push VOLUME", "Push the local commits not yet pushed as one remote commit", redisOptional,
			func(ctx context.Context, b backend, v names.Volume) (any, error) { return b.Push(ctx, v) }),
		volumeCmd(g, "pull VOLUME", "Follow the remote: apply its new commits (pages are fetched on first read)", redisOptional,
			func(ctx context.Context, b backend, v names.Volume) (any, error) {
				p := newBar(g, "pull")
				defer p.done()
				return b.Pull(ctx, v, p.set)
			}),
		volumeCmd(g, "hydrate VOLUME", "Fetch every page of the volume that is not local yet", redisOptional,
			func(ctx context.Context, b backend, v names.Volume) (any, error) {
				p := newBar(g, "hydrate")
				defer p.done()
				return b.Hydrate(ctx, v, p.set)
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
	cmd := volumeCmd(g, "reset VOLUME --to-remote [--discard N]", "Drop local commits never pushed and follow the remote", redisOptional,
		func(ctx context.Context, b backend, v names.Volume) (any, error) { return b.Reset(ctx, v, discard) })
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

// volumeCmd is a volume command: it checks the name, opens the backend
// (with Redis as need says, when it opens the data dir itself), runs run
// and prints its result.
func volumeCmd(g *globals, use, short string, need redisNeed,
	run func(ctx context.Context, b backend, v names.Volume) (any, error)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := names.ParseVolume(args[0])
			if err != nil {
				return err
			}
			b, err := open(ctx, g, need)
			if err != nil {
				return err
			}
			defer b.close()
			out, err := run(ctx, b, v)
			if err != nil {
				return volumeError(v, err)
			}
			return printJSON(g.stdout, out)
		},
	}
}

// volumeError adds to err what to do about a volume the data dir lacks.
func volumeError(v names.Volume, err error) error {
	if (errors.Is(err, graft.ErrVolumeNotFound) || errors.Is(err, client.ErrNotFound)) && !strings.Contains(err.Error(), "no commits on the remote") {
		return fmt.Errorf("%w; `echostore volume ls` lists the volumes, `echostore volume pull %s` fetches it from the remote", err, v)
	}
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

func (b *bar) done() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
