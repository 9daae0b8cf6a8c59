package api

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/xid"
)

// This file is the one place that renders records as JSON and the one that
// parses them back. The encoder is deterministic: a record prints the same
// bytes wherever it was read from (the live stream now, the archive later).
// The decoder is strict: it keeps field order, rejects duplicate names,
// invalid UTF-8 (raw, or as a lone surrogate escape) and non-string values,
// instead of silently repairing them as encoding/json would.
//
// Both stay hand-written, not on jsontext (which reads claimed jobs and
// dead letters, json_decode.go), because on jsontext they measured slower
// where they sit on hot paths (docs/BENCHMARKS.md, "JSON codec on
// jsontext"; medians of per-round ratios, interleaved runs):
//   - the decoder, on jsontext.Decoder (ReadToken and ReadValue, its
//     duplicate-name check, strings unquoted from its values, one decoder
//     over a whole body of JSON lines): serve's append parse
//     (server's BenchmarkParseRecords) 1.32–1.82× the time of this one,
//     Record.UnmarshalJSON 1.30–1.52×, ParseFieldsJSON (a client's read)
//     1.44–1.97× on three small fields;
//   - the encoder: a jsontext.Encoder with EscapeForHTML and EscapeForJS
//     took 1.36–2.46× the time of AppendJSONAs, and writes \b and \f where
//     this one writes \u0008 and \u000c; jsontext.AppendQuote is faster but
//     escapes neither <, >, & nor U+2028 and U+2029, so json.Marshal of a
//     record (which escapes them) would no longer print what AppendJSON
//     prints.

// MarshalJSON renders r as AppendJSON does.
func (r Record) MarshalJSON() ([]byte, error) {
	return AppendJSON(make([]byte, 0, 32+2*FieldsSize(r.Fields)+8*len(r.Fields)), r), nil
}

// IDForm selects how AppendJSONAs prints a record's id.
type IDForm uint8

const (
	// IDBranded prints the branded form "EVT_…" when the id has one
	// (brand.FromXID), else the Redis id "ms-seq". The default.
	IDBranded IDForm = iota
	// IDRedis prints the Redis id "ms-seq" always (streams whose producers
	// are not echostore's).
	IDRedis
)

// FormatID returns id as AppendJSONAs prints it in form: EVT_… when form is
// IDBranded and id has a branded id, else the Redis id "ms-seq".
func FormatID(id xid.ID, form IDForm) string {
	return string(appendID(make([]byte, 0, 41), id, form))
}

// FormatIDs is FormatID of each of ids (as AppendBatch returns them), as
// strings that share one backing allocation (the ids of one append's
// reply, formatted at once).
func FormatIDs(ids []brand.ID, form IDForm) []string {
	buf := make([]byte, 0, len(ids)*24)
	ends := make([]int, len(ids))
	for i, id := range ids {
		buf = appendID(buf, id.XID(), form)
		ends[i] = len(buf)
	}
	all := string(buf)
	out := make([]string, len(ids))
	start := 0
	for i, e := range ends {
		out[i], start = all[start:e], e
	}
	return out
}

// ParseID parses a record id as a range bound or in a record's JSON: the
// branded form "EVT_…", or a Redis id (xid.ParseBound: "ms-seq", or "ms"
// alone, which is ms-0 as a start and the last id of ms as an end, as
// XRANGE reads it). A bad id is an error wrapping brand.ErrMalformed,
// brand.ErrBrand or xid.ErrSyntax.
func ParseID(s string, end bool) (xid.ID, error) {
	if strings.IndexByte(s, '_') >= 0 {
		b, err := brand.EVT.Parse(s)
		if err != nil {
			return xid.ID{}, err
		}
		return b.XID(), nil
	}
	return xid.ParseBound(s, end)
}

func appendID(dst []byte, id xid.ID, form IDForm) []byte {
	if form != IDRedis {
		if b, err := brand.FromXID(id); err == nil {
			return brand.EVT.AppendFormat(dst, b)
		}
	}
	return id.AppendText(dst)
}

// AppendJSON appends the JSON form of r to dst, its id in the IDBranded
// form: AppendJSONAs(dst, r, IDBranded).
func AppendJSON(dst []byte, r Record) []byte { return AppendJSONAs(dst, r, IDBranded) }

// AppendJSONAs appends the JSON form of r to dst and returns it:
// {"id":…,"fields":…}. The id is a JSON string in the given form. The
// fields render as AppendFieldsJSON renders them. Every record renders
// losslessly: UnmarshalJSON reads the output back to the same record.
func AppendJSONAs(dst []byte, r Record, form IDForm) []byte {
	dst = append(dst, `{"id":"`...)
	dst = appendID(dst, r.ID, form)
	dst = append(dst, `","fields":`...)
	dst = AppendFieldsJSON(dst, r.Fields)
	return append(dst, '}')
}

