package main

import (
	"context"
	"fmt"
	"math"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// replayer is what `stream replay` needs of its backend; the Node and the
// client of serve both have it.
type replayer interface {
	Replay(ctx context.Context, ref names.StreamRef, opts echostore.ReplayOptions) (echostore.ReplayResult, error)
}

var (
	_ replayer = (*echostore.Node)(nil)
	_ replayer = (*client.Client)(nil)
)

func newStreamReplayCmd(g *globals) *cobra.Command {
	var (
		from, to, into string
		key            string
		rate           float64
		limit          int
		force          bool
	)
	cmd := &cobra.Command{
		Use:   "replay (QUEUE STREAM | --key K) --into KEY [--from ID] [--to ID] [--rate N] [--limit N] [--force]",
		Short: "Copy a range of a stream into a Redis stream under the original ids, for a new consumer group",
		Long: `Copy the records of the stream with ids in [--from, --to] (both inclusive, each
a branded id EVT_… or a Redis stream id <ms>-<seq>; open ends by default) into
the Redis stream KEY, each under its original Redis id (XADD KEY <id> …), so
that a new consumer group processes that history with plain XREADGROUP:

  echostore stream replay shop orders --from 1733052000000-0 --into orders-replay
  redis-cli XGROUP CREATE orders-replay audit 0
  redis-cli XREADGROUP GROUP audit c1 COUNT 100 STREAMS orders-replay '>'

The range is read as stream read reads it (the archive, then the live tail)
and written in batches of one Redis script each, at most --rate records per
second. A replay resumes after the target's last id: run it again after an
interruption and it copies what is missing, with no gap and no duplicate; run
it again after it finished and it copies nothing. --limit N stops after N
records (run it again to go on). With --key K the source is the stream at the
application's own key K (archive and live tail), and the copies keep its
Redis ids:

  echostore stream replay --key orders --from 1733052000000-0 --into orders-replay

Refused before anything is written (exit status 1): a KEY that is the source
stream itself (the key K of --key K, or emq:{QUEUE}:stream:STREAM), an archived
stream (of a queue, or a key registered as archived), or a key holding another type than a
stream; a KEY in echostore's own namespace (emq:…) unless --force; and a
target whose last id is at or above the first id to copy when its entry at
that id, or its newest entry in the range, is not the source's record
(another producer's entries). A progress line shows on stderr when stdout is a
terminal; the summary is one JSON line:
{"into":…,"copied":…,"resumed_after":…,"last":…,"done":…}.`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := echostore.ReplayOptions{To: xid.Max, Into: into, Rate: rate, Limit: limit, Force: force}
			var err error
			switch {
			case into == "":
				return usageError("give --into KEY: the Redis key of the stream to copy into")
			case rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0):
				return usageError("--rate %v: want a positive number of records per second (0: %d)", rate, echostore.DefaultReplayRate)
			case limit < 0:
				return usageError("--limit %d: want 0 (all) or more", limit)
			}
			if from != "" {
				if opts.From, err = mq.ParseID(from, false); err != nil {
					return usageError("--from: %w", err)
				}
			}
			if to != "" {
				if opts.To, err = mq.ParseID(to, true); err != nil {
					return usageError("--to: %w", err)
				}
			}
			if opts.To.Less(opts.From) {
				return usageError("--from %s is above --to %s", from, to)
			}
			ref, err := replaySource(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisRequired)
			if err != nil {
				return err
			}
			defer b.close()
			r, ok := b.backend.(replayer)
			if !ok {
				return fmt.Errorf("stream replay: this backend cannot replay")
			}
			p := newRecordBar(g, "replay")
			opts.Progress = func(rp echostore.ReplayProgress) { p.set(rp.Copied) }
			res, err := r.Replay(ctx, ref, opts)
			p.done()
			if err != nil {
				return err
			}
			return printJSON(g.stdout, res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", keyFlagUsage)
	f.StringVar(&into, "into", "", "the Redis key of the stream to copy into (required)")
	f.StringVar(&from, "from", "", "lowest id to copy, inclusive (EVT_… or <ms>-<seq>)")
	f.StringVar(&to, "to", "", "highest id to copy, inclusive (EVT_… or <ms>-<seq>)")
	f.Float64Var(&rate, "rate", 0, fmt.Sprintf("most records written per second (0: %d)", echostore.DefaultReplayRate))
	f.IntVar(&limit, "limit", 0, "copy at most N records, then stop (0: all; run again to go on)")
	f.BoolVar(&force, "force", false, "let --into be a key in echostore's namespace (emq:…); never the source or an archived stream")
	return cmd
}

// replaySource is the source stream of a replay: QUEUE STREAM, or the
// stream at key K with --key K.
func replaySource(key string, byKey bool, args []string) (names.StreamRef, error) {
	ref, _, err := streamArgs(key, byKey, args)
	return ref, err
}

// recordBar is a progress line on stderr while stdout is a terminal,
// nothing otherwise: the records done and the rate (a range's size is not
// known before it is read); replay and export show it.
type recordBar struct {
	pb *progressbar.ProgressBar
}

func newRecordBar(g *globals, what string) *recordBar {
	b := &recordBar{}
	if isTerminal(g.stdout) {
		b.pb = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(g.stderr),
			progressbar.OptionSetDescription(what), progressbar.OptionShowCount(),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"),
			progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
	}
	return b
}

// set shows n records done.
func (b *recordBar) set(n int64) {
	if b.pb != nil {
		_ = b.pb.Set64(n)
	}
}

func (b *recordBar) done() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}
