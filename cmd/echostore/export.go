package main

import (
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

func newExportCmd(g *globals) *cobra.Command {
	var (
		dir, to, key string
		rows         int
		intoRemote   bool
	)
	cmd := &cobra.Command{
		Use:   "export (QUEUE STREAM | --key K) (--dir DIR | --into-remote) [--to ID] [--rows-per-file N]",
		Short: "Write a stream's archive and live tail to Parquet files, for DuckDB, pyarrow or Spark",
		Long: `Write the records of the stream, as stream read reads them (the archive, then
the live tail), to Parquet files in DIR: one row per record with its id, its
Redis id, its time and its fields (a list of name and value, as bytes), and a
typed column f_<name> for each field that every record of a file has and whose
values parse as one type (docs/EXPORT.md). DIR/manifest.json lists the files
in id order and the watermark: the Redis id of the last record written.

The export is incremental: run it again and it writes only what came after the
watermark, in new files. --to ID stops at ID (inclusive). --into-remote puts
the files and the manifest into the remote bucket instead, under
exports/<the stream's volume>/ (through serve when it holds --data); an
encrypted remote refuses it. Each file is written
whole and renamed into place before the manifest names it; the next export
removes what an interrupted one left unnamed and writes those records again. A progress line shows
on stderr when stdout is a terminal; the summary is one JSON line:
{"files":[…],"rows":…,"resumed_after":…,"watermark":…,"manifest":…}.

Query the folder as one table:

  duckdb -c "select count(*) from read_parquet('DIR/*.parquet', union_by_name = true)"`,
		Args: exactStream(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (dir == "") == !intoRemote {
				return usageError("give --dir DIR (the folder the files and the manifest go to) or --into-remote (the remote bucket), one of them")
			}
			if rows < 0 {
				return usageError("--rows-per-file %d: want 1 or more (0: %d)", rows, echostore.DefaultExportRows)
			}
			opts := echostore.ExportOptions{Dir: dir, RowsPerFile: rows, To: xid.Max}
			if to != "" {
				var err error
				if opts.To, err = mq.ParseID(to, true); err != nil {
					return usageError("--to: %w", err)
				}
			}
			ref, _, err := streamArgs(key, cmd.Flags().Changed("key"), args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			b, err := open(ctx, g, redisRequired, leanStore)
			if err != nil {
				return err
			}
			defer b.close()
			p := newRecordBar(g, "export")
			opts.Progress = func(ep echostore.ExportProgress) { p.set(ep.Rows) }
			var res echostore.ExportResult
			switch c, viaServe := b.backend.(*client.Client); {
			case !intoRemote:
				res, err = echostore.ExportFrom(ctx, b.Read, ref, opts)
			case viaServe:
				body := api.ExportBody{To: to, RowsPerFile: rows}
				res, err = c.ExportRemote(ctx, ref, body)
			default:
				opts.Dir, opts.Remote = "", true
				res, err = b.node.Export(ctx, ref, opts)
			}
			p.done()
			if err != nil {
				return err
			}
			return printJSON(g.stdout, res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the folder the Parquet files and manifest.json go to (made if missing; an export there is continued)")
	f.StringVar(&to, "to", "", "highest id to export, inclusive (EVT_… or <ms>-<seq>; default: all)")
	f.IntVar(&rows, "rows-per-file", 0, "most records in one file (0: 1048576)")
	f.BoolVar(&intoRemote, "into-remote", false, "put the files and the manifest into the remote bucket, under exports/<volume>/, instead of --dir")
	f.StringVar(&key, "key", "", keyFlagUsage)
	return cmd
}

// exportGCPercent is the export's GOGC: what it allocates per record is
// garbage at once (its live heap is a row group), so a heap let grow to
// twice the live one would hold only garbage.
const exportGCPercent = 50

// leanStore opens the data dir for a CLI export (Config.ReadMostly), so
// that the export's resident memory stays flat however long the history
// (TestExportMemoryFlat).
func leanStore(cfg *echostore.Config) {
	cfg.ReadMostly = true
	debug.SetGCPercent(exportGCPercent)
}
