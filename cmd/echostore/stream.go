package main

import (
	"bufio"
	"bytes"
	"context"
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
		Short: "Append to and read streams of branded records; list their consumer groups",
	}
	cmd.AddCommand(newStreamAppendCmd(g), newStreamReadCmd(g), newStreamReplayCmd(g), newStreamGroupsCmd(g))
	return cmd
}

// Chunks of --jsonl input: the input is read, checked and appended one
// chunk at a time, so that memory stays bounded whatever its length. A
// chunk ends after jsonlChunkRecords records or once it holds
// jsonlChunkBytes bytes of input, whichever comes first (a longer line goes
// alone). While one chunk is appended the next one is read and checked.
const (
	jsonlChunkRecords = 4096
	jsonlChunkBytes   = 1 << 20
)

func newStreamAppendCmd(g *globals) *cobra.Command {
	var jsonl, key string
	cmd := &cobra.Command{
		Use:   "append (QUEUE STREAM | --key K) [NAME=VALUE …]",
		Short: "Append one record, or JSON lines from a file or stdin; print one branded id per line",
		Long: `Append one record made of NAME=VALUE arguments (in that order), or, with
--jsonl FILE (- for stdin), one record per line, each {"fields":{"name":"value",…}}.
Prints the id of each appended record, one per line, in input order: EVT_… ids
for QUEUE STREAM, Redis ids (<ms>-<seq>) for --key K.

JSON lines are read, checked and appended in chunks of up to 4,096 records
or 1 MiB of input (whichever comes first), so that any length of input takes
bounded memory. A chunk is checked whole before any of it is appended: a bad
line fails the command (exit status 1) and names its line number. Input that
fits one chunk is therefore all or nothing: a bad line appends nothing. When a
later chunk has a bad line, the chunks before it are in the stream (their ids
are printed) and nothing of the bad chunk or after it is; the error says which
lines were appended.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, args, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			switch {
			case jsonl != "" && len(args) > 0:
				return usageError("give the fields either as NAME=VALUE arguments or with --jsonl, not both")
			case jsonl != "":
				return appendJSONL(cmd.Context(), g, ref, cmd.InOrStdin(), jsonl)
			case len(args) == 0:
				return usageError("no fields: give NAME=VALUE arguments, or --jsonl - to read JSON lines from stdin")
			}
			rec := make([]mq.Field, 0, len(args))
			for _, a := range args {
				name, value, ok := strings.Cut(a, "=")
				if !ok {
					return usageError("argument %q: want NAME=VALUE", a)
				}
				rec = append(rec, mq.Field{Name: name, Value: value})
			}
			// The record is checked before connecting, so that bad input
			// fails fast.
			if err := (mq.Limits{}).Check(rec); err != nil {
				return inputError(false, 0, err)
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisLive)
			if err != nil {
				return err
			}
			defer b.close()
			out := bufio.NewWriter(g.stdout)
			_, err = appendPrint(ctx, b, ref, [][]mq.Field{rec}, out)
			return err
		},
	}
	cmd.Flags().StringVar(&jsonl, "jsonl", "", `read records as JSON lines {"fields":{…}} from FILE ("-" for stdin)`)
	cmd.Flags().StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}

// appendJSONL appends the JSON lines of the file name (or stdin for "-")
// chunk by chunk (see jsonlChunkRecords) and prints their ids. The first
// chunk is read and checked before connecting, so that input that fits one
// chunk and has a bad line fails before anything else is done.
func appendJSONL(ctx context.Context, g *globals, ref names.StreamRef, stdin io.Reader, name string) error {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("--jsonl: %w", err)
		}
		defer f.Close()
		r = f
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan jsonlChunk)
	go readJSONL(ctx, r, name, chunks)

	first, ok := <-chunks
	switch {
	case !ok:
		return fmt.Errorf("--jsonl %s: reading stopped: %w; nothing was appended", name, context.Cause(ctx))
	case first.err != nil:
		return fmt.Errorf("%w; nothing was appended", first.err)
	case len(first.records) == 0:
		return fmt.Errorf("--jsonl %s: no records in the input", name)
	}
	b, err := open(ctx, g, redisLive)
	if err != nil {
		return err
	}
	defer b.close()
	out := bufio.NewWriterSize(g.stdout, 64<<10)
	var done jsonlProgress
	for ch := first; ; {
		if ch.err != nil && done.chunks == 0 {
			return fmt.Errorf("%w; nothing was appended", ch.err)
		}
		if ch.err != nil {
			return done.failed(ch.err)
		}
		if len(ch.records) > 0 {
			n, err := appendPrint(ctx, b, ref, ch.records, out)
			if err != nil {
				return done.appendFailed(err, n, ch.first)
			}
			done.add(ch)
		}
		if ch.eof {
			return nil
		}
		var ok bool
		if ch, ok = <-chunks; !ok {
			return done.failed(fmt.Errorf("--jsonl %s: reading stopped: %w", name, context.Cause(ctx)))
		}
	}
}

// jsonlProgress is what an --jsonl append has appended: whole chunks.
type jsonlProgress struct {
	chunks, records, lastLine int
}

func (p *jsonlProgress) add(ch jsonlChunk) {
	p.chunks++
	p.records += len(ch.records)
	p.lastLine = ch.last
}

// failed says, after err, which lines were appended before it.
func (p *jsonlProgress) failed(err error) error {
	if p.chunks == 0 {
		return err
	}
	chunks := "chunks"
	if p.chunks == 1 {
		chunks = "chunk"
	}
	return fmt.Errorf("%w; lines 1-%d (%d records in %d %s) were appended before it and their ids printed; nothing from line %d on was appended",
		err, p.lastLine, p.records, p.chunks, chunks, p.lastLine+1)
}

// appendFailed says, after the append of the chunk starting at line first
// failed with err, having appended its first n records, what was appended.
func (p *jsonlProgress) appendFailed(err error, n, first int) error {
	switch {
	case p.chunks == 0 && n == 0:
		return err
	case p.chunks == 0:
		return fmt.Errorf("%w; the first %d records of the input were appended before it and their ids printed", err, n)
	}
	return fmt.Errorf("%w; %d records were appended before it (lines 1-%d, and %d records of the chunk from line %d) and their ids printed",
		err, p.records+n, p.lastLine, n, first)
}

// appendPrint appends records as one batch and prints the id of each
// record that landed, also when the append failed part way; it returns how
// many it printed.
func appendPrint(ctx context.Context, b backend, ref names.StreamRef, records [][]mq.Field, out *bufio.Writer) (int, error) {
	res, err := b.Append(ctx, ref, records)
	ids := res.IDs
	var ae *mq.AppendError
	if err != nil && len(ids) == 0 && errors.As(err, &ae) {
		// Node.Append returns no ids with an error; the ids that landed are
		// the AppendError's.
		for _, id := range ae.Appended {
			ids = append(ids, echostore.FormatID(ref, id.XID()))
		}
	}
	for _, id := range ids {
		out.WriteString(id)
		out.WriteByte('\n')
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return len(ids), err
}

// inputError describes a bad record of the input: its line with --jsonl.
func inputError(lines bool, i int, err error) error {
	if lines {
		return fmt.Errorf("line %d: %s", i+1, recordDetail(err))
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

// jsonlChunk is one chunk of --jsonl input: its records, checked, and the
// numbers of its first and last line (blank lines included); or, with err, the bad line or the
// read error that ends the input (the records of this chunk before it are
// not appended).
type jsonlChunk struct {
	records     [][]mq.Field
	first, last int
	eof         bool // the last chunk of the input
	err         error
}

// readJSONL reads r one chunk at a time (see jsonlChunkRecords), parses
// and checks each non-blank line as a record, and sends the chunks on out,
// which it closes at the end of the input, after a chunk with an error, or
// when ctx ends.
func readJSONL(ctx context.Context, r io.Reader, name string, out chan<- jsonlChunk) {
	defer close(out)
	send := func(ch jsonlChunk) bool {
		select {
		case out <- ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	ch := jsonlChunk{first: 1}
	size := 0
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
			fields, perr := mq.ParseInputLine(text)
			if perr == nil {
				perr = (mq.Limits{}).CheckSize(fields) // the parser checked the rest
			}
			if perr != nil {
				ch.err = inputError(true, line-1, perr)
				send(ch)
				return
			}
			ch.records = append(ch.records, fields)
			size += len(text)
		}
		ch.last = line
		if err == io.EOF {
			ch.eof = true
			send(ch)
			return
		}
		if err != nil {
			ch.err = fmt.Errorf("--jsonl %s: line %d: %w", name, line, err)
			send(ch)
			return
		}
		if len(ch.records) >= jsonlChunkRecords || size >= jsonlChunkBytes {
			if !send(ch) {
				return
			}
			ch = jsonlChunk{first: line + 1, records: make([][]mq.Field, 0, jsonlChunkRecords)}
			size = 0
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
		asOf        string
	)
	cmd := &cobra.Command{
		Use:   "read (QUEUE STREAM | --key K) [--from ID] [--to ID] [--limit N] [--reverse] [--live-only|--archive-only|--as-of LSN|TIME]",
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

--as-of reads the archive as it stood at a volume LSN (archive status prints
it) or at a time (RFC 3339, 2026-03-01T12:00:00Z: the newest commit by then):
the records it held, those retention has dropped since included, as long as
the volume keeps that state (serve's history: setting); an older state fails
and says which LSNs are kept. It reads the archive alone and needs no Redis.

With --key K the stream is the application's own key K; its ids print as Redis
ids (<ms>-<seq>).`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if liveOnly && archiveOnly {
				return usageError("--live-only and --archive-only exclude each other: give one, or neither for the merge-read")
			}
			var at echostore.AsOf
			if cmd.Flags().Changed("as-of") {
				if liveOnly {
					return usageError("--as-of reads the archive as it stood then; --live-only reads the live stream, which keeps no past: give one")
				}
				var err error
				if at, err = echostore.ParseAsOf(asOf); err != nil {
					return usageError("--as-of: %v", err)
				}
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
			opts := echostore.ReadOptions{From: lo, To: hi, Limit: limit, Reverse: reverse, AsOf: at}
			need := redisRequired
			switch {
			case liveOnly:
				opts.Side, need = echostore.ReadLiveOnly, redisLive
			case archiveOnly, !at.IsZero():
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
	f.StringVar(&asOf, "as-of", "", "read the archive as it stood at this volume LSN or RFC 3339 time")
	return cmd
}
