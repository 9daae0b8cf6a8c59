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
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	pzstd "github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/graft/remote"
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
const ExportManifest = api.ExportManifest

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
	// Remote, instead of Dir (Node.Export only), puts the files and the
	// manifest into the node's remote bucket beside the volumes, under
	// exports/<the stream's volume>/ (ExportPrefix): a bucket DuckDB or
	// Spark read where they are. Each file is written to a temporary
	// file first and put whole, so it is held in memory once while it
	// is put (RowsPerFile bounds it). An encrypted remote
	// (Config.RemoteKeys) refuses it with ErrExportSealed: its files
	// would be plaintext beside sealed volumes, or sealed and of no use
	// to a reader.
	Remote bool
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

// ExportProgress is api.ExportProgress.
type ExportProgress = api.ExportProgress

// ExportFile is api.ExportFile.
type ExportFile = api.ExportFile

// ExportColumn is api.ExportColumn.
type ExportColumn = api.ExportColumn

// ExportManifestFile is api.ExportManifestFile.
type ExportManifestFile = api.ExportManifestFile

// ExportResult is api.ExportResult.
type ExportResult = api.ExportResult

// ErrExportSealed: an export into an encrypted remote (ExportOptions.Remote).
var ErrExportSealed = errors.New("echostore: the remote is encrypted: an export there would be plaintext beside sealed volumes; export to a folder")

// ExportPrefix returns the prefix of the remote keys under which
// ExportOptions.Remote puts the export of ref: exports/<its volume>/.
func ExportPrefix(ref names.StreamRef) string { return "exports/" + ref.Volume().String() + "/" }

// ErrExportMismatch: the folder holds the export of another stream, or a
// manifest this version cannot read.
var ErrExportMismatch = errors.New("echostore: the folder holds another export")

// Export writes the records of stream ref (the merge-read: its archive and
// its live tail) that came after the folder's last export, up to opts.To,
// to Parquet files in opts.Dir, and the manifest that lists them. A file is
// written whole under a temporary name and renamed, then the manifest is
// replaced whole, so a crash leaves either the file in the manifest or a
// file it does not name, which the next export removes before it writes
// those records again (perhaps with other bounds). Memory is bounded by a
// row group (exportRowGroup) and one file's typing, whatever the
// history's length: each file's records are read twice, once to type its
// columns and once to write them. The node runs one export at a time; a
// folder must not take two exports at once from different processes.
func (n *Node) Export(ctx context.Context, ref names.StreamRef, opts ExportOptions) (ExportResult, error) {
	n.exportMu.Lock()
	defer n.exportMu.Unlock()
	if !opts.Remote {
		return ExportFrom(ctx, n.Read, ref, opts)
	}
	switch {
	case ref.IsZero():
		return ExportResult{}, fmt.Errorf("export: no stream: %w", names.ErrInvalid)
	case opts.Dir != "":
		return ExportResult{}, fmt.Errorf("export %s: a folder and the remote: give one: %w", ref, ErrInvalid)
	case n.rs == nil:
		return ExportResult{}, fmt.Errorf("export %s into the remote: the node has none: %w", ref, ErrInvalid)
	case n.cfg.RemoteKeys != nil:
		return ExportResult{}, fmt.Errorf("export %s: %w", ref, ErrExportSealed)
	}
	tmp, err := os.MkdirTemp("", "echostore-export-")
	if err != nil {
		return ExportResult{}, fmt.Errorf("export %s: %w", ref, err)
	}
	defer os.RemoveAll(tmp)
	return exportTo(ctx, n.Read, ref, opts, remoteDest{rs: n.rs, prefix: ExportPrefix(ref), tmp: tmp})
}

// ReadFunc reads a stream as Node.Read does: Node.Read, or a client's read
// of a running serve (client.Client.Read).
type ReadFunc func(ctx context.Context, ref names.StreamRef, opts ReadOptions) iter.Seq2[Record, error]

// ExportFrom is Node.Export over read: a program that reads a stream
// through serve's API (the CLI while serve holds the data dir) exports it
// the same way, to a folder of its own machine.
func ExportFrom(ctx context.Context, read ReadFunc, ref names.StreamRef, opts ExportOptions) (ExportResult, error) {
	if ref.IsZero() {
		return ExportResult{}, fmt.Errorf("export: no stream: %w", names.ErrInvalid)
	}
	if opts.Remote {
		return ExportResult{}, fmt.Errorf("export %s into the remote: only Node.Export puts into its remote: %w", ref, ErrInvalid)
	}
	if opts.Dir == "" {
		return ExportResult{}, fmt.Errorf("export %s: no folder: %w", ref, ErrInvalid)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return ExportResult{}, fmt.Errorf("export %s: %w", ref, err)
	}
	return exportTo(ctx, read, ref, opts, dirDest(opts.Dir))
}

