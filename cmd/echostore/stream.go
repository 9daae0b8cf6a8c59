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
	"github.com/echostore/echostore/xid"
	"github.com/spf13/cobra"
)

func newStreamCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Append to and read streams of branded records",
	}
	cmd.AddCommand(newStreamAppendCmd(g), newStreamReadCmd(g))
	return cmd
}

func newStreamAppendCmd(g *globals) *cobra.Command {
	var jsonl string
	cmd := &cobra.Command{
		Use:   "append QUEUE STREAM [NAME=VALUE …]",
		Short: "Append one record, or JSON lines from a file or stdin; print one branded id per line",
		Long: `Append one record made of NAME=VALUE arguments (in that order), or, with
--jsonl FILE (- for stdin), one record per line, each {"fields":{"name":"value",…}}.
The whole input is checked before anything is appended: a bad line fails the
command, names its line number, and nothing is appended. Prints the id of each
appended record, one per line, in input order.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, s := args[0], args[1]
			var batch [][]mq.Field
			switch {
			case jsonl != "" && len(args) > 2:
				return errors.New("give the fields either as NAME=VALUE arguments or with --jsonl, not both")
			case jsonl != "":
				var err error
				if batch, err = readJSONL(cmd.InOrStdin(), jsonl); err != nil {
					return err
				}
				if len(batch) == 0 {
					return fmt.Errorf("--jsonl %s: no records in the input", jsonl)
				}
			case len(args) == 2:
				return errors.New("no fields: give NAME=VALUE arguments, or --jsonl - to read JSON lines from stdin")
			default:
				rec := make([]mq.Field, 0, len(args)-2)
				for _, a := range args[2:] {
					name, value, ok := strings.Cut(a, "=")
					if !ok {
						return fmt.Errorf("argument %q: want NAME=VALUE", a)
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
			ref, err := streamRef(q, s)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisRequired)
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
				perr = (mq.Limits{}).Check(fields)
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
	)
	cmd := &cobra.Command{
		Use:   "read QUEUE STREAM [--from ID] [--to ID] [--limit N] [--reverse] [--live-only|--archive-only]",
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
works with Redis down.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if liveOnly && archiveOnly {
				return errors.New("--live-only and --archive-only exclude each other: give one, or neither for the merge-read")
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
				return fmt.Errorf("--limit %d: want 0 (all) or more", limit)
			}
			ref, err := streamRef(args[0], args[1])
			if err != nil {
				return err
			}
			opts := echostore.ReadOptions{From: lo, To: hi, Limit: limit, Reverse: reverse}
			need := redisRequired
			switch {
			case liveOnly:
				opts.Side = echostore.ReadLiveOnly
			case archiveOnly:
				opts.Side, need = echostore.ReadArchiveOnly, redisNone
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, need)
			if err != nil {
				if need == redisRequired && !liveOnly {
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
	return cmd
}
