package client

import (
	"testing"

	"github.com/echostore/echostore/names"
)

// FuzzDecodeRecord: a line of a key stream's read never panics the
// decoder, and a record it accepts has a Redis id and fields.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		`{"id":"1733052000000-0","fields":{"a":"b"}}`,
		`{"id":"EVT_0000000040005","fields":{"a":"b"}}`,
		`{"id":"1-","fields":{}}`, `{"id":"x"}`, `{`, ``, `{"id":"18446744073709551615-0","fields":{"a":"b"}}`,
	} {
		f.Add([]byte(s))
	}
	ref, err := names.ParseKeyRef("orders")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := decodeRecord(ref, line)
		if err != nil {
			return
		}
		if len(rec.Fields) == 0 {
			t.Fatalf("decodeRecord(%q) accepted a record without fields", line)
		}
	})
}
