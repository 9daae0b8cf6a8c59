package archive

import (
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

// BenchmarkDecodeRecordPage is the merge-read's cost per archived record
// of the shape bench all reads (three small fields, page version 1):
//
//	go test -run='^$' -bench=DecodeRecordPage -benchmem ./archive/
func BenchmarkDecodeRecordPage(b *testing.B) {
	r := mq.Record{ID: brand.ID(1 << 40).XID(), Fields: []mq.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: "12345"}}}
	page := appendRecordPage(nil, r, pageVersion)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRecordPage(page); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRecordPageRead is the same page decoded as a read decodes
// it (readAt's pageDecoder: records share blocks of text and fields).
func BenchmarkDecodeRecordPageRead(b *testing.B) {
	r := mq.Record{ID: brand.ID(1 << 40).XID(), Fields: []mq.Field{{Name: "user", Value: "u-1234"}, {Name: "kind", Value: "click"}, {Name: "n", Value: "12345"}}}
	page := appendRecordPage(nil, r, pageVersion)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	var d pageDecoder
	for b.Loop() {
		if _, err := decodeRecordPage(page, &d); err != nil {
			b.Fatal(err)
		}
	}
}
