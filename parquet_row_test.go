package echostore

import (
	"strconv"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"pgregory.net/rapid"

	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// TestExportRowsDeconstruct: the rows exportRows builds by hand equal what
// parquet-go's deconstruction of the same record as a Go value gives, for
// records of any fields (none, repeated names, binary values) and any
// typed columns, of streams of a queue and at a key.
func TestExportRowsDeconstruct(t *testing.T) {
	queueRef, err := names.ParseStreamRef("q", "s")
	if err != nil {
		t.Fatal(err)
	}
	keyRef, err := names.ParseKeyRef("app:events")
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		ref := rapid.SampledFrom([]names.StreamRef{queueRef, keyRef}).Draw(t, "ref")
		fieldNames := []string{"n", "x", "kind", "a_b"}
		var typed []ExportColumn
		for _, name := range fieldNames {
			if typ := rapid.SampledFrom([]string{"", "int64", "double", "string"}).Draw(t, "type "+name); typ != "" {
				typed = append(typed, ExportColumn{Field: name, Type: typ})
			}
		}
		schema := exportSchema(typed)
		rb := newExportRows(schema, typed)
		var row parquet.Row
		for range rapid.IntRange(1, 4).Draw(t, "records") {
			r := Record{ID: xid.ID{Ms: rapid.Uint64Range(1, 1<<45).Draw(t, "ms"), Seq: rapid.Uint64().Draw(t, "seq")}}
			for range rapid.IntRange(0, 4).Draw(t, "fields") {
				r.Fields = append(r.Fields, Field{Name: rapid.SampledFrom(fieldNames).Draw(t, "name"), Value: rapid.String().Draw(t, "value") + string([]byte{0xff})})
			}
			for _, c := range typed { // the typed fields, once each, as planFile would have typed them
				v := strconv.Itoa(rapid.IntRange(-1000, 1000).Draw(t, "int"))
				if c.Type == "double" {
					v += ".5"
				}
				r.Fields = dropField(r.Fields, c.Field)
				r.Fields = append(r.Fields, Field{Name: c.Field, Value: v})
			}
			row = rb.row(row[:0], ref, r)
			want := schema.Deconstruct(nil, deconstructable(ref, r, typed))
			if !row.Equal(want) {
				t.Fatalf("record %+v, typed %v:\n built  %v\n want   %v", r, typed, row, want)
			}
		}
	})
}

// dropField returns fields without those named name.
func dropField(fields []Field, name string) []Field {
	out := fields[:0]
	for _, f := range fields {
		if f.Name != name {
			out = append(out, f)
		}
	}
	return out
}

// deconstructable is r as a Go value of exportSchema(typed) that
// parquet-go deconstructs by reflection: the oracle of exportRows.
func deconstructable(ref names.StreamRef, r Record, typed []ExportColumn) map[string]any {
	row := map[string]any{
		"id":       FormatID(ref, r.ID),
		"redis_id": r.ID.String(),
		"time":     time.UnixMilli(int64(r.ID.Ms)).UTC(),
	}
	fields := make([]any, len(r.Fields))
	for i, f := range r.Fields {
		fields[i] = map[string]any{"name": []byte(f.Name), "value": []byte(f.Value)}
		for _, c := range typed {
			if c.Field != f.Name {
				continue
			}
			switch c.Type {
			case "int64":
				v, _ := strconv.ParseInt(f.Value, 10, 64)
				row["f_"+f.Name] = v
			case "double":
				v, _ := strconv.ParseFloat(f.Value, 64)
				row["f_"+f.Name] = v
			default:
				row["f_"+f.Name] = f.Value
			}
		}
	}
	row["fields"] = fields
	return row
}
