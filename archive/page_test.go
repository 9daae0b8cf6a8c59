package archive

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

func TestRecordPageRoundTrip(t *testing.T) {
	r := mq.Record{ID: brand.ID(0x0123456789abcdef).XID(), Fields: []mq.Field{{Name: "b", Value: "2"}, {Name: "a", Value: ""}, {Name: "é", Value: "ü\x00x"}}}
	b := AppendRecordPage(nil, r)
	got, err := DecodeRecordPage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mq.AppendJSON(nil, got), mq.AppendJSON(nil, r)) {
		t.Fatalf("round trip: %s, want %s", mq.AppendJSON(nil, got), mq.AppendJSON(nil, r))
	}
	// The bytes of docs/ARCHIVE.md's example.
	ex := AppendRecordPage(nil, mq.Record{ID: brand.ID(1).XID(), Fields: []mq.Field{{Name: "k", Value: "v"}}})
	want := []byte{'E', 'A', 'R', 'C', 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 'k', 0, 0, 0, 1, 'v', 0xd2, 0x1c, 0xfa, 0x8a}
	if !bytes.Equal(ex, want) {
		t.Fatalf("page bytes %x, want %x", ex, want)
	}
	// Every single-byte flip and every truncation is ErrCorrupt.
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, err := DecodeRecordPage(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip of byte %d: err %v, want ErrCorrupt", i, err)
		}
		if _, err := DecodeRecordPage(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncation to %d: err %v, want ErrCorrupt", i, err)
		}
	}
}

// v2Records are records a version-1 page cannot hold: ids without a
// branded id, duplicate names, bytes that are not UTF-8, empty values.
func v2Records() []mq.Record {
	return []mq.Record{
		{ID: xid.ID{Ms: 0, Seq: 1}, Fields: []mq.Field{{Name: "k", Value: "v"}}},
		{ID: xid.ID{Ms: 1704067200001, Seq: 1 << 22}, Fields: []mq.Field{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}, {Name: "e", Value: ""}}},
		{ID: brand.ID(7).XID(), Fields: []mq.Field{{Name: "\xff\x00", Value: "\xfe"}, {Name: "", Value: ""}}},
		{ID: xid.Max, Fields: []mq.Field{{Name: "k", Value: "v"}}},
	}
}

// TestRecordPageV2: records v1 cannot hold are written as v2 and read back
// exactly; records v1 can hold are still written as v1; the bytes of
// docs/ARCHIVE.md's v2 example; every flip and truncation is ErrCorrupt.
func TestRecordPageV2(t *testing.T) {
	for _, r := range v2Records() {
		b := AppendRecordPage(nil, r)
		if b[4] != 2 {
			t.Fatalf("%v: version %d, want 2", r.ID, b[4])
		}
		got, err := DecodeRecordPage(b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("v2 round trip of %+v: %+v, %v", r, got, err)
		}
		for i := range b {
			c := bytes.Clone(b)
			c[i] ^= 0x40
			if _, err := DecodeRecordPage(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip of byte %d: err %v, want ErrCorrupt", i, err)
			}
			if _, err := DecodeRecordPage(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncation to %d: err %v, want ErrCorrupt", i, err)
			}
		}
	}
	if b := AppendRecordPage(nil, rec(9)); b[4] != 1 {
		t.Fatalf("a branded record is written as version %d, want 1", b[4])
	}
	// A branded record forced into v2 reads back the same.
	r := rec(9)
	if got, err := DecodeRecordPage(appendRecordPage(nil, r, 2)); err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("v2 of a branded record: %+v, %v", got, err)
	}
	// docs/ARCHIVE.md, "Record page, version 2": record 0-1, k = v, 39 bytes.
	want, _ := hex.DecodeString("4541524302" + "0000000000000000" + "0000000000000001" + "00000001" + "000000016b" + "0000000176" + crcHex(t, "4541524302"+"0000000000000000"+"0000000000000001"+"00000001"+"000000016b"+"0000000176"))
	if got := AppendRecordPage(nil, v2Records()[0]); !bytes.Equal(got, want) {
		t.Fatalf("v2 example %x, want %x", got, want)
	}
	// Version 1 still refuses what it cannot hold.
	dup := appendRecordPage(nil, mq.Record{ID: brand.ID(7).XID(), Fields: []mq.Field{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}}, 1)
	if _, err := DecodeRecordPage(dup); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("v1 page with duplicate names: %v", err)
	}
	if _, err := DecodeRecordPage(append([]byte("EARC\x03"), make([]byte, 40)...)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3: %v", err)
	}
}

func crcHex(t *testing.T, body string) string {
	t.Helper()
	b, err := hex.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, durable.Castagnoli)))
}

