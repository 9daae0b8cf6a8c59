package remote

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/echostore/echostore/names"
)

// pageData returns the deterministic content of page idx written at lsn:
// size bytes, compressible, unique to (lsn, idx).
func pageData(lsn, idx uint64, size int) []byte {
	b := make([]byte, size)
	var tag [16]byte
	binary.LittleEndian.PutUint64(tag[:], lsn)
	binary.LittleEndian.PutUint64(tag[8:], idx)
	for i := range b {
		if i%64 < 16 {
			b[i] = tag[i%16]
		} else {
			b[i] = byte(i / 64)
		}
	}
	return b
}

// pagesAt returns n pages from first, step apart, of size bytes, written
// at lsn.
func pagesAt(lsn, first, step uint64, n, size int) []Page {
	ps := make([]Page, n)
	for i := range ps {
		idx := first + uint64(i)*step
		ps[i] = Page{Index: idx, Data: pageData(lsn, idx, size)}
	}
	return ps
}

// draftOn returns a draft of n pages of size bytes on top of base.
func draftOn(base Entry, n, size int, meta string) Draft {
	lsn := base.LSN() + 1
	d := Draft{LSN: lsn, Prev: base.Hash, LocalFrom: lsn * 10, LocalTo: lsn*10 + 3,
		Pages: pagesAt(lsn, lsn%7, 3, n, size)}
	if meta != "" {
		d.Meta = map[string][]byte{"writer": []byte(meta), "lsn": []byte(fmt.Sprint(lsn))}
	}
	return d
}

func mustLog(t testing.TB, s Store, volume string) *Log {
	t.Helper()
	l, err := NewLog(s, mustVolume(t, volume))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// verifyPages fetches every page of e and compares it with pageData as
// written at the LSN recorded in want (index -> lsn).
func verifyPages(t testing.TB, l *Log, e Entry, size func(idx uint64) int, want map[uint64]uint64) {
	t.Helper()
	for _, r := range e.Commit.Pages() {
		got, err := l.FetchPage(context.Background(), r)
		if err != nil {
			t.Fatalf("lsn %d page %d: %v", e.LSN(), r.Index, err)
		}
		lsn, ok := want[r.Index]
		if !ok {
			t.Fatalf("lsn %d references page %d, not expected", e.LSN(), r.Index)
		}
		if exp := pageData(lsn, r.Index, size(r.Index)); string(got) != string(exp) {
			t.Fatalf("lsn %d page %d: wrong bytes", e.LSN(), r.Index)
		}
	}
}

// mustVolume parses a volume name a test knows to be valid.
func mustVolume(t testing.TB, s string) names.Volume {
	t.Helper()
	v, err := names.ParseVolume(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
