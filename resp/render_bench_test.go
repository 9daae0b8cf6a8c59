package resp

import (
	"testing"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/xid"
)

// BenchmarkAppendEntry is the front's rendering of one stream entry of the
// shape bench all reads (three small fields), into a reused reply buffer:
//
//	go test -run='^$' -bench=AppendEntry -benchmem ./resp/
func BenchmarkAppendEntry(b *testing.B) {
	rec := echostore.Record{ID: xid.ID{Ms: 1_700_000_012_345, Seq: 0}, Fields: []echostore.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: "12345"}}}
	buf := make([]byte, 0, 1<<20)
	b.SetBytes(int64(len(appendEntry(nil, rec))))
	for b.Loop() {
		if len(buf) > 1<<20-256 {
			buf = buf[:0]
		}
		buf = appendEntry(buf, rec)
	}
}
