package archive

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// Records larger than a page (docs/ARCHIVE.md, "Records spanning pages").
// A record whose version-2 page would be longer than PageLimit is written
// as a head page (version 3) followed, at the next page offsets, by k
// continuation pages (version 4). The record's body is what a version-2
// page holds between its id and its CRC: f, the number of fields, then
// each field's name and value with their 4-byte lengths. The body is cut
// into parts, in order: the head holds the first, continuation i (1 … k)
// the i+1-th. All integers are big-endian.
//
// Version 3, the head:
//
//	0   4  magic "EARC"
//	4   1  version, 3
//	5   8  the Redis id's milliseconds
//	13  8  the Redis id's sequence
//	21  4  k, the number of continuation pages that follow (≥ 1)
//	25  8  L, the length of the whole body in bytes
//	33  …  the first part of the body (≥ 1 byte)
//	last 4  CRC-32C (Castagnoli) of every byte before it
//
// Version 4, continuation i:
//
//	0   4  magic "EARC"
//	4   1  version, 4
//	5   8  the Redis id's milliseconds (the head's)
//	13  8  the Redis id's sequence (the head's)
//	21  4  i, its place after the head (1 … k)
//	25  …  part i+1 of the body (≥ 1 byte)
//	last 4  CRC-32C (Castagnoli) of every byte before it
//
// Every page of the record carries its id, so the bisection over the page
// axis (which finds the first page of an id) lands on the head. The
// record counts as one record and k+1 pages. Retention that drops the
// head but not all of its continuations leaves continuations at the
// start of the retained pages that no head precedes: readers skip them,
// as the record was dropped.
const (
	pageVersion3 = 3
	pageVersion4 = 4
	pageHeader3  = 4 + 1 + 16 + 4 + 8
	pageHeader4  = 4 + 1 + 16 + 4

	// PageLimit is the largest record page a fold writes: graft's
	// default page size limit (graft.DefaultMaxPageSize, 1 MiB).
	PageLimit = graft.DefaultMaxPageSize

	// MaxRecordBytes is the largest record body the archive holds: 1 GiB
	// (the bytes of every name and value plus 8 per field and 4). That is
	// every entry a Redis of default settings accepts: one XADD is at most
	// client-query-buffer-max-len (1 GiB) long, each value at most
	// proto-max-bulk-len (512 MB). A Redis configured beyond them can hold a
	// larger entry: a cycle neither archives nor trims it, but holds its
	// trim below the entry and reports it (*TooLargeError,
	// CycleResult.TooLarge), as a stalled consumer group holds it.
	MaxRecordBytes = 1 << 30
)

// ErrTooLarge: a record is larger than the archive holds (MaxRecordBytes)
// (api.ErrTooLarge).
var ErrTooLarge = api.ErrTooLarge

// TooLargeError is api.TooLargeError: which record was too large, and by
// how much. It wraps ErrTooLarge.
type TooLargeError = api.TooLargeError

// recordBodySize returns the length of r's body: 4 + Σ (8 + name + value).
func recordBodySize(r mq.Record) int {
	n := 4
	for _, f := range r.Fields {
		n += 8 + len(f.Name) + len(f.Value)
	}
	return n
}

// checkRecordSize returns a *TooLargeError if r's body is above limit
// (≤ 0 or above MaxRecordBytes: MaxRecordBytes).
func checkRecordSize(r mq.Record, limit int) error {
	if limit <= 0 || limit > MaxRecordBytes {
		limit = MaxRecordBytes
	}
	if n := recordBodySize(r); n > limit {
		return &TooLargeError{ID: r.ID, XID: r.ID.String(), Bytes: n, Max: limit}
	}
	return nil
}

