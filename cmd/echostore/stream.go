package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
	"github.com/spf13/cobra"
)

// keyFlagUsage is the help of --key, on every command that names a stream.
const keyFlagUsage = "name the stream by its Redis key K (any key an application XADDs to) instead of QUEUE STREAM"

// streamArgs returns the stream a command names, by --key (key, when the
// flag was given) or by its first two arguments, and the arguments after
// it. With --key there is no QUEUE STREAM.
func streamArgs(key string, byKey bool, args []string) (names.StreamRef, []string, error) {
	if byKey {
		ref, err := names.ParseKeyRef(key)
		if err != nil {
			return names.StreamRef{}, nil, fmt.Errorf("--key: %w", err)
		}
		return ref, args, nil
	}
	if len(args) < 2 {
		return names.StreamRef{}, nil, usageError("give QUEUE STREAM, or --key K")
	}
	ref, err := streamRef(args[0], args[1])
	return ref, args[2:], err
}

// exactStream checks that a command naming a stream got QUEUE STREAM, or
// --key and no arguments.
func exactStream() cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if cmd.Flags().Changed("key") {
			if len(args) != 0 {
				return usageError("--key names the stream: give no QUEUE STREAM with it (got %d arguments)", len(args))
			}
			return nil
		}
		return cobra.ExactArgs(2)(cmd, args)
	}
}

func newStreamCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Append to and read streams of branded records",
	}
	cmd.AddCommand(newStreamAppendCmd(g), newStreamReadCmd(g), newStreamReplayCmd(g))
	return cmd
}

