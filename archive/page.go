package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"unicode/utf8"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// Record pages (docs/ARCHIVE.md specifies both byte by byte). All integers
// are big-endian.
//
// Version 1, a branded record (its id has a brand.ID; names distinct;
// names and values valid UTF-8):
//
//	0   4  magic "EARC"
//	4   1  version, 1
//	5   8  the record's id (the 64 bits of the branded id)
//	13  4  f, the number of fields (≥ 1)
//	then f times:
//	    4  name length n, n bytes of name (UTF-8)
//	    4  value length v, v bytes of value (UTF-8)
//	last 4  CRC-32C (Castagnoli) of every byte before it
//
// Version 2, any stream entry Redis stores:
//
//	0   4  magic "EARC"
//	4   1  version, 2
//	5   8  the Redis id's milliseconds
//	13  8  the Redis id's sequence
//	21  4  f, the number of fields (≥ 1)
//	then f times:
//	    4  name length n, n bytes of name (any bytes)
//	    4  value length v, v bytes of value (any bytes)
//	last 4  CRC-32C (Castagnoli) of every byte before it
//
// A fold writes version 1 for a record that fits it and version 2 only for
// one that does not, so that a volume of branded records stays byte for
// byte what earlier releases write and read.
const (
	pageMagic    = "EARC"
	pageVersion  = 1
	pageVersion2 = 2
	pageHeader   = 4 + 1 + 8 + 4
	pageHeader2  = 4 + 1 + 16 + 4
	pageMin      = pageHeader + 4 + 4 + 4 // one empty field and the CRC
)

// ErrCorrupt: stored archive bytes (a record page or the volume's archive
// metadata) do not decode. Nothing was changed.
var ErrCorrupt = errors.New("archive: corrupt")

// AppendRecordPage appends the page of r to dst and returns it: version 1
// if r fits it (pageFitsV1), else version 2.
func AppendRecordPage(dst []byte, r mq.Record) []byte {
	if _, ok := pageFitsV1(r); ok {
		return appendRecordPage(dst, r, pageVersion)
	}
	return appendRecordPage(dst, r, pageVersion2)
}

// pageFitsV1 reports whether r can be written as a version-1 page, and its
// branded id if so: the id has one, the names are distinct, and names and
// values are valid UTF-8.
func pageFitsV1(r mq.Record) (brand.ID, bool) {
	id, err := brand.FromXID(r.ID)
	if err != nil {
		return 0, false
	}
	for _, f := range r.Fields {
		if !utf8.ValidString(f.Name) || !utf8.ValidString(f.Value) {
			return 0, false
		}
	}
	if len(r.Fields) <= 16 {
		for i := 1; i < len(r.Fields); i++ {
			for j := 0; j < i; j++ {
				if r.Fields[i].Name == r.Fields[j].Name {
					return 0, false
				}
			}
		}
		return id, true
	}
	seen := make(map[string]struct{}, len(r.Fields))
	for _, f := range r.Fields {
		if _, dup := seen[f.Name]; dup {
			return 0, false
		}
		seen[f.Name] = struct{}{}
	}
	return id, true
}

// appendRecordPage appends the page of r in the given version; version 1
// requires pageFitsV1(r).
func appendRecordPage(dst []byte, r mq.Record, version byte) []byte {
	start := len(dst)
	dst = append(dst, pageMagic...)
	dst = append(dst, version)
	if version == pageVersion {
		id, _ := brand.FromXID(r.ID)
		dst = binary.BigEndian.AppendUint64(dst, uint64(id))
	} else {
		dst = binary.BigEndian.AppendUint64(dst, r.ID.Ms)
		dst = binary.BigEndian.AppendUint64(dst, r.ID.Seq)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Fields)))
	for _, f := range r.Fields {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Name)))
		dst = append(dst, f.Name...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Value)))
		dst = append(dst, f.Value...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], durable.Castagnoli))
}

// DecodeRecordPage decodes a record page of version 1 or 2. It is total:
// any input either decodes to the record it encodes or fails with an error
// wrapping ErrCorrupt (bad magic, unknown version, bad CRC, lengths past
// the end, trailing bytes, no fields; in version 1 also a duplicate field
// name or invalid UTF-8, which version 2 holds).
func DecodeRecordPage(b []byte) (mq.Record, error) { return decodeRecordPage(b, nil) }

// pageDecoder decodes the record pages of one read: the names and values of
// many records share blocks of text it allocates, and their fields share
// blocks of mq.Field, so a record costs no allocation of its own (a
// record the caller keeps keeps its blocks, at most decoderText bytes of
// text and decoderFields fields).
type pageDecoder struct {
	text   strings.Builder
	fields []mq.Field
}

const (
	decoderText   = 64 << 10 // bytes of text (names, values and their lengths) per block
	decoderFields = 512      // fields per block
)

// textOf returns rest (a page's checked fields: each name and value after
// its 4-byte length) as a string in a block shared with other records, so
// that the names and values are substrings of it at their offsets in rest:
// one copy for the record, not one for each name and value. A large record
// (more than a quarter block of names and values, total bytes of them) gets
// its names and values end to end in a string of its own, and ok false.
func (d *pageDecoder) textOf(rest []byte, total int) (s string, ok bool) {
	if total > decoderText/4 || len(rest) > decoderText/2 {
		return joinFields(rest, total), false
	}
	if d.text.Cap()-d.text.Len() < len(rest) {
		d.text = strings.Builder{}
		d.text.Grow(decoderText)
	}
	start := d.text.Len()
	d.text.Write(rest)
	// Earlier substrings stay valid: the builder appends past them.
	return d.text.String()[start:], true
}