// appendRecordPages calls put with each page of r in order: one page
// (AppendRecordPage) when it is at most limit bytes, else a head and its
// continuations, each at most limit bytes. It returns the number of pages.
// buf is scratch space, returned for reuse; a page passed to put is only
// valid during the call.
func appendRecordPages(buf []byte, r mq.Record, limit int, put func(page []byte) error) ([]byte, int, error) {
	buf = AppendRecordPage(buf[:0], r)
	if len(buf) <= limit {
		return buf, 1, put(buf)
	}
	if buf[4] != pageVersion2 { // a version-1 page has no room for 16-byte ids
		buf = appendRecordPage(buf[:0], r, pageVersion2)
	}
	body := buf[pageHeader2-4 : len(buf)-4]
	first := limit - pageHeader3 - 4
	each := limit - pageHeader4 - 4
	k := (len(body) - first + each - 1) / each
	page := make([]byte, 0, limit)
	page = appendSpanHeader(page, pageVersion3, r.ID, uint32(k))
	page = binary.BigEndian.AppendUint64(page, uint64(len(body)))
	page = append(page, body[:first]...)
	page = binary.BigEndian.AppendUint32(page, crc32.Checksum(page, durable.Castagnoli))
	if err := put(page); err != nil {
		return buf, 0, err
	}
	rest := body[first:]
	for i := 1; i <= k; i++ {
		part := rest[:min(each, len(rest))]
		rest = rest[len(part):]
		page = appendSpanHeader(page[:0], pageVersion4, r.ID, uint32(i))
		page = append(page, part...)
		page = binary.BigEndian.AppendUint32(page, crc32.Checksum(page, durable.Castagnoli))
		if err := put(page); err != nil {
			return buf, 0, err
		}
	}
	return buf, k + 1, nil
}

// appendSpanHeader appends the first 25 bytes of a version-3 or -4 page.
func appendSpanHeader(dst []byte, version byte, id xid.ID, n uint32) []byte {
	dst = append(dst, pageMagic...)
	dst = append(dst, version)
	dst = binary.BigEndian.AppendUint64(dst, id.Ms)
	dst = binary.BigEndian.AppendUint64(dst, id.Seq)
	return binary.BigEndian.AppendUint32(dst, n)
}

// spanPage is a decoded version-3 or -4 page.
type spanPage struct {
	version byte
	id      xid.ID
	n       uint32 // version 3: k; version 4: i
	total   uint64 // version 3: L
	part    []byte // the part of the body it holds (aliases the page)
}

// pageVersionOf returns the version byte of a record page, 0 if b is too
// short or has no record page magic.
func pageVersionOf(b []byte) byte {
	if len(b) < 5 || string(b[:4]) != pageMagic {
		return 0
	}
	return b[4]
}

// decodeSpanPage decodes a version-3 or -4 page: magic, version, CRC and
// header; it does not look into the part.
func decodeSpanPage(b []byte) (spanPage, error) {
	bad := func(format string, args ...any) (spanPage, error) {
		return spanPage{}, fmt.Errorf("record page: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
	}
	v := pageVersionOf(b)
	header := pageHeader4
	switch v {
	case pageVersion3:
		header = pageHeader3
	case pageVersion4:
	default:
		return bad("not a page of a record spanning pages (version %d)", v)
	}
	if len(b) < header+1+4 {
		return bad("%d bytes, shorter than the smallest version-%d page (%d)", len(b), v, header+1+4)
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, durable.Castagnoli), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return bad("CRC-32C %08x, stored %08x", got, want)
	}
	p := spanPage{version: v,
		id:   xid.ID{Ms: binary.BigEndian.Uint64(b[5:13]), Seq: binary.BigEndian.Uint64(b[13:21])},
		n:    binary.BigEndian.Uint32(b[21:25]),
		part: body[header:]}
	if v == pageVersion3 {
		p.total = binary.BigEndian.Uint64(b[25:33])
		if p.n == 0 {
			return bad("a version-3 page with no continuation")
		}
		if p.total > MaxRecordBytes {
			return bad("a record body of %d bytes, at most %d", p.total, MaxRecordBytes)
		}
	} else if p.n == 0 {
		return bad("continuation 0")
	}
	return p, nil
}

// spanAssembler puts a record spanning pages back together from its
// pages, given in page order (forward) or in reverse.
type spanAssembler struct {
	reverse bool
	active  bool
	id      xid.ID
	k       uint32   // forward: from the head
	next    uint32   // the continuation expected next
	total   uint64   // forward: from the head
	parts   [][]byte // reverse: the continuations seen, last first
	body    []byte   // forward: the body so far, behind a version-2 header
}

