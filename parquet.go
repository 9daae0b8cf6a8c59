package echostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// The Parquet export of a stream (Node.Export, docs/EXPORT.md): files of
// one row per record in id order, and a manifest that makes them one
// table. Each row has the columns
//
//	id        STRING     the record's id as reads print it (EVT_…, or the
//	                     Redis id of a stream at a key)
//	redis_id  STRING     its Redis stream id, <ms>-<seq>
//	time      TIMESTAMP  the milliseconds of its id (UTC)
//	fields    LIST<STRUCT<name BYTES, value BYTES>>  its fields, in order,
//	                     as stored (bytes: a value need not be UTF-8)
//
// and a typed column f_<name> for each field that every record of the
// file has exactly once, whose name is 1 to 64 of [A-Za-z0-9_], and whose
// values all parse as one type (the typing rule): INT64 when every value
// is a base-10 integer that fits in 64 bits with no sign but '-', no
// leading zero and no '+'; else DOUBLE when every value is a finite
// decimal number (strconv.ParseFloat); else STRING when every value is
// UTF-8; else none. The typed columns of two files may differ: a reader
// takes the union by name (DuckDB: read_parquet(…, union_by_name = true)).

// ExportManifest is the name of the manifest in an export's folder.
const ExportManifest = "manifest.json"

// DefaultExportRows is how many records an export writes to one file at
// most when ExportOptions.RowsPerFile is zero.
const DefaultExportRows = 1 << 20

// exportRowGroup bounds the rows a file's writer holds in memory before it
// writes them out as one row group: with the pages of a record at most a
// few kilobytes, about tens of megabytes whatever the history's length.
const exportRowGroup = 16 << 10

// exportFormat is the version of the manifest's layout.
const exportFormat = 1

// ExportOptions say what an export writes and where.
type ExportOptions struct {
	// Dir is the folder the files and the manifest go to; it is made if it
	// does not exist, and an export already there is continued.
	Dir string
	// To bounds the ids exported (inclusive; the zero To is all, the live
	// tail included). An export always starts after the last record the
	// manifest names, or at the stream's first record.
	To xid.ID
	// RowsPerFile is the most records a file holds (0: DefaultExportRows).
	RowsPerFile int
	// Progress, if set, is called after each file with the rows written so
	// far by this export.
	Progress func(ExportProgress)
}

// ExportProgress is how far an export has come.
type ExportProgress struct {
	Rows  int64  // records written by this export
	Files int    // files written by this export
	Last  string // the id of the last record written
}

// ExportFile describes one file of an export, in its manifest.
type ExportFile struct {
	// Name is the file's name in the folder: part-<ms>-<seq>.parquet after
	// the Redis id of its last record, zero-padded so that the names sort
	// in id order.
	Name string `json:"name"`
	Rows int64  `json:"rows"`
	// FirstID and LastID are its first and last records' ids (as printed),
	// FirstRedisID and LastRedisID their Redis ids.
	FirstID      string `json:"first_id"`
	LastID       string `json:"last_id"`
	FirstRedisID string `json:"first_redis_id"`
	LastRedisID  string `json:"last_redis_id"`
	// Typed are its typed columns (f_<name>), by name.
	Typed []ExportColumn `json:"typed"`
}

// ExportColumn is one typed column of a file: the field it holds and its
// type, "int64", "double" or "string".
type ExportColumn struct {
	Field string `json:"field"`
	Type  string `json:"type"`
}

// ExportManifestFile is the manifest of an export's folder: the stream, the
// files in id order, and the watermark of the export: the Redis id of the
// last record written (null before any).
type ExportManifestFile struct {
	Format    int          `json:"format"`
	Queue     string       `json:"queue,omitempty"`
	Stream    string       `json:"stream,omitempty"`
	Key       string       `json:"key,omitempty"`
	Watermark *string      `json:"watermark"`
	Files     []ExportFile `json:"files"`
}

// ExportResult is the answer of an export: the files it wrote (none when
// nothing came after the last export), the records in them, the watermark
// it resumed after (null: the first export) and the manifest's path.
type ExportResult struct {
	Files        []ExportFile `json:"files"`
	Rows         int64        `json:"rows"`
	ResumedAfter *string      `json:"resumed_after"`
	Watermark    *string      `json:"watermark"`
	Manifest     string       `json:"manifest"`
}