// exportTo is the export of ref into dest.
func exportTo(ctx context.Context, read ReadFunc, ref names.StreamRef, opts ExportOptions, dest exportDest) (ExportResult, error) {
	n := exporter{read: read}
	if opts.RowsPerFile < 0 {
		return ExportResult{}, fmt.Errorf("export %s: rows per file %d: want 1 or more (0: %d): %w", ref, opts.RowsPerFile, DefaultExportRows, ErrInvalid)
	}
	per := cmp0(opts.RowsPerFile, DefaultExportRows)
	to := opts.To
	if to.IsZero() {
		to = xid.Max
	}
	man, err := loadManifest(ctx, dest, ref)
	if err != nil {
		return ExportResult{}, err
	}
	// A crash between a file's placing and the manifest's save leaves a
	// file the manifest does not name, which the export writes again,
	// maybe with other bounds: gone first, so that a reader of the folder's
	// files never reads a record twice.
	named := make(map[string]bool, len(man.Files))
	for _, f := range man.Files {
		named[f.Name] = true
	}
	if err := dest.removeUnnamed(ctx, named); err != nil {
		return ExportResult{}, fmt.Errorf("export %s: the files a crash left: %w", ref, err)
	}
	res := ExportResult{Files: []ExportFile{}, Manifest: dest.where()}
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
		f, err := n.writeFile(ctx, ref, dest, plan)
		if err != nil {
			return res, err
		}
		man.Files = append(man.Files, f)
		w := f.LastRedisID
		man.Watermark = &w
		if err := saveManifest(ctx, dest, man); err != nil {
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
func (n exporter) writeFile(ctx context.Context, ref names.StreamRef, dest exportDest, plan filePlan) (ExportFile, error) {
	f := ExportFile{
		Name:    fmt.Sprintf("part-%020d-%020d.parquet", plan.last.Ms, plan.last.Seq),
		FirstID: FormatID(ref, plan.first), LastID: FormatID(ref, plan.last),
		FirstRedisID: plan.first.String(), LastRedisID: plan.last.String(), Typed: plan.typed,
	}
	if f.Typed == nil {
		f.Typed = []ExportColumn{}
	}
	path := dest.name(f.Name)
	tmp, err := os.CreateTemp(dest.tempDir(), ".part-*.tmp")
	if err != nil {
		return ExportFile{}, fmt.Errorf("export %s: %w", ref, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	codec, err := newExportCodec()
	if err != nil {
		tmp.Close()
		return ExportFile{}, fmt.Errorf("export %s: %w", ref, err)
	}
	defer codec.Close()
	w := parquet.NewWriter(tmp, exportSchema(plan.typed), parquet.MaxRowsPerRowGroup(exportRowGroup),
		parquet.Compression(codec), parquet.CreatedBy("echostore", "", ""),
		parquet.KeyValueMetadata("echostore.stream", ref.String()))
	fail := func(err error) (ExportFile, error) {
		tmp.Close()
		return ExportFile{}, fmt.Errorf("export %s to %s: %w", ref, path, err)
	}
	rb := newExportRows(w.Schema(), plan.typed)
	rows := make([]parquet.Row, 1)
	for r, err := range n.read(ctx, ref, ReadOptions{From: plan.first, To: plan.last}) {
		if err != nil {
			return fail(err)
		}
		rows[0] = rb.row(rows[0][:0], ref, r)
		if _, err := w.WriteRows(rows); err != nil {
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
	if err := dest.place(ctx, tmp.Name(), f.Name); err != nil {
		return ExportFile{}, fmt.Errorf("export %s to %s: %w", ref, path, err)
	}
	return f, nil
}

// exportWindow is the window of an export's zstd encoder: a Parquet page
// is compressed on its own and is much smaller (parquet-go's pages are
// 256 KiB before compression), so a larger window would only cost memory.
const exportWindow = 1 << 20

// exportCodec is Parquet's ZSTD codec with the one encoder of a file,
// of a small window (exportWindow): the library's codec pools encoders of
// the default 8 MiB window, one for each page written at once, and makes
// them anew after each garbage collection (measured: 32 MB resident and
// 160 MB allocated in an export of 3M records). It decodes as the
// library's does.
type exportCodec struct {
	pzstd.Codec
	enc *zstd.Encoder
}

// newExportCodec returns a codec whose Close releases its encoder.
func newExportCodec() (*exportCodec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(exportWindow),
		zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return &exportCodec{enc: enc}, nil
}

// Encode compresses src into dst (reused).
func (c *exportCodec) Encode(dst, src []byte) ([]byte, error) {
	return c.enc.EncodeAll(src, dst[:0]), nil
}

// Close releases the encoder.
func (c *exportCodec) Close() { _ = c.enc.Close() }

// exportRows builds the Parquet rows of a file's schema (exportSchema)
// from records, value by value in column order, without the reflection of
// a Go value's deconstruction: what is allocated per record is its id's
// text and, once, the row's values (reused from record to record).
type exportRows struct {
	// cols are the schema's leaf columns in index order, each what it
	// holds: colID, colRedisID, colTime, colName, colValue or colTyped
	// with typed naming the field and its type.
	cols  []exportCol
	idBuf []byte // the Redis id of the row under way
}

// exportCol is one leaf column of exportRows.
type exportCol struct {
	kind  int
	field string // colTyped: the field
	typ   string // colTyped: "int64", "double" or "string"
}

// The leaf columns of an export's file.
const (
	colID = iota
	colRedisID
	colTime
	colName  // fields.list.element.name
	colValue // fields.list.element.value
	colTyped // f_<name>
)

// newExportRows returns the row builder of schema, made by exportSchema
// with typed.
func newExportRows(schema *parquet.Schema, typed []ExportColumn) *exportRows {
	leaves := schema.Columns()
	b := &exportRows{cols: make([]exportCol, len(leaves))}
	for i, path := range leaves {
		switch name := path[0]; {
		case name == "id":
			b.cols[i] = exportCol{kind: colID}
		case name == "redis_id":
			b.cols[i] = exportCol{kind: colRedisID}
		case name == "time":
			b.cols[i] = exportCol{kind: colTime}
		case name == "fields" && path[len(path)-1] == "name":
			b.cols[i] = exportCol{kind: colName}
		case name == "fields":
			b.cols[i] = exportCol{kind: colValue}
		default:
			for _, c := range typed {
				if "f_"+c.Field == name {
					b.cols[i] = exportCol{kind: colTyped, field: c.Field, typ: c.Type}
				}
			}
		}
	}
	return b
}

// row appends the values of r's row to row and returns it. The values
// of its byte columns point into r (the writer copies them).
func (b *exportRows) row(row parquet.Row, ref names.StreamRef, r Record) parquet.Row {
	for i, c := range b.cols {
		switch c.kind {
		case colID:
			row = append(row, parquet.ByteArrayValue(bytesOf(FormatID(ref, r.ID))).Level(0, 0, i))
		case colRedisID:
			b.idBuf = r.ID.AppendText(b.idBuf[:0])
			row = append(row, parquet.ByteArrayValue(b.idBuf).Level(0, 0, i))
		case colTime:
			row = append(row, parquet.Int64Value(int64(r.ID.Ms)).Level(0, 0, i))
		case colName, colValue:
			if len(r.Fields) == 0 { // an empty list
				row = append(row, parquet.NullValue().Level(0, 0, i))
			}
			for j, f := range r.Fields {
				v := f.Name
				if c.kind == colValue {
					v = f.Value
				}
				row = append(row, parquet.ByteArrayValue(bytesOf(v)).Level(min(j, 1), 1, i))
			}
		case colTyped:
			v := ""
			for _, f := range r.Fields {
				if f.Name == c.field { // exactly once: planFile typed it
					v = f.Value
					break
				}
			}
			switch c.typ {
			case "int64":
				x, _ := strconv.ParseInt(v, 10, 64) // typed by planFile
				row = append(row, parquet.Int64Value(x).Level(0, 0, i))
			case "double":
				x, _ := strconv.ParseFloat(v, 64)
				row = append(row, parquet.DoubleValue(x).Level(0, 0, i))
			default:
				row = append(row, parquet.ByteArrayValue(bytesOf(v)).Level(0, 0, i))
			}
		}
	}
	return row
}

// bytesOf is the bytes of s, not copied: for a value the writer copies
// before s is gone, and never writes to.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// loadManifest reads dest's manifest, or returns a new one for ref.
func loadManifest(ctx context.Context, dest exportDest, ref names.StreamRef) (ExportManifestFile, error) {
	want := ExportManifestFile{Format: exportFormat, Files: []ExportFile{}}
	if ref.IsKey() {
		k, _ := ref.Key()
		want.Key = k.String()
	} else {
		want.Queue, want.Stream = ref.Queue().String(), ref.Stream().String()
	}
	b, err := dest.manifest(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return want, nil
	}
	if err != nil {
		return ExportManifestFile{}, fmt.Errorf("export %s: %w", ref, err)
	}
	var m ExportManifestFile
	if err := json.Unmarshal(b, &m); err != nil {
		return ExportManifestFile{}, fmt.Errorf("export %s: %s: %v: %w", ref, dest.where(), err, ErrExportMismatch)
	}
	if m.Format != exportFormat || m.Queue != want.Queue || m.Stream != want.Stream || m.Key != want.Key {
		return ExportManifestFile{}, fmt.Errorf("export %s: %s is format %d of queue %q stream %q key %q: %w",
			ref, dest.where(), m.Format, m.Queue, m.Stream, m.Key, ErrExportMismatch)
	}
	if m.Files == nil {
		m.Files = []ExportFile{}
	}
	return m, nil
}

// saveManifest replaces dest's manifest whole.
func saveManifest(ctx context.Context, dest exportDest, m ExportManifestFile) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("export manifest: %w", err)
	}
	if err := dest.saveManifest(ctx, append(b, '\n')); err != nil {
		return fmt.Errorf("export manifest: %w", err)
	}
	return nil
}

// exportDest is where an export's files and manifest go: a folder
// (dirDest) or the remote bucket (remoteDest).
type exportDest interface {
	// manifest returns the manifest's bytes, or an error wrapping
	// fs.ErrNotExist before the first export.
	manifest(ctx context.Context) ([]byte, error)
	// saveManifest replaces the manifest whole.
	saveManifest(ctx context.Context, b []byte) error
	// tempDir is the folder a file is written in before place.
	tempDir() string
	// place makes the whole file at tmp the export's file name.
	place(ctx context.Context, tmp, name string) error
	// removeUnnamed removes the export's files (part-*.parquet) that
	// named does not hold, and the temporaries a crash left.
	removeUnnamed(ctx context.Context, named map[string]bool) error
	// name is where the export's file name is, as errors and results
	// show it; where is the manifest's.
	name(file string) string
	where() string
}

// dirDest is an export into a folder: a file is written in the folder
// itself and renamed into place, then the folder synced.
type dirDest string

func (d dirDest) manifest(context.Context) ([]byte, error) { return os.ReadFile(d.where()) }

func (d dirDest) saveManifest(_ context.Context, b []byte) error {
	return durable.WriteFile(d.where(), b, 0o600)
}

func (d dirDest) tempDir() string { return string(d) }

func (d dirDest) place(_ context.Context, tmp, name string) error {
	if err := os.Rename(tmp, d.name(name)); err != nil {
		return err
	}
	return durable.SyncDir(string(d))
}

func (d dirDest) removeUnnamed(_ context.Context, named map[string]bool) error {
	ents, err := os.ReadDir(string(d))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if isExportPart(e.Name()) && !named[e.Name()] || strings.HasPrefix(e.Name(), ".part-") && strings.HasSuffix(e.Name(), ".tmp") ||
			e.Name() == ExportManifest+durable.TempSuffix {
			if err := os.Remove(d.name(e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// isExportPart reports whether name is the name of an export's file.
func isExportPart(name string) bool {
	return strings.HasPrefix(name, "part-") && strings.HasSuffix(name, ".parquet")
}

func (d dirDest) name(file string) string { return filepath.Join(string(d), file) }
func (d dirDest) where() string           { return d.name(ExportManifest) }

// remoteDest is an export into the remote bucket under prefix: a file is
// written in tmp and put whole (a put is atomic: a reader sees all of an
// object or none).
type remoteDest struct {
	rs     remote.Store
	prefix string
	tmp    string
}

func (d remoteDest) manifest(ctx context.Context) ([]byte, error) {
	b, err := d.rs.Get(ctx, d.where())
	if errors.Is(err, remote.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", d.where(), fs.ErrNotExist)
	}
	return b, err
}

func (d remoteDest) saveManifest(ctx context.Context, b []byte) error {
	return d.rs.Put(ctx, d.where(), b)
}

func (d remoteDest) tempDir() string { return d.tmp }

func (d remoteDest) place(ctx context.Context, tmp, name string) error {
	b, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	return d.rs.Put(ctx, d.name(name), b)
}

func (d remoteDest) removeUnnamed(ctx context.Context, named map[string]bool) error {
	objs, err := d.rs.List(ctx, d.prefix, 0)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if name := strings.TrimPrefix(o.Key, d.prefix); isExportPart(name) && !named[name] {
			if err := d.rs.Delete(ctx, o.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d remoteDest) name(file string) string { return d.prefix + file }
func (d remoteDest) where() string           { return d.name(ExportManifest) }