// add takes the next page (a copy is kept of what it needs). It returns
// the record when p completes one.
func (s *spanAssembler) add(p spanPage) (mq.Record, bool, error) {
	bad := func(format string, args ...any) (mq.Record, bool, error) {
		return mq.Record{}, false, fmt.Errorf("record spanning pages: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
	}
	if !s.reverse {
		if p.version == pageVersion3 {
			if s.active {
				return bad("a head (%s) before continuation %d of %s", p.id, s.next, s.id)
			}
			s.active, s.id, s.k, s.next, s.total = true, p.id, p.n, 1, p.total
			s.body = appendV2Header(s.body[:0], p.id)
			s.body = append(s.body, p.part...)
			return mq.Record{}, false, nil
		}
		if !s.active || p.id != s.id || p.n != s.next || p.n > s.k {
			return bad("continuation %d of %s out of place", p.n, p.id)
		}
		s.body = append(s.body, p.part...)
		if uint64(len(s.body)-(pageHeader2-4)) > s.total {
			return bad("%s longer than its head says (%d bytes)", s.id, s.total)
		}
		if s.next++; p.n < s.k {
			return mq.Record{}, false, nil
		}
		s.active = false
		if got := uint64(len(s.body) - (pageHeader2 - 4)); got != s.total {
			return bad("%s is %d bytes, its head says %d", s.id, got, s.total)
		}
		return finishSpan(s.body)
	}
	if p.version == pageVersion4 {
		switch {
		case !s.active:
			s.active, s.id, s.next, s.parts = true, p.id, p.n, s.parts[:0]
		case p.id != s.id || p.n+1 != s.next:
			return bad("continuation %d of %s out of place", p.n, p.id)
		}
		s.next = p.n
		s.parts = append(s.parts, append([]byte(nil), p.part...))
		return mq.Record{}, false, nil
	}
	if !s.active || p.id != s.id || s.next != 1 || uint32(len(s.parts)) != p.n {
		return bad("a head of %s with %d continuations out of place", p.id, p.n)
	}
	s.active = false
	n := len(p.part)
	for _, q := range s.parts {
		n += len(q)
	}
	if uint64(n) != p.total {
		return bad("%s is %d bytes, its head says %d", p.id, n, p.total)
	}
	s.body = appendV2Header(s.body[:0], p.id)
	s.body = append(s.body, p.part...)
	for i := len(s.parts) - 1; i >= 0; i-- {
		s.body = append(s.body, s.parts[i]...)
	}
	s.parts = s.parts[:0]
	return finishSpan(s.body)
}

// appendV2Header appends the first 21 bytes of a version-2 page of id.
func appendV2Header(dst []byte, id xid.ID) []byte {
	dst = append(dst, pageMagic...)
	dst = append(dst, pageVersion2)
	dst = binary.BigEndian.AppendUint64(dst, id.Ms)
	return binary.BigEndian.AppendUint64(dst, id.Seq)
}

// finishSpan decodes an assembled body (behind its version-2 header) as
// the version-2 page it would have been.
func finishSpan(b []byte) (mq.Record, bool, error) {
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, durable.Castagnoli))
	r, err := DecodeRecordPage(b)
	if err != nil {
		return mq.Record{}, false, fmt.Errorf("record spanning pages: %w", err)
	}
	return r, true, nil
}

// DecodeRecordPages decodes one record from all of its pages, in page
// order: a single page of version 1 or 2, or a version-3 head and its
// continuations. It is total: any input either decodes to the record it
// encodes or fails with an error wrapping ErrCorrupt.
func DecodeRecordPages(pages [][]byte) (mq.Record, error) {
	if len(pages) == 0 {
		return mq.Record{}, fmt.Errorf("record: no pages: %w", ErrCorrupt)
	}
	if v := pageVersionOf(pages[0]); v != pageVersion3 && v != pageVersion4 {
		if len(pages) != 1 {
			return mq.Record{}, fmt.Errorf("record: %d pages after a version-%d page: %w", len(pages)-1, v, ErrCorrupt)
		}
		return DecodeRecordPage(pages[0])
	}
	var s spanAssembler
	for i, b := range pages {
		p, err := decodeSpanPage(b)
		if err != nil {
			return mq.Record{}, fmt.Errorf("record: page %d: %w", i, err)
		}
		r, done, err := s.add(p)
		if err != nil {
			return mq.Record{}, fmt.Errorf("record: page %d: %w", i, err)
		}
		if done {
			if i != len(pages)-1 {
				return mq.Record{}, fmt.Errorf("record: %d pages after its last: %w", len(pages)-1-i, ErrCorrupt)
			}
			return r, nil
		}
	}
	return mq.Record{}, fmt.Errorf("record: ends before its last continuation: %w", ErrCorrupt)
}