// AppendFieldsJSON appends fields in their order. Fields whose names and
// values are all valid UTF-8 and whose names are distinct (every record
// mq's Limits.Check accepts) render as a JSON object {"name":"value",…}. Any
// other fields render as an array of [name, value] pairs,
// [["name","value"],…], in which a name or value that is not valid UTF-8
// is the object {"b64":"…"} holding its bytes in standard base64 (RFC 4648
// §4, padded) and every other one is a JSON string. The form is decided by
// the whole record, so a record has exactly one rendering.
func AppendFieldsJSON(dst []byte, fields []Field) []byte {
	if plainFields(fields) {
		dst = append(dst, '{')
		for i, f := range fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, f.Name)
			dst = append(dst, ':')
			dst = appendString(dst, f.Value)
		}
		return append(dst, '}')
	}
	dst = append(dst, '[')
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = appendBytes(dst, f.Name)
		dst = append(dst, ',')
		dst = appendBytes(dst, f.Value)
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// plainFields reports whether fields render as a JSON object: valid UTF-8
// throughout, distinct names, at least one field.
func plainFields(fields []Field) bool {
	if len(fields) == 0 {
		return false
	}
	for _, f := range fields {
		if !utf8.ValidString(f.Name) || !utf8.ValidString(f.Value) {
			return false
		}
	}
	_, dup := DuplicateName(fields)
	return !dup
}

