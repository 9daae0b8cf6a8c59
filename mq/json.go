package mq

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/echostore/echostore/brand"
)

// This file is the one place that renders records as JSON and the one that
// parses them back. The encoder is deterministic: a record prints the same
// bytes wherever it was read from (the live stream now, the archive later).
// The decoder is strict: it keeps field order, rejects duplicate names,
// invalid UTF-8 (raw, or as a lone surrogate escape) and non-string values,
// instead of silently repairing them as encoding/json would.

// MarshalJSON renders r as {"id":"EVT_…","fields":{…}}, fields in order.
func (r Record) MarshalJSON() ([]byte, error) {
	return AppendJSON(make([]byte, 0, 32+2*size(r.Fields)+8*len(r.Fields)), r), nil
}

// AppendJSON appends the JSON form of r to dst and returns it. Records that
// passed Limits.Check or were read by this package render losslessly; bytes
// that are not UTF-8 (which neither lets through) would print as U+FFFD.
func AppendJSON(dst []byte, r Record) []byte {
	dst = append(dst, `{"id":"`...)
	dst = brand.EVT.AppendFormat(dst, r.ID)
	dst = append(dst, `","fields":`...)
	dst = AppendFieldsJSON(dst, r.Fields)
	return append(dst, '}')
}

// AppendFieldsJSON appends fields as a JSON object in their order.
func AppendFieldsJSON(dst []byte, fields []Field) []byte {
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

// UnmarshalJSON parses {"id":"EVT_…","fields":{…}}: both keys exactly once,
// no others, fields a non-empty object of strings with distinct names.
func (r *Record) UnmarshalJSON(data []byte) error {
	rec, err := parseObject(data, true)
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

// ParseInputLine parses one line of append input, {"fields":{…}}: the
// fields of a record to append. An "id" key is rejected (ids are minted on
// append), and so is anything Limits.Check would reject for structural
// reasons (no fields, duplicate names, invalid UTF-8).
func ParseInputLine(data []byte) ([]Field, error) {
	rec, err := parseObject(data, false)
	if err != nil {
		return nil, err
	}
	return rec.Fields, nil
}

// ParseFieldsJSON parses a JSON object of strings into fields, in order.
func ParseFieldsJSON(data []byte) ([]Field, error) {
	s := scanner{b: data}
	s.ws()
	fields, err := s.fields()
	if err != nil {
		return nil, err
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, s.errorf("unexpected %s after the object", s.what())
	}
	return fields, nil
}

func parseObject(data []byte, wantID bool) (Record, error) {
	var rec Record
	s := scanner{b: data}
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
				if rec.ID, err = brand.EVT.Parse(text); err != nil {
					return rec, fmt.Errorf("%w: id: %w", ErrSyntax, err)
				}
			case "fields":
				if haveFields {
					return rec, s.errorf(`"fields" appears twice`)
				}
				haveFields = true
				if rec.Fields, err = s.fields(); err != nil {
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

// scanner reads strict JSON from b.
type scanner struct {
	b []byte
	i int
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
	var out []Field
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

// MarshalJSON renders a delivery as
// {"id":"JOB_…","entry":"<xid>","attempt":n,"fields":{…}}.
func (d Delivery) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 64+2*size(d.Fields)), `{"id":"`...)
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
	b := append(make([]byte, 0, 64+2*size(d.Fields)), `{"entry":`...)
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