// ErrExportMismatch: the folder holds the export of another stream, or a
// manifest this version cannot read.
var ErrExportMismatch = errors.New("echostore: the folder holds another export")

// Export writes the records of stream ref (the merge-read: its archive and
// its live tail) that came after the folder's last export, up to opts.To,
// to Parquet files in opts.Dir, and the manifest that lists them. A file is
// written whole under a temporary name and renamed, then the manifest is
// replaced whole, so a crash leaves either file in the manifest or the
// next export writes it again under the same name. Memory is bounded by a
// row group (exportRowGroup) and one file's typing, whatever the
// history's length: each file's records are read twice, once to type its
// columns and once to write them.
func (n *Node) Export(ctx context.Context, ref names.StreamRef, opts ExportOptions) (ExportResult, error) {
	return ExportFrom(ctx, n.Read, ref, opts)
}

// ReadFunc reads a stream as Node.Read does: Node.Read, or a client's read
// of a running serve (client.Client.Read).
type ReadFunc func(ctx context.Context, ref names.StreamRef, opts ReadOptions) iter.Seq2[Record, error]

// ExportFrom is Node.Export over read: a program that reads a stream
// through serve's API (the CLI while serve holds the data dir) exports it
// the same way, to a folder of its own machine.
func ExportFrom(ctx context.Context, read ReadFunc, ref names.StreamRef, opts ExportOptions) (ExportResult, error) {
	n := exporter{read: read}
	if ref.IsZero() {
		return ExportResult{}, fmt.Errorf("export: no stream: %w", names.ErrInvalid)
	}
	if opts.Dir == "" {
		return ExportResult{}, fmt.Errorf("export %s: no folder: %w", ref, ErrInvalid)
	}
	if opts.RowsPerFile < 0 {
		return ExportResult{}, fmt.Errorf("export %s: rows per file %d: want 1 or more (0: %d): %w", ref, opts.RowsPerFile, DefaultExportRows, ErrInvalid)
	}
	per := cmp0(opts.RowsPerFile, DefaultExportRows)
	to := opts.To
	if to.IsZero() {
		to = xid.Max
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return ExportResult{}, fmt.Errorf("export %s: %w", ref, err)
	}
	man, err := loadManifest(opts.Dir, ref)
	if err != nil {
		return ExportResult{}, err
	}
	res := ExportResult{Files: []ExportFile{}, Manifest: filepath.Join(opts.Dir, ExportManifest)}
	from := xid.Min
	if man.Watermark != nil {
		w, err := xid.Parse(*man.Watermark)
		if err != nil {
			return ExportResult{}, fmt.Errorf("export %s: manifest watermark %q: %w", ref, *man.Watermark, ErrExportMismatch)
		}
		res.ResumedAfter = man.Watermark
		var ok bool
		if from, ok = w.Next(); !ok {
			return res, nil
		}
	}
	for !to.Less(from) {
		plan, err := n.planFile(ctx, ref, from, to, per)
		if err != nil {
			return res, err
		}
		if plan.rows == 0 {
			break
		}
		f, err := n.writeFile(ctx, ref, opts.Dir, plan)
		if err != nil {
			return res, err
		}
		man.Files = append(man.Files, f)
		w := f.LastRedisID
		man.Watermark = &w
		if err := saveManifest(opts.Dir, man); err != nil {
			return res, err
		}
		res.Files = append(res.Files, f)
		res.Rows += f.Rows
		res.Watermark = man.Watermark
		if opts.Progress != nil {
			opts.Progress(ExportProgress{Rows: res.Rows, Files: len(res.Files), Last: f.LastID})
		}
		var ok bool
		if from, ok = plan.last.Next(); !ok {
			break
		}
	}
	if res.Watermark == nil {
		res.Watermark = man.Watermark
	}
	return res, nil
}

// cmp0 returns v, or def when v is zero.
func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// exporter is an export's reader of the stream.
type exporter struct{ read ReadFunc }

// filePlan is one file's records, [first, last], and their typing.
type filePlan struct {
	first, last xid.ID
	rows        int64
	typed       []ExportColumn
}