// appendBytes appends s as a JSON string if it is valid UTF-8, else as
// {"b64":"…"}.
func appendBytes(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return appendString(dst, s)
	}
	dst = append(dst, `{"b64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, []byte(s))
	return append(dst, `"}`...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string literal. It escapes what
// encoding/json escapes by default (<, >, &, U+2028, U+2029 as \u escapes),
// so that json.Marshal of a record, which re-compacts a Marshaler's output
// with HTML escaping, prints the very same bytes as AppendJSON.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += n
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// UnmarshalJSON parses what AppendJSONAs prints: {"id":…,"fields":…}, both
// keys exactly once, no others. The id is "EVT_…" or a Redis id "ms-seq";
// fields are a non-empty object of strings with distinct names, or the
// array form of AppendFieldsJSON (duplicates and {"b64":…} bytes allowed).
func (r *Record) UnmarshalJSON(data []byte) error {
	rec, err := parseObject(data, true)
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

// ParseInputLine parses one line of append input: the fields of a record
// to append, {"fields":{…}} or, in the pair form that reads print for a
// record that is not a UTF-8 object of distinct names,
// {"fields":[["name","value"],…]} with {"b64":"…"} for bytes that are not
// UTF-8 (AppendFieldsJSON), so that the fields a read prints append back
// byte for byte. An "id" key is rejected (ids are minted on append). The
// object form is refused for what mq's Limits.Check refuses for structural
// reasons (no fields, duplicate names, invalid UTF-8); the pair form holds
// any bytes and repeated names, and only an empty array is refused. Sizes
// are the caller's to check (mq's Limits.CheckSize).
func ParseInputLine(data []byte) ([]Field, error) {
	rec, err := parseObject(data, false)
	if err != nil {
		return nil, err
	}
	return rec.Fields, nil
}

// ParseFieldsJSON parses fields as AppendFieldsJSON renders them, in
// order: a JSON object of strings, or the pair form [[name, value],…].
func ParseFieldsJSON(data []byte) ([]Field, error) {
	s := scanner{b: data}
	s.ws()
	var fields []Field
	var err error
	if s.peek() == '[' {
		fields, err = s.pairs()
	} else {
		fields, err = s.fields()
	}
	if err != nil {
		return nil, err
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, s.errorf("unexpected %s after the object", s.what())
	}
	return fields, nil
}

// ParseJSONLines parses body as JSON lines of records as ParseInputLine
// does each one, skipping blank lines (white space around a line, as
// bytes.TrimSpace has it, is ignored). A bad line fails the whole body with an error that names it
// ("line 3: …", counting every line). The fields' strings share one copy
// of body, made once: for a body of many records this saves a copy per
// name and value.
func ParseJSONLines(body []byte) ([][]Field, error) {
	src := string(body)
	out := make([][]Field, 0, bytes.Count(body, []byte("\n"))+1)
	for n, start := 1, 0; start < len(body); n++ {
		end := bytes.IndexByte(body[start:], '\n')
		if end < 0 {
			end = len(body)
		} else {
			end += start
		}
		line := body[start:end]
		left := bytes.TrimLeftFunc(line, unicode.IsSpace)
		a := start + len(line) - len(left)
		b := a + len(bytes.TrimRightFunc(left, unicode.IsSpace))
		start = end + 1
		if a == b {
			continue
		}
		rec, err := parseObjectIn(scanner{b: body[a:b], src: src[a:b]}, false)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, rec.Fields)
	}
	return out, nil
}

func parseObject(data []byte, wantID bool) (Record, error) {
	return parseObjectIn(scanner{b: data}, wantID)
}

func parseObjectIn(s scanner, wantID bool) (Record, error) {
	var rec Record
	s.ws()
	if err := s.expect('{'); err != nil {
		return rec, err
	}
	var haveID, haveFields bool
	s.ws()
	if s.peek() == '}' {
		s.i++
	} else {
		for {
			s.ws()
			key, err := s.str()
			if err != nil {
				return rec, err
			}
			s.ws()
			if err := s.expect(':'); err != nil {
				return rec, err
			}
			s.ws()
			switch key {
			case "id":
				if !wantID {
					return rec, s.errorf(`"id" is not accepted on input: ids are minted on append`)
				}
				if haveID {
					return rec, s.errorf(`"id" appears twice`)
				}
				haveID = true
				text, err := s.str()
				if err != nil {
					return rec, err
				}
				if rec.ID, err = parseRecordID(text); err != nil {
					return rec, fmt.Errorf("%w: id: %w", ErrSyntax, err)
				}
			case "fields":
				if haveFields {
					return rec, s.errorf(`"fields" appears twice`)
				}
				haveFields = true
				if s.peek() == '[' {
					rec.Fields, err = s.pairs()
				} else {
					rec.Fields, err = s.fields()
				}
				if err != nil {
					return rec, err
				}
			default:
				return rec, s.errorf("unknown key %q (want \"id\" and \"fields\")", clip(key))
			}
			s.ws()
			if s.peek() == ',' {
				s.i++
				continue
			}
			if err := s.expect('}'); err != nil {
				return rec, err
			}
			break
		}
	}
	s.ws()
	if s.i != len(s.b) {
		return rec, s.errorf("unexpected %s after the object", s.what())
	}
	if wantID && !haveID {
		return rec, fmt.Errorf(`%w: missing "id"`, ErrSyntax)
	}
	if !haveFields {
		return rec, fmt.Errorf(`%w: missing "fields"`, ErrSyntax)
	}
	return rec, nil
}

// parseRecordID parses a record's id as AppendJSONAs prints it: "EVT_…" or
// a Redis id "ms-seq".
func parseRecordID(text string) (xid.ID, error) {
	if id, err := xid.Parse(text); err == nil {
		return id, nil
	}
	b, err := brand.EVT.Parse(text)
	if err != nil {
		return xid.ID{}, err
	}
	return b.XID(), nil
}

// pairs parses the array form of fields: a non-empty array of [name, value]
// pairs, each a JSON string or {"b64":"…"}.
func (s *scanner) pairs() ([]Field, error) {
	if err := s.expect('['); err != nil {
		return nil, err
	}
	var out []Field
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil, &RecordError{Err: ErrEmptyRecord}
	}
	for {
		s.ws()
		if err := s.expect('['); err != nil {
			return nil, err
		}
		s.ws()
		name, err := s.bytesValue()
		if err != nil {
			return nil, err
		}
		s.ws()
		if err := s.expect(','); err != nil {
			return nil, err
		}
		s.ws()
		value, err := s.bytesValue()
		if err != nil {
			return nil, err
		}
		s.ws()
		if err := s.expect(']'); err != nil {
			return nil, err
		}
		out = append(out, Field{Name: name, Value: value})
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		if err := s.expect(']'); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// bytesValue parses a JSON string, or {"b64":"…"} holding bytes that are not
// valid UTF-8 (valid UTF-8 there is refused: it has the string form, and a
// record has one rendering).
func (s *scanner) bytesValue() (string, error) {
	if s.peek() == '"' {
		return s.str()
	}
	if err := s.expect('{'); err != nil {
		return "", err
	}
	s.ws()
	key, err := s.str()
	if err != nil {
		return "", err
	}
	if key != "b64" {
		return "", s.errorf(`unknown key %q (want "b64")`, clip(key))
	}
	s.ws()
	if err := s.expect(':'); err != nil {
		return "", err
	}
	s.ws()
	text, err := s.str()
	if err != nil {
		return "", err
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(text)
	if err != nil {
		return "", s.errorf("b64: %v", err)
	}
	if utf8.Valid(raw) {
		return "", s.errorf("b64 holds valid UTF-8, which is written as a string")
	}
	s.ws()
	if err := s.expect('}'); err != nil {
		return "", err
	}
	return string(raw), nil
}

// scanner reads strict JSON from b.
type scanner struct {
	b []byte
	i int
	// src, when set, holds the same bytes as b as a string: strings
	// without escapes are then slices of it, not copies (ParseJSONLines).
	src string
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrSyntax, s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) what() string {
	if s.i >= len(s.b) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(s.b[s.i]))
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c || s.i >= len(s.b) {
		return s.errorf("want %q, got %s", c, s.what())
	}
	s.i++
	return nil
}

// fields parses a non-empty object of string values with distinct names.
func (s *scanner) fields() ([]Field, error) {
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	out := make([]Field, 0, 4)
	s.ws()
	if s.peek() == '}' {
		s.i++
		return nil, &RecordError{Err: ErrEmptyRecord}
	}
	for {
		s.ws()
		name, err := s.str()
		if err != nil {
			return nil, err
		}
		s.ws()
		if err := s.expect(':'); err != nil {
			return nil, err
		}
		s.ws()
		if s.peek() != '"' {
			return nil, s.errorf("field %q: value must be a JSON string, got %s", clip(name), s.what())
		}
		value, err := s.str()
		if err != nil {
			return nil, err
		}
		for _, f := range out {
			if f.Name == name {
				return nil, &RecordError{Field: name, Err: ErrDuplicateField}
			}
		}
		out = append(out, Field{Name: name, Value: value})
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		if err := s.expect('}'); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// str parses a string literal. Raw bytes must be valid UTF-8 and escapes
// must not produce lone surrogates; both are reported as ErrInvalidUTF8.
func (s *scanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.i
	// Fast path: no escapes.
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			raw := s.b[start:s.i]
			s.i++
			if !utf8.Valid(raw) {
				return "", &RecordError{Field: string(raw), Err: ErrInvalidUTF8}
			}
			if s.src != "" {
				return s.src[start : s.i-1], nil
			}
			return string(raw), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", s.errorf("control character %q in a string", c)
		}
		s.i++
	}
	buf := append([]byte(nil), s.b[start:s.i]...)
	for {
		if s.i >= len(s.b) {
			return "", s.errorf("unterminated string")
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(buf) {
				return "", &RecordError{Field: string(buf), Err: ErrInvalidUTF8}
			}
			return string(buf), nil
		case c < 0x20:
			return "", s.errorf("control character %q in a string", c)
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		s.i++
		if s.i >= len(s.b) {
			return "", s.errorf("unterminated escape")
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || s.i+1 >= len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
					return "", &RecordError{Err: fmt.Errorf("lone surrogate \\u%04x: %w", r, ErrInvalidUTF8)}
				}
				s.i += 2
				r2, err := s.hex4()
				if err != nil {
					return "", err
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", &RecordError{Err: fmt.Errorf("bad surrogate pair: %w", ErrInvalidUTF8)}
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", s.errorf("unknown escape \\%c", e)
		}
	}
}

func (s *scanner) hex4() (rune, error) {
	if s.i+4 > len(s.b) {
		return 0, s.errorf("short \\u escape")
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, s.errorf("bad hex digit %q in \\u escape", c)
		}
		r = r<<4 | rune(d)
	}
	s.i += 4
	return r, nil
}

// MarshalJSON renders a claimed job as
// {"id":"JOB_…","entry":"<xid>","attempt":n,"fields":{…}}.
func (d Job) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 64+2*FieldsSize(d.Fields)), `{"id":"`...)
	b = brand.JOB.AppendFormat(b, d.ID)
	b = append(b, `","entry":`...)
	b = appendString(b, d.EntryID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(d.Attempt), 10)
	b = append(b, `,"fields":`...)
	b = AppendFieldsJSON(b, d.Fields)
	return append(b, '}'), nil
}

// MarshalJSON renders a dead letter as
// {"entry":"<xid>","id":"JOB_…","attempts":n,"error":"…","fields":{…}}.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 64+2*FieldsSize(d.Fields)), `{"entry":`...)
	b = appendString(b, d.EntryID)
	b = append(b, `,"id":"`...)
	b = brand.JOB.AppendFormat(b, d.ID)
	b = append(b, `","attempts":`...)
	b = strconv.AppendInt(b, int64(d.Attempts), 10)
	b = append(b, `,"error":`...)
	b = appendString(b, d.Error)
	b = append(b, `,"fields":`...)
	b = AppendFieldsJSON(b, d.Fields)
	return append(b, '}'), nil
}