// FuzzDecodeRecordPage: the decoder is total over both versions; what it
// accepts re-encodes, in its version, to the same bytes, and a version-1
// page holds only a record that version 1 can hold.
func FuzzDecodeRecordPage(f *testing.F) {
	f.Add(AppendRecordPage(nil, mq.Record{ID: brand.ID(7).XID(), Fields: []mq.Field{{Name: "k", Value: "v"}}}))
	f.Add(AppendRecordPage(nil, mq.Record{ID: brand.Max.XID(), Fields: []mq.Field{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}}}))
	f.Add(appendRecordPage(nil, mq.Record{ID: brand.ID(7).XID(), Fields: []mq.Field{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}}, 1))
	for _, r := range v2Records() {
		f.Add(AppendRecordPage(nil, r))
	}
	f.Add([]byte("EARC\x01"))
	f.Add([]byte("EARC\x02"))
	check := func(t *testing.T, b []byte) {
		r, err := DecodeRecordPage(b)
		// A read's decoder (shared blocks) decodes the same record, or
		// fails the same way.
		var d pageDecoder
		d.text.WriteString("earlier") // the page's text after another record's
		rd, errd := decodeRecordPage(b, &d)
		if fmt.Sprint(err) != fmt.Sprint(errd) || (err == nil && !reflect.DeepEqual(r, rd)) {
			t.Fatalf("with a decoder: %+v, %v; without: %+v, %v", rd, errd, r, err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(r.Fields) == 0 {
			t.Fatalf("decoded a record without fields")
		}
		if b[4] == 1 {
			if _, ok := pageFitsV1(r); !ok {
				t.Fatalf("a version-1 page decoded to a record version 1 cannot hold: %+v", r)
			}
		}
		if again := appendRecordPage(nil, r, b[4]); !bytes.Equal(again, b) {
			t.Fatalf("decoded page does not re-encode to its bytes")
		}
		if again := AppendRecordPage(nil, r); !bytes.Equal(again, b) && b[4] == 1 {
			t.Fatalf("a version-1 page is not what the encoder writes for its record")
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		// The same bytes with a valid CRC, so that the fuzzer reaches the
		// parsing behind the checksum.
		if len(b) >= 4 {
			fixed := bytes.Clone(b)
			binary.BigEndian.PutUint32(fixed[len(b)-4:], crc32.Checksum(fixed[:len(b)-4], durable.Castagnoli))
			check(t, fixed)
		}
	})
}

// TestPageVersionChoice: the version a fold writes, around the edges of
// what version 1 holds (many fields take the map path of the check).
func TestPageVersionChoice(t *testing.T) {
	many := func(dupAt int) mq.Record {
		r := mq.Record{ID: brand.ID(9).XID()}
		for i := range 40 {
			r.Fields = append(r.Fields, mq.Field{Name: fmt.Sprint("f", i), Value: "v"})
		}
		if dupAt >= 0 {
			r.Fields[dupAt].Name = "f0"
		}
		return r
	}
	for _, c := range []struct {
		name string
		r    mq.Record
		want byte
	}{
		{"branded", rec(9), 1},
		{"40 fields", many(-1), 1},
		{"40 fields, a repeat", many(39), 2},
		{"last branded millisecond", mq.Record{ID: brand.Max.XID(), Fields: []mq.Field{{Name: "k", Value: "v"}}}, 1},
		{"after the branded range", mq.Record{ID: xid.ID{Ms: brand.Max.XID().Ms + 1}, Fields: []mq.Field{{Name: "k", Value: "v"}}}, 2},
		{"before the epoch", mq.Record{ID: xid.ID{Ms: uint64(brand.EpochMillis) - 1, Seq: 5}, Fields: []mq.Field{{Name: "k", Value: "v"}}}, 2},
		{"invalid UTF-8 name", mq.Record{ID: brand.ID(9).XID(), Fields: []mq.Field{{Name: "\xc3", Value: "v"}}}, 2},
	} {
		b := AppendRecordPage(nil, c.r)
		if b[4] != c.want {
			t.Fatalf("%s: version %d, want %d", c.name, b[4], c.want)
		}
		if got, err := DecodeRecordPage(b); err != nil || !reflect.DeepEqual(got, c.r) {
			t.Fatalf("%s: decodes to %+v, %v", c.name, got, err)
		}
	}
}

// TestPageDecoderBlocks: records decoded by one pageDecoder share blocks of
// text and fields, and every record kept stays what DecodeRecordPage
// decodes, across block boundaries and beside records too large to share.
func TestPageDecoderBlocks(t *testing.T) {
	var d pageDecoder
	var pages [][]byte
	var got []mq.Record
	for i := range 3000 {
		r := mq.Record{ID: xid.ID{Ms: uint64(1000 + i), Seq: uint64(i % 3)}}
		for k := range 1 + i%5 {
			r.Fields = append(r.Fields, mq.Field{Name: fmt.Sprintf("f%d", k), Value: strings.Repeat(string(rune('a'+k)), i%97)})
		}
		if i%500 == 7 { // larger than a quarter block: a string of its own
			r.Fields = append(r.Fields, mq.Field{Name: "big", Value: strings.Repeat("z", decoderText)})
		}
		if i%700 == 3 { // more fields than a quarter block
			for k := range decoderFields {
				r.Fields = append(r.Fields, mq.Field{Name: fmt.Sprintf("g%d", k), Value: "v"})
			}
		}
		p := AppendRecordPage(nil, r)
		pages = append(pages, p)
		rec, err := decodeRecordPage(p, &d)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	for i, p := range pages {
		want, err := DecodeRecordPage(p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("record %d: %v, want %v", i, got[i].ID, want.ID)
		}
		if cap(got[i].Fields) != len(got[i].Fields) {
			t.Fatalf("record %d: fields of capacity %d for %d: an append would write into the next record's", i, cap(got[i].Fields), len(got[i].Fields))
		}
	}
}
