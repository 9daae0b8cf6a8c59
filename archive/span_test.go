package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// pagesOf returns the pages appendRecordPages writes for r at limit.
func pagesOf(t testing.TB, r mq.Record, limit int) [][]byte {
	t.Helper()
	var pages [][]byte
	_, n, err := appendRecordPages(nil, r, limit, func(p []byte) error {
		if len(p) > limit {
			t.Fatalf("a page of %d bytes, limit %d", len(p), limit)
		}
		pages = append(pages, bytes.Clone(p))
		return nil
	})
	if err != nil || n != len(pages) {
		t.Fatalf("appendRecordPages: %d pages, %d put, %v", n, len(pages), err)
	}
	return pages
}

// bigRecord is a record of about n bytes that no version-1 page holds:
// binary bytes and a repeated name.
func bigRecord(id xid.ID, n int) mq.Record {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(i*7 + i>>8)
	}
	return mq.Record{ID: id, Fields: []mq.Field{{Name: "k", Value: string(v)}, {Name: "\xff", Value: ""}, {Name: "k", Value: "2"}}}
}

// TestRecordSpanningPages: a record above the page limit is a head and
// its continuations, each within the limit, and decodes back; records at
// the limit's edges take one page or two; the bytes of docs/ARCHIVE.md's
// example; every flip, truncation, missing, repeated or swapped page is
// ErrCorrupt.
func TestRecordSpanningPages(t *testing.T) {
	small := mq.Record{ID: xid.ID{Ms: 1, Seq: 2}, Fields: []mq.Field{{Name: "k", Value: strings.Repeat("v", 40)}}}
	// The v2 page of small is 21 + 4 + 4+1 + 4+40 + 4 = 78 bytes.
	if got := pagesOf(t, small, 78); len(got) != 1 || got[0][4] != 2 {
		t.Fatalf("at the limit: %d pages", len(got))
	}
	pages := pagesOf(t, small, 77)
	if len(pages) != 2 || pages[0][4] != 3 || pages[1][4] != 4 {
		t.Fatalf("one byte over the limit: %d pages", len(pages))
	}
	// docs/ARCHIVE.md: the record 1-2 {k: vvvv…} at a 60-byte limit.
	ex := pagesOf(t, small, 60)
	want := [][]byte{
		append([]byte("EARC\x03\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x35"),
			"\x00\x00\x00\x01\x00\x00\x00\x01k\x00\x00\x00\x28vvvvvvvvvv"...),
		append([]byte("EARC\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x01"), strings.Repeat("v", 30)...),
	}
	if len(ex) != 2 {
		t.Fatalf("example: %d pages", len(ex))
	}
	for i := range want {
		want[i] = binary.BigEndian.AppendUint32(want[i], crc32.Checksum(want[i], durable.Castagnoli))
		if !bytes.Equal(ex[i], want[i]) {
			t.Fatalf("example page %d:\n %x\nwant %x", i, ex[i], want[i])
		}
	}
	if len(ex[0]) != 60 || len(ex[1]) != 59 {
		t.Fatalf("example pages of %d and %d bytes", len(ex[0]), len(ex[1]))
	}
	for _, limit := range []int{40, 41, 60, 77} {
		pages := pagesOf(t, small, limit)
		got, err := DecodeRecordPages(pages)
		if err != nil || !reflect.DeepEqual(got, small) {
			t.Fatalf("limit %d: %+v, %v", limit, got, err)
		}
		for p := range pages {
			for i := range pages[p] {
				c := slices.Clone(pages)
				c[p] = bytes.Clone(pages[p])
				c[p][i] ^= 0x40
				if _, err := DecodeRecordPages(c); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("limit %d: flip of byte %d of page %d: %v", limit, i, p, err)
				}
				c[p] = pages[p][:i]
				if _, err := DecodeRecordPages(c); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("limit %d: page %d cut to %d bytes: %v", limit, p, i, err)
				}
			}
			for _, c := range [][][]byte{
				slices.Delete(slices.Clone(pages), p, p+1),
				slices.Insert(slices.Clone(pages), p, pages[p]),
			} {
				if _, err := DecodeRecordPages(c); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("limit %d: page %d missing or repeated: %v", limit, p, err)
				}
			}
			if p > 0 {
				c := slices.Clone(pages)
				c[p], c[p-1] = c[p-1], c[p]
				if _, err := DecodeRecordPages(c); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("limit %d: pages %d and %d swapped: %v", limit, p-1, p, err)
				}
			}
		}
	}
	// A branded record above the limit spans pages too (16-byte ids).
	br := mq.Record{ID: brand.ID(5).XID(), Fields: []mq.Field{{Name: "a", Value: strings.Repeat("x", 100)}}}
	if got, err := DecodeRecordPages(pagesOf(t, br, 50)); err != nil || !reflect.DeepEqual(got, br) {
		t.Fatalf("branded: %+v, %v", got, err)
	}
	// At the real limit: 3 MiB is a head and 3 continuations.
	big := bigRecord(xid.ID{Ms: 9, Seq: 9}, 3<<20)
	pages = pagesOf(t, big, PageLimit)
	if len(pages) != 4 {
		t.Fatalf("3 MiB: %d pages", len(pages))
	}
	if got, err := DecodeRecordPages(pages); err != nil || !reflect.DeepEqual(got, big) {
		t.Fatalf("3 MiB: %v", err)
	}
}