// fieldsOf returns n fields in a block shared with other records.
func (d *pageDecoder) fieldsOf(n int) []mq.Field {
	if n > decoderFields/4 {
		return make([]mq.Field, n)
	}
	if cap(d.fields)-len(d.fields) < n {
		d.fields = make([]mq.Field, 0, decoderFields)
	}
	at := len(d.fields)
	d.fields = d.fields[:at+n]
	return d.fields[at : at+n : at+n]
}

// joinFields returns the names and values of rest end to end, total bytes.
func joinFields(rest []byte, total int) string {
	var sb strings.Builder
	sb.Grow(total)
	for walk := rest; len(walk) > 0; {
		f, w, _ := cutField(walk)
		sb.Write(f)
		walk = w
	}
	return sb.String()
}

// decodeRecordPage is DecodeRecordPage; with d, the record's strings and
// fields are in d's blocks.
func decodeRecordPage(b []byte, d *pageDecoder) (mq.Record, error) {
	bad := func(format string, args ...any) (mq.Record, error) {
		return mq.Record{}, fmt.Errorf("record page: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
	}
	if len(b) < pageMin {
		return bad("%d bytes, shorter than the smallest page (%d)", len(b), pageMin)
	}
	if string(b[:4]) != pageMagic {
		return bad("magic %q, want %q", b[:4], pageMagic)
	}
	version := b[4]
	header := pageHeader
	switch version {
	case pageVersion:
	case pageVersion2:
		header = pageHeader2
		if len(b) < pageHeader2+4+4+4 {
			return bad("%d bytes, shorter than the smallest version-2 page (%d)", len(b), pageHeader2+4+4+4)
		}
	default:
		return bad("version %d, this build reads versions %d and %d", version, pageVersion, pageVersion2)
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, durable.Castagnoli), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return bad("CRC-32C %08x, stored %08x", got, want)
	}
	var id xid.ID
	if version == pageVersion {
		id = brand.ID(binary.BigEndian.Uint64(body[5:13])).XID()
	} else {
		id = xid.ID{Ms: binary.BigEndian.Uint64(body[5:13]), Seq: binary.BigEndian.Uint64(body[13:21])}
	}
	n := binary.BigEndian.Uint32(body[header-4 : header])
	rest := body[header:]
	if n == 0 {
		return bad("no fields")
	}
	if uint64(n) > uint64(len(rest))/8 {
		return bad("%d fields cannot fit in %d bytes", n, len(rest))
	}
	// Names and values are substrings of one string that holds them all:
	// one allocation (or none, in a decoder's block) for a record's
	// strings, not one for each name and value. The first pass checks the
	// page and sums the lengths.
	total := 0
	ascii := true // every length's 4 bytes are ASCII (lengths below 128)
	walk := rest
	for i := range n {
		name, w, ok1 := cutField(walk)
		if ok1 {
			ascii = ascii && walk[0]|walk[1]|walk[2]|walk[3] < utf8.RuneSelf
		}
		value, w2, ok2 := cutField(w)
		if !ok1 || !ok2 {
			if j, bad8 := invalidUTF8(rest, int(i)); bad8 && version == pageVersion {
				return bad("field %d is not valid UTF-8", j) // found first, as field by field
			}
			return bad("field %d runs past the end", i)
		}
		ascii = ascii && w[0]|w[1]|w[2]|w[3] < utf8.RuneSelf
		total += len(name) + len(value)
		walk = w2
	}
	// Version 1: names and values valid UTF-8. With ASCII lengths between
	// them, rest is valid UTF-8 exactly when each of them is (an ASCII byte
	// neither continues a sequence nor is continued), so one call checks
	// them all; otherwise, or to name the field that fails, one each. A
	// page with both faults names the one a field-by-field walk meets
	// first.
	if version == pageVersion && (!ascii || len(walk) != 0 || !utf8.Valid(rest)) {
		if i, bad8 := invalidUTF8(rest, int(n)); bad8 {
			return bad("field %d is not valid UTF-8", i)
		}
	}
	if len(walk) != 0 {
		return bad("%d bytes after the last field", len(walk))
	}
	var all string
	var fields []mq.Field
	framed := false // all is rest, lengths included
	if d != nil {
		all, framed = d.textOf(rest, total)
		fields = d.fieldsOf(int(n))
	} else {
		all, fields = joinFields(rest, total), make([]mq.Field, n)
	}
	at := 0
	for i := range fields {
		nl := int(binary.BigEndian.Uint32(rest))
		rest = rest[4+nl:]
		vl := int(binary.BigEndian.Uint32(rest))
		rest = rest[4+vl:]
		if framed {
			fields[i] = mq.Field{Name: all[at+4 : at+4+nl], Value: all[at+8+nl : at+8+nl+vl]}
			at += 8 + nl + vl
		} else {
			fields[i] = mq.Field{Name: all[at : at+nl], Value: all[at+nl : at+nl+vl]}
			at += nl + vl
		}
	}
	if version == pageVersion && len(fields) > 1 {
		if dup, ok := api.DuplicateName(fields); ok {
			return bad("duplicate field %q", dup)
		}
	}
	return mq.Record{ID: id, Fields: fields}, nil
}

// invalidUTF8 returns the first of the first n fields of rest whose name
// or value is not valid UTF-8, if one is; rest holds at least n fields.
func invalidUTF8(rest []byte, n int) (int, bool) {
	for i := range n {
		name, w, _ := cutField(rest)
		value, w, _ := cutField(w)
		if !utf8.Valid(name) || !utf8.Valid(value) {
			return i, true
		}
		rest = w
	}
	return 0, false
}

// cutField returns the length-prefixed field at the front of b and the rest
// of b, or false if b is too short for it.
func cutField(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	l := binary.BigEndian.Uint32(b)
	if uint64(l) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+l], b[4+l:], true
}
