package server

import (
	"bytes"
	"strconv"
	"testing"
)

// BenchmarkParseRecords parses an append body of 1,000 JSON lines of
// three small fields (echostore-bench http's); an op is one record.
//
//	go test -run='^$' -bench=ParseRecords -benchmem ./server/
func BenchmarkParseRecords(b *testing.B) {
	var body bytes.Buffer
	for i := range 1000 {
		body.WriteString(`{"fields":{"kind":"order","n":"` + strconv.Itoa(i) + `","amount":"12.50"}}` + "\n")
	}
	for b.Loop() {
		for range 1 {
			if _, err := parseRecords(body.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/rec")
}
