package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"unicode/utf8"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

// Record page, version 1 (docs/ARCHIVE.md specifies it byte by byte). All
// integers are big-endian.
//
//	0   4  magic "EARC"
//	4   1  version, 1
//	5   8  the record's id (the 64 bits of the branded id)
//	13  4  f, the number of fields (≥ 1)
//	then f times:
//	    4  name length n, n bytes of name (UTF-8)
//	    4  value length v, v bytes of value (UTF-8)
//	last 4  CRC-32C (Castagnoli) of every byte before it
const (
	pageMagic   = "EARC"
	pageVersion = 1
	pageHeader  = 4 + 1 + 8 + 4
	pageMin     = pageHeader + 4 + 4 + 4 // one empty field and the CRC
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt: stored archive bytes (a record page or the volume's archive
// metadata) do not decode. Nothing was changed.
var ErrCorrupt = errors.New("archive: corrupt")

// AppendRecordPage appends the version-1 page of r to dst and returns it.
func AppendRecordPage(dst []byte, r mq.Record) []byte {
	start := len(dst)
	dst = append(dst, pageMagic...)
	dst = append(dst, pageVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.ID))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Fields)))
	for _, f := range r.Fields {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Name)))
		dst = append(dst, f.Name...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Value)))
		dst = append(dst, f.Value...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeRecordPage decodes a record page. It is total: any input either
// decodes to the record it encodes or fails with an error wrapping
// ErrCorrupt (bad magic, unknown version, bad CRC, lengths past the end,
// trailing bytes, no fields, a duplicate field name, invalid UTF-8).
func DecodeRecordPage(b []byte) (mq.Record, error) {
	bad := func(format string, args ...any) (mq.Record, error) {
		return mq.Record{}, fmt.Errorf("record page: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
	}
	if len(b) < pageMin {
		return bad("%d bytes, shorter than the smallest page (%d)", len(b), pageMin)
	}
	if string(b[:4]) != pageMagic {
		return bad("magic %q, want %q", b[:4], pageMagic)
	}
	if b[4] != pageVersion {
		return bad("version %d, this build reads version %d", b[4], pageVersion)
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		return bad("CRC-32C %08x, stored %08x", got, want)
	}
	id := brand.ID(binary.BigEndian.Uint64(body[5:13]))
	n := binary.BigEndian.Uint32(body[13:17])
	rest := body[pageHeader:]
	if n == 0 {
		return bad("no fields")
	}
	if uint64(n) > uint64(len(rest))/8 {
		return bad("%d fields cannot fit in %d bytes", n, len(rest))
	}
	fields := make([]mq.Field, 0, n)
	str := func() (string, bool) {
		if len(rest) < 4 {
			return "", false
		}
		l := binary.BigEndian.Uint32(rest)
		if uint64(l) > uint64(len(rest)-4) {
			return "", false
		}
		s := string(rest[4 : 4+l])
		rest = rest[4+l:]
		return s, true
	}
	for i := range n {
		name, ok1 := str()
		value, ok2 := str()
		if !ok1 || !ok2 {
			return bad("field %d runs past the end", i)
		}
		if !utf8.ValidString(name) || !utf8.ValidString(value) {
			return bad("field %d is not valid UTF-8", i)
		}
		fields = append(fields, mq.Field{Name: name, Value: value})
	}
	if len(rest) != 0 {
		return bad("%d bytes after the last field", len(rest))
	}
	if len(fields) > 1 {
		seen := make(map[string]struct{}, len(fields))
		for _, f := range fields {
			if _, dup := seen[f.Name]; dup {
				return bad("duplicate field %q", f.Name)
			}
			seen[f.Name] = struct{}{}
		}
	}
	return mq.Record{ID: id, Fields: fields}, nil
}
