package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

func TestRecordPageRoundTrip(t *testing.T) {
	r := mq.Record{ID: brand.ID(0x0123456789abcdef), Fields: []mq.Field{{Name: "b", Value: "2"}, {Name: "a", Value: ""}, {Name: "é", Value: "ü\x00x"}}}
	b := AppendRecordPage(nil, r)
	got, err := DecodeRecordPage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mq.AppendJSON(nil, got), mq.AppendJSON(nil, r)) {
		t.Fatalf("round trip: %s, want %s", mq.AppendJSON(nil, got), mq.AppendJSON(nil, r))
	}
	// The bytes of docs/ARCHIVE.md's example.
	ex := AppendRecordPage(nil, mq.Record{ID: 1, Fields: []mq.Field{{Name: "k", Value: "v"}}})
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

func FuzzDecodeRecordPage(f *testing.F) {
	f.Add(AppendRecordPage(nil, mq.Record{ID: 7, Fields: []mq.Field{{Name: "k", Value: "v"}}}))
	f.Add(AppendRecordPage(nil, mq.Record{ID: brand.Max, Fields: []mq.Field{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}}}))
	f.Add(AppendRecordPage(nil, mq.Record{ID: 7, Fields: []mq.Field{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}}))
	f.Add([]byte("EARC\x01"))
	check := func(t *testing.T, b []byte) {
		r, err := DecodeRecordPage(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := (mq.Limits{MaxFields: 1 << 30, MaxBytes: 1 << 30}).Check(r.Fields); err != nil {
			t.Fatalf("decoded an invalid record: %v", err)
		}
		if again := AppendRecordPage(nil, r); !bytes.Equal(again, b) {
			t.Fatalf("decoded page does not re-encode to its bytes")
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		// The same bytes with a valid CRC, so that the fuzzer reaches the
		// parsing behind the checksum.
		if len(b) >= 4 {
			fixed := bytes.Clone(b)
			binary.BigEndian.PutUint32(fixed[len(b)-4:], crc32.Checksum(fixed[:len(b)-4], castagnoli))
			check(t, fixed)
		}
	})
}
