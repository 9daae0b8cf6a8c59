package api_test

import (
	"testing"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/xid"
)

// The record codec on the paths that carry records: a read renders each
// record (AppendJSONAs), a client parses what a read printed (UnmarshalJSON,
// ParseFieldsJSON) and a claimed job (Job.UnmarshalJSON). serve's append
// parse is server's BenchmarkParseRecords. An op is one record or job:
//
//	go test -run='^$' -bench='JSON' -benchmem -count=6 ./api/

// benchRecords are the shapes measured: three small fields (bench all's)
// in a queue's stream, and a record whose value is a JSON document (quotes
// to escape, non-ASCII) in a stream at a key, whose ids print as Redis ids.
var benchRecords = []struct {
	name string
	form api.IDForm
	rec  api.Record
}{
	{"small", api.IDBranded, api.Record{ID: brand.ID(1<<22 | 5).XID(), Fields: []api.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: "12345"}}}},
	{"payload", api.IDRedis, api.Record{ID: xid.ID{Ms: 1_700_000_012_345, Seq: 7}, Fields: []api.Field{
		{Name: "type", Value: "order.created"},
		{Name: "payload", Value: `{"order":"ord_81723","customer":"Zoë Müller","lines":[{"sku":"A-1","qty":2,"price":"12.50"},{"sku":"B-7","qty":1,"price":"3.99"}],"note":"leave at the door <back>"}`},
		{Name: "trace", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}}},
}

func BenchmarkAppendJSON(b *testing.B) {
	for _, c := range benchRecords {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 1<<16)
			b.SetBytes(int64(len(api.AppendJSONAs(nil, c.rec, c.form))))
			for b.Loop() {
				buf = api.AppendJSONAs(buf[:0], c.rec, c.form)
			}
		})
	}
}

func BenchmarkRecordUnmarshalJSON(b *testing.B) {
	for _, c := range benchRecords {
		b.Run(c.name, func(b *testing.B) {
			data := api.AppendJSONAs(nil, c.rec, c.form)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var r api.Record
				if err := r.UnmarshalJSON(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseFieldsJSON(b *testing.B) {
	for _, c := range benchRecords {
		b.Run(c.name, func(b *testing.B) {
			data := api.AppendFieldsJSON(nil, c.rec.Fields)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := api.ParseFieldsJSON(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkJobUnmarshalJSON(b *testing.B) {
	j := api.Job{ID: 1<<22 | 9, EntryID: "1704067200001-9", Attempt: 2, Fields: benchRecords[0].rec.Fields}
	data, err := j.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var d api.Job
		if err := d.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}