// columnName is what may follow f_ in a typed column's name.
var columnName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// fieldStats is the typing of one field over a file's records.
type fieldStats struct {
	seen          int64 // records that have it exactly once
	twice         bool  // a record has it twice
	isInt, isReal bool
	isText        bool
}

// planFile reads up to per records from from and types their fields.
func (n exporter) planFile(ctx context.Context, ref names.StreamRef, from, to xid.ID, per int) (filePlan, error) {
	var p filePlan
	stats := map[string]*fieldStats{}
	for r, err := range n.read(ctx, ref, ReadOptions{From: from, To: to, Limit: per}) {
		if err != nil {
			return filePlan{}, fmt.Errorf("export %s: %w", ref, err)
		}
		if p.rows == 0 {
			p.first = r.ID
			for _, f := range r.Fields { // the candidates: the first record's fields
				if s, ok := stats[f.Name]; ok {
					s.twice = true
				} else if columnName.MatchString(f.Name) {
					stats[f.Name] = &fieldStats{isInt: true, isReal: true, isText: true}
				}
			}
		}
		p.last = r.ID
		p.rows++
		count := map[string]int{}
		for _, f := range r.Fields {
			s, ok := stats[f.Name]
			if !ok || s.twice {
				continue
			}
			if count[f.Name]++; count[f.Name] > 1 {
				s.twice = true
				continue
			}
			s.seen++
			s.isInt = s.isInt && isInt(f.Value)
			s.isReal = s.isReal && isReal(f.Value)
			s.isText = s.isText && utf8.ValidString(f.Value)
		}
	}
	for name, s := range stats {
		if s.twice || s.seen != p.rows {
			continue
		}
		switch {
		case s.isInt:
			p.typed = append(p.typed, ExportColumn{Field: name, Type: "int64"})
		case s.isReal:
			p.typed = append(p.typed, ExportColumn{Field: name, Type: "double"})
		case s.isText:
			p.typed = append(p.typed, ExportColumn{Field: name, Type: "string"})
		}
	}
	sort.Slice(p.typed, func(i, j int) bool { return p.typed[i].Field < p.typed[j].Field })
	return p, nil
}

// isInt reports whether v is a base-10 int64 as strconv.FormatInt prints
// it.
func isInt(v string) bool {
	i, err := strconv.ParseInt(v, 10, 64)
	return err == nil && strconv.FormatInt(i, 10) == v
}

