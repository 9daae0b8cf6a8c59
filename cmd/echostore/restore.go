package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

// newRestoreCmd is `echostore restore`: a node's data dir rebuilt from the
// remote alone, after its disk was lost.
func newRestoreCmd(g *globals) *cobra.Command {
	var (
		force, asJSON bool
		node          int
	)
	cmd := &cobra.Command{
		Use:   "restore --remote URL [--data DIR] [--node N] [--force] [--json]",
		Short: "Rebuild a lost data dir from the remote: every archive volume and the node's accept volumes, lazily",
		Long: `Rebuild the data dir (--data) of a node whose disk was lost from the remote
(--remote) alone: every archive volume the remote holds and the node's own
accept volumes (accept.Q.N, N = --node, default $ECHOSTORE_NODE or 0) are
created and pulled lazily: each volume's newest checkpoint and the log above
it; page bytes stay in the remote and are fetched on first read (or by
` + "`echostore volume hydrate`" + `). Another node's accept volumes are left alone.
Then run serve on the data dir: its accept tier dispatches again the jobs the
restored accept volumes hold (every sync job acknowledged; the job stream
drops those it has), and its drivers cycle the archived streams again.
serve --restore (config restore: true) does the same when it starts on a data
dir that holds no store.

The data dir must be empty or missing (serve's token file, a stale socket and
lost+found do not count), and the remote outside it: otherwise the restore
refuses, exit status 2, having created nothing. --force restores into a data
dir that holds something: it creates the volumes the data dir lacks and pulls
those it has, and deletes nothing (a volume whose unpushed commits the remote
does not have fails the restore; ` + "`echostore volume reset`" + ` decides about it).
A restore of a data dir that held no store, cut short, leaves the file
restore.pending in it, which then opens only to a restore, which finishes it.

With Redis reachable (--redis), a seam cache that names folds the remote
never received (trim_after: local: they were on the lost disk) is lowered to
the restored volume, so that the stream reads and cycles again.

The report says what was restored (volume, kind, remote and local LSN,
pages, frames still in the remote), the requests made and the bytes fetched
before the first read, and how long it took: text, or one JSON object with
--json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			// The command line is checked before anything is contacted.
			if !cmd.Flags().Changed("node") {
				n, err := nodeFromEnv()
				if err != nil {
					return usageError("%w", err)
				}
				node = n
			} else if node < 0 || node > brand.MaxNode {
				return usageError("--node %d: want a whole number from 0 to %d", node, brand.MaxNode)
			}
			mode := echostore.RestoreEmpty
			if force {
				mode = echostore.RestoreForce
			}
			// The remote's keys, as every command reads them: an encrypted
			// remote restores only with its key.
			keys, err := g.keyring()
			if err != nil {
				return err
			}
			cfg := g.nodeConfig(keys, node)
			cfg.Restore = mode
			if err := pingRedis(ctx, g); err != nil {
				g.log.Info("restore: Redis is not reachable: seam caches are left as they are", "redis", mq.Redact(g.redis), "err", err)
			} else {
				cfg.Redis = g.redis
			}
			n, err := echostore.Open(ctx, cfg)
			switch {
			case errors.Is(err, echostore.ErrNotEmpty), errors.Is(err, echostore.ErrRestoreRemote), errors.Is(err, echostore.ErrConfig):
				return err
			case errors.Is(err, echostore.ErrDataLocked):
				return fmt.Errorf("%w; another echostore process is using --data %s", err, g.data)
			case err != nil:
				return fmt.Errorf("%w; check --data and --remote (or ECHOSTORE_REMOTE)", err)
			}
			res := n.Restored()
			if err := n.Close(context.WithoutCancel(ctx)); err != nil {
				return fmt.Errorf("restore: close the data dir: %w", err)
			}
			if asJSON {
				return printJSON(g.stdout, res)
			}
			return printRestore(g.stdout, res)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&force, "force", false, "restore into a data dir that holds something (creates what it lacks, pulls what it has, deletes nothing)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.IntVar(&node, "node", 0, "the node number whose accept volumes (accept.Q.N) to restore [$ECHOSTORE_NODE]")
	return cmd
}

// printRestore prints a restore's report as text.
func printRestore(w io.Writer, res *echostore.RestoreResult) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "restored %d volumes from %s into %s (node %d) in %d ms: %d requests, %s fetched before the first read\n",
		len(res.Volumes), res.Remote, res.Data, res.Node, res.TookMs, res.Requests, byteSize(res.BytesFetched))
	if len(res.Volumes) > 0 {
		fmt.Fprintln(tw, "VOLUME\tKIND\tREMOTE LSN\tLOCAL LSN\tPAGES\tBYTES\tFRAMES IN THE REMOTE\tNOTE")
	}
	for _, v := range res.Volumes {
		note := ""
		switch {
		case v.SeamLowered:
			note = "seam cache lowered: folds the remote never received were lost with the disk"
		case v.Existed:
			note = "was in the data dir: pulled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\n", v.Volume, v.Kind, v.RemoteLSN, v.LocalLSN, v.Pages, byteSize(int64(v.Bytes)), v.UnfetchedFrames, note)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(tw, "skipped %s: %s\n", s.Volume, s.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// byteSize prints n bytes with a binary unit.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