// TestSpanningRecordsFoldAndRead: records above a page fold among small
// ones and read back byte for byte, by any range, both ways; a record
// above MaxRecordBytes is refused by Fold with a *TooLargeError; retention
// that cuts a record's pages drops the whole record.
func TestSpanningRecordsFoldAndRead(t *testing.T) {
	ctx := testCtx(t)
	v := testVolume(t)
	want := []mq.Record{
		{ID: xid.ID{Ms: 1, Seq: 0}, Fields: []mq.Field{{Name: "k", Value: "a"}}},
		bigRecord(xid.ID{Ms: 2, Seq: 0}, 3<<20),
		{ID: xid.ID{Ms: 3, Seq: 0}, Fields: []mq.Field{{Name: "k", Value: "b"}}},
		bigRecord(xid.ID{Ms: 4, Seq: 0}, PageLimit),
		bigRecord(xid.ID{Ms: 5, Seq: 1 << 40}, 2<<20),
	}
	st, err := Fold(ctx, v, want[:3])
	if err != nil {
		t.Fatal(err)
	}
	if st, err = Fold(ctx, v, want[3:]); err != nil {
		t.Fatal(err)
	}
	if st.Pages != 1+4+1+2+3 || st.W != want[4].ID {
		t.Fatalf("state %+v", st)
	}
	check := func(t *testing.T, want []mq.Record, from, to xid.ID) {
		t.Helper()
		if got := readAllRecords(t, Read(ctx, v, from, to, false)); !reflect.DeepEqual(got, want) {
			t.Fatalf("[%v, %v]: %d records, want %d", from, to, len(got), len(want))
		}
		rev := slices.Clone(want)
		slices.Reverse(rev)
		if got := readAllRecords(t, Read(ctx, v, from, to, true)); !reflect.DeepEqual(got, rev) {
			t.Fatalf("reverse [%v, %v]: %d records, want %d", from, to, len(got), len(rev))
		}
	}
	for i := range want {
		for j := i; j < len(want); j++ {
			check(t, want[i:j+1], want[i].ID, want[j].ID)
		}
	}
	check(t, want, xid.Min, xid.Max)
	check(t, nil, xid.ID{Ms: 2, Seq: 1}, xid.ID{Ms: 2, Seq: 9})

	// A record above MaxRecordBytes: 1100 fields that share one 1 MiB
	// value make a body of 1100 MiB in 1 MiB of memory.
	mib := string(make([]byte, 1<<20))
	over := mq.Record{ID: xid.ID{Ms: 6}}
	for range 1100 {
		over.Fields = append(over.Fields, mq.Field{Name: "k", Value: mib})
	}
	_, err = Fold(ctx, v, []mq.Record{over})
	var tl *TooLargeError
	if !errors.Is(err, ErrBadSlice) || !errors.As(err, &tl) || tl.ID != over.ID || tl.Bytes <= MaxRecordBytes || tl.Max != MaxRecordBytes {
		t.Fatalf("too large: %v", err)
	}
	// The fold of a cycle (here with a limit of 2 MiB) stops at a record
	// too large: W stays below it, and nothing after it is folded.
	const limit = 2 << 20
	huge := bigRecord(xid.ID{Ms: 6}, limit)
	after := mq.Record{ID: xid.ID{Ms: 7}, Fields: []mq.Field{{Name: "k", Value: "c"}}}
	before, err := Frontier(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	st, big, err := foldAs(ctx, v, []mq.Record{huge, after}, nil, limit)
	if err != nil || len(big) != 1 || big[0].ID != huge.ID || big[0].Max != limit || st != before {
		t.Fatalf("fold of a too large record: %+v (before %+v), %v, %v", st, before, big, err)
	}
	if st, big, err = foldAs(ctx, v, []mq.Record{after, bigRecord(xid.ID{Ms: 8}, limit)}, nil, limit); err != nil || len(big) != 1 ||
		st.W != after.ID || st.Pages != before.Pages+1 {
		t.Fatalf("a record, then one too large: %+v, %v, %v", st, big, err)
	}
	want = append(want, after)
	check(t, want, xid.Min, xid.Max)

	// Keep 9 of 12 pages: pages 0-2 go, the head of want[1] and its first
	// continuation with them; its other continuations are skipped.
	if _, _, err := Retain(ctx, v, Retention{Count: 9}, time.Now()); err != nil {
		t.Fatal(err)
	}
	check(t, want[2:], xid.Min, xid.Max)
	check(t, want[2:4], want[1].ID, want[3].ID)
	// Keep 2: only the last continuation of want[4], and after.
	if _, _, err := Retain(ctx, v, Retention{Count: 2}, time.Now()); err != nil {
		t.Fatal(err)
	}
	check(t, want[5:], xid.Min, xid.Max)
	check(t, nil, xid.Min, want[4].ID)
}

// FuzzDecodeRecordPages: the decoder of a record's pages is total; what it
// accepts is a record within MaxRecordBytes that re-encodes and decodes
// back to itself at any page limit. The input is a sequence of pages,
// each behind a uvarint length.
func FuzzDecodeRecordPages(f *testing.F) {
	join := func(pages [][]byte) []byte {
		var b []byte
		for _, p := range pages {
			b = binary.AppendUvarint(b, uint64(len(p)))
			b = append(b, p...)
		}
		return b
	}
	small := mq.Record{ID: xid.ID{Ms: 1, Seq: 2}, Fields: []mq.Field{{Name: "k", Value: strings.Repeat("v", 40)}, {Name: "k", Value: "\xff"}}}
	for _, limit := range []int{40, 60, 200} {
		f.Add(join(pagesOf(f, small, limit)), false)
	}
	f.Add(join(pagesOf(f, rec(3), 100)), true)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		var pages [][]byte
		for len(b) > 0 && len(pages) < 64 {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return
			}
			p := bytes.Clone(b[k : k+int(n)])
			if fixCRC && len(p) >= 4 {
				binary.BigEndian.PutUint32(p[len(p)-4:], crc32.Checksum(p[:len(p)-4], durable.Castagnoli))
			}
			pages = append(pages, p)
			b = b[k+int(n):]
		}
		r, err := DecodeRecordPages(pages)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(r.Fields) == 0 || recordBodySize(r) > MaxRecordBytes {
			t.Fatalf("decoded a record without fields or too large")
		}
		for _, limit := range []int{40, 64, PageLimit} {
			if again, err := DecodeRecordPages(pagesOf(t, r, limit)); err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("limit %d: re-encoded %+v decodes to %+v, %v", limit, r, again, err)
			}
		}
	})
}