// isReal reports whether v is a finite decimal number: digits with an
// optional leading '-', a '.' and an exponent (strconv.ParseFloat), and no
// hexadecimal, '+', Inf or NaN.
func isReal(v string) bool {
	if v == "" || v[0] == '+' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && c != '.' && c != '-' && c != 'e' && c != 'E' && c != '+' {
			return false
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// exportSchema is the Parquet schema of a file with the typed columns.
func exportSchema(typed []ExportColumn) *parquet.Schema {
	g := parquet.Group{
		"id":       parquet.String(),
		"redis_id": parquet.String(),
		"time":     parquet.Timestamp(parquet.Millisecond),
		"fields": parquet.List(parquet.Group{
			"name":  parquet.Leaf(parquet.ByteArrayType),
			"value": parquet.Leaf(parquet.ByteArrayType),
		}),
	}
	for _, c := range typed {
		switch c.Type {
		case "int64":
			g["f_"+c.Field] = parquet.Int(64)
		case "double":
			g["f_"+c.Field] = parquet.Leaf(parquet.DoubleType)
		default:
			g["f_"+c.Field] = parquet.String()
		}
	}
	return parquet.NewSchema("record", g)
}

// writeFile writes the records of plan to their file.
func (n exporter) writeFile(ctx context.Context, ref names.StreamRef, dir string, plan filePlan) (ExportFile, error) {
	f := ExportFile{
		Name:    fmt.Sprintf("part-%020d-%020d.parquet", plan.last.Ms, plan.last.Seq),
		FirstID: FormatID(ref, plan.first), LastID: FormatID(ref, plan.last),
		FirstRedisID: plan.first.String(), LastRedisID: plan.last.String(), Typed: plan.typed,
	}
	if f.Typed == nil {
		f.Typed = []ExportColumn{}
	}
	path := filepath.Join(dir, f.Name)
	tmp, err := os.CreateTemp(dir, ".part-*.tmp")
	if err != nil {
		return ExportFile{}, fmt.Errorf("export %s: %w", ref, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	w := parquet.NewWriter(tmp, exportSchema(plan.typed), parquet.MaxRowsPerRowGroup(exportRowGroup),
		parquet.Compression(&zstd.Codec{}), parquet.CreatedBy("echostore", "", ""),
		parquet.KeyValueMetadata("echostore.stream", ref.String()))
	fail := func(err error) (ExportFile, error) {
		tmp.Close()
		return ExportFile{}, fmt.Errorf("export %s to %s: %w", ref, path, err)
	}
	typed := map[string]string{}
	for _, c := range plan.typed {
		typed[c.Field] = c.Type
	}
	row := map[string]any{}
	for r, err := range n.read(ctx, ref, ReadOptions{From: plan.first, To: plan.last}) {
		if err != nil {
			return fail(err)
		}
		clear(row)
		row["id"] = FormatID(ref, r.ID)
		row["redis_id"] = r.ID.String()
		row["time"] = time.UnixMilli(int64(r.ID.Ms)).UTC()
		fields := make([]any, len(r.Fields))
		for i, fl := range r.Fields {
			fields[i] = map[string]any{"name": []byte(fl.Name), "value": []byte(fl.Value)}
			switch typed[fl.Name] {
			case "int64":
				v, _ := strconv.ParseInt(fl.Value, 10, 64) // typed by planFile
				row["f_"+fl.Name] = v
			case "double":
				v, _ := strconv.ParseFloat(fl.Value, 64)
				row["f_"+fl.Name] = v
			case "string":
				row["f_"+fl.Name] = fl.Value
			}
		}
		row["fields"] = fields
		if err := w.Write(row); err != nil {
			return fail(err)
		}
		f.Rows++
	}
	if f.Rows != plan.rows {
		return fail(fmt.Errorf("the stream changed between the two reads of the file's records (%d records, then %d): export again", plan.rows, f.Rows))
	}
	if err := w.Close(); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return ExportFile{}, fmt.Errorf("export %s to %s: %w", ref, path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return ExportFile{}, fmt.Errorf("export %s to %s: %w", ref, path, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return ExportFile{}, fmt.Errorf("export %s to %s: %w", ref, path, err)
	}
	return f, nil
}

// loadManifest reads dir's manifest, or returns a new one for ref.
func loadManifest(dir string, ref names.StreamRef) (ExportManifestFile, error) {
	want := ExportManifestFile{Format: exportFormat, Files: []ExportFile{}}
	if ref.IsKey() {
		k, _ := ref.Key()
		want.Key = k.String()
	} else {
		want.Queue, want.Stream = ref.Queue().String(), ref.Stream().String()
	}
	b, err := os.ReadFile(filepath.Join(dir, ExportManifest))
	if errors.Is(err, fs.ErrNotExist) {
		return want, nil
	}
	if err != nil {
		return ExportManifestFile{}, fmt.Errorf("export %s: %w", ref, err)
	}
	var m ExportManifestFile
	if err := json.Unmarshal(b, &m); err != nil {
		return ExportManifestFile{}, fmt.Errorf("export %s: %s: %v: %w", ref, filepath.Join(dir, ExportManifest), err, ErrExportMismatch)
	}
	if m.Format != exportFormat || m.Queue != want.Queue || m.Stream != want.Stream || m.Key != want.Key {
		return ExportManifestFile{}, fmt.Errorf("export %s: %s is format %d of queue %q stream %q key %q: %w",
			ref, filepath.Join(dir, ExportManifest), m.Format, m.Queue, m.Stream, m.Key, ErrExportMismatch)
	}
	if m.Files == nil {
		m.Files = []ExportFile{}
	}
	return m, nil
}

// saveManifest replaces dir's manifest whole.
func saveManifest(dir string, m ExportManifestFile) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("export manifest: %w", err)
	}
	if err := durable.WriteFile(filepath.Join(dir, ExportManifest), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("export manifest: %w", err)
	}
	return nil
}