func newStreamAppendCmd(g *globals) *cobra.Command {
	var jsonl, key string
	cmd := &cobra.Command{
		Use:   "append (QUEUE STREAM | --key K) [NAME=VALUE …]",
		Short: "Append one record, or JSON lines from a file or stdin; print one branded id per line",
		Long: `Append one record made of NAME=VALUE arguments (in that order), or, with
--jsonl FILE (- for stdin), one record per line, each {"fields":{"name":"value",…}}.
The whole input is checked before anything is appended: a bad line fails the
command, names its line number, and nothing is appended. Prints the id of each
appended record, one per line, in input order: EVT_… ids for QUEUE STREAM,
Redis ids (<ms>-<seq>) for --key K.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, args, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			var batch [][]mq.Field
			switch {
			case jsonl != "" && len(args) > 0:
				return usageError("give the fields either as NAME=VALUE arguments or with --jsonl, not both")
			case jsonl != "":
				var err error
				if batch, err = readJSONL(cmd.InOrStdin(), jsonl); err != nil {
					return err
				}
				if len(batch) == 0 {
					return fmt.Errorf("--jsonl %s: no records in the input", jsonl)
				}
			case len(args) == 0:
				return usageError("no fields: give NAME=VALUE arguments, or --jsonl - to read JSON lines from stdin")
			default:
				rec := make([]mq.Field, 0, len(args))
				for _, a := range args {
					name, value, ok := strings.Cut(a, "=")
					if !ok {
						return usageError("argument %q: want NAME=VALUE", a)
					}
					rec = append(rec, mq.Field{Name: name, Value: value})
				}
				batch = [][]mq.Field{rec}
			}
			// Every record is checked (readJSONL checks each line) before
			// connecting, so that bad input fails fast and names its line.
			if jsonl == "" {
				if err := (mq.Limits{}).Check(batch[0]); err != nil {
					return inputError(false, 0, err)
				}
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisLive)
			if err != nil {
				return err
			}
			defer b.close()
			res, err := b.Append(ctx, ref, batch)
			out := bufio.NewWriter(g.stdout)
			for _, id := range res.IDs {
				out.WriteString(id)
				out.WriteByte('\n')
			}
			if ferr := out.Flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", `read records as JSON lines {"fields":{…}} from FILE ("-" for stdin)`)
	cmd.Flags().StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}

// inputError describes a bad record of the input: its line with --jsonl.
func inputError(lines bool, i int, err error) error {
	if lines {
		return fmt.Errorf("line %d: %s; nothing was appended", i+1, recordDetail(err))
	}
	return fmt.Errorf("%s; nothing was appended", recordDetail(err))
}

// recordDetail says what is wrong with a record, without the record index
// that an *mq.RecordError carries (the caller names the line instead).
func recordDetail(err error) string {
	var re *mq.RecordError
	if !errors.As(err, &re) {
		return err.Error()
	}
	if re.Field != "" {
		return fmt.Sprintf("field %q: %v", re.Field, re.Err)
	}
	return re.Err.Error()
}

// readJSONL reads and checks one record per non-blank line. A bad line
// fails the whole input with its line number.
func readJSONL(stdin io.Reader, name string) ([][]mq.Field, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("--jsonl: %w", err)
		}
		defer f.Close()
		r = f
	}
	br := bufio.NewReader(r)
	var batch [][]mq.Field
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
			fields, perr := mq.ParseInputLine(text)
			if perr == nil {
				perr = (mq.Limits{}).CheckSize(fields) // the parser checked the rest
			}
			if perr != nil {
				return nil, inputError(true, line-1, perr)
			}
			batch = append(batch, fields)
		}
		if err == io.EOF {
			return batch, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--jsonl %s: line %d: %w", name, line, err)
		}
	}
}

func newStreamReadCmd(g *globals) *cobra.Command {
	var (
		from, to    string
		limit       int
		reverse     bool
		liveOnly    bool
		archiveOnly bool
		key         string
	)
	cmd := &cobra.Command{
		Use:   "read (QUEUE STREAM | --key K) [--from ID] [--to ID] [--limit N] [--reverse] [--live-only|--archive-only]",
		Short: "Print the records of a stream as JSON lines {\"id\":…,\"fields\":{…}}",
		Long: `Print the records of a stream with ids in [--from, --to] (both inclusive, each
a branded id EVT_… or a Redis stream id <ms>-<seq>) as JSON lines, oldest first
or, with --reverse, newest first; at most --limit of them (0: all).

By default this is the merge-read: the archive in --data (ids up to the
watermark) and the live tail in Redis (ids above it), as one ordered stream.
If the archive volume is not in --data (or is behind), it is pulled from
--remote first (pages are fetched on first read); with no remote holding it
the read fails rather than print the live tail alone.
--live-only reads Redis alone; --archive-only reads the data dir alone and
works with Redis down.

With --key K the stream is the application's own key K; its ids print as Redis
ids (<ms>-<seq>).`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if liveOnly && archiveOnly {
				return usageError("--live-only and --archive-only exclude each other: give one, or neither for the merge-read")
			}
			lo, hi := xid.Min, xid.Max
			var err error
			if from != "" {
				if lo, err = mq.ParseID(from, false); err != nil {
					return fmt.Errorf("--from: %w", err)
				}
			}
			if to != "" {
				if hi, err = mq.ParseID(to, true); err != nil {
					return fmt.Errorf("--to: %w", err)
				}
			}
			if limit < 0 {
				return usageError("--limit %d: want 0 (all) or more", limit)
			}
			if lo.Compare(hi) > 0 {
				return usageError("--from %s is above --to %s: give the lower id as --from (--reverse reads newest first)", from, to)
			}
			ref, _, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			opts := echostore.ReadOptions{From: lo, To: hi, Limit: limit, Reverse: reverse}
			need := redisRequired
			switch {
			case liveOnly:
				opts.Side, need = echostore.ReadLiveOnly, redisLive
			case archiveOnly:
				opts.Side, need = echostore.ReadArchiveOnly, redisNone
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, need)
			if err != nil {
				if need == redisRequired {
					return fmt.Errorf("%w (--archive-only reads the archive without Redis)", err)
				}
				return err
			}
			defer b.close()
			return printRecords(g, ref, b.Read(ctx, ref, opts))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&liveOnly, "live-only", false, "read the live stream in Redis only")
	f.BoolVar(&archiveOnly, "archive-only", false, "read the archive in --data only (no Redis needed)")
	f.StringVar(&from, "from", "", "lowest id to print, inclusive (EVT_… or <ms>-<seq>)")
	f.StringVar(&to, "to", "", "highest id to print, inclusive (EVT_… or <ms>-<seq>)")
	f.IntVar(&limit, "limit", 0, "print at most N records (0: all)")
	f.BoolVar(&reverse, "reverse", false, "newest first")
	f.StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}
