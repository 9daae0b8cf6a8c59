package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/echostore/echostore/brand"
	"github.com/go-json-experiment/json/jsontext"
)

// The decoders of a claimed job and a dead letter read the object with
// jsontext, whose defaults are the strictness the record decoder has: a
// member name that occurs twice, invalid UTF-8 (raw or as a lone surrogate
// escape) and anything after the object are refused (ErrSyntax), in the
// fields' value too as jsontext reads it; ParseFieldsJSON then parses the
// fields. Member names match exactly; members other than the ones named
// are skipped, so that a newer serve may add some.

// UnmarshalJSON parses what MarshalJSON renders,
// {"id":"JOB_…","entry":"<xid>","attempt":n,"fields":{…}}, the fields in
// order (a client of serve's API reads claimed jobs with it).
func (d *Job) UnmarshalJSON(data []byte) error {
	var v Job
	if err := decodeJob(data, "job", &v.ID, &v.Fields,
		member{name: "entry", str: &v.EntryID}, member{name: "attempt", num: &v.Attempt}); err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalJSON parses what MarshalJSON renders,
// {"entry":"<xid>","id":"JOB_…","attempts":n,"error":"…","fields":{…}}.
func (d *DeadLetter) UnmarshalJSON(data []byte) error {
	var v DeadLetter
	if err := decodeJob(data, "dead letter", &v.ID, &v.Fields,
		member{name: "entry", str: &v.EntryID}, member{name: "attempts", num: &v.Attempts}, member{name: "error", str: &v.Error}); err != nil {
		return err
	}
	*d = v
	return nil
}

// member is a member of a job's object beside "id" and "fields": a string
// read into str or an int into num.
type member struct {
	name string
	str  *string
	num  *int
}

// decodeJob reads data as the object of a job (what names it in errors):
// its "id" (JOB_…) into id, "fields" into fields, and the members named.
func decodeJob(data []byte, what string, id *brand.ID, fields *[]Field, members ...member) error {
	var text string
	haveFields := false
	err := decodeMembers(data, func(dec *jsontext.Decoder, name string) (err error) {
		switch name {
		case "id":
			text, err = readString(dec)
			return err
		case "fields":
			haveFields = true
			*fields, err = readFields(dec)
			return err
		}
		for _, m := range members {
			switch {
			case m.name != name:
			case m.str != nil:
				*m.str, err = readString(dec)
				return err
			default:
				*m.num, err = readInt(dec)
				return err
			}
		}
		return dec.SkipValue()
	})
	if err != nil {
		return memberError(what, err)
	}
	if *id, err = brand.JOB.Parse(text); err != nil {
		return fmt.Errorf("%w: %s id: %w", ErrSyntax, what, err)
	}
	if !haveFields {
		return fmt.Errorf(`%w: %s %s: missing "fields"`, ErrSyntax, what, text)
	}
	return nil
}

// memberError says what did not decode: the fields' own errors (ErrSyntax,
// or ErrInvalidRecord's) as they are, jsontext's wrapped in ErrSyntax.
func memberError(what string, err error) error {
	if errors.Is(err, ErrSyntax) || errors.Is(err, ErrInvalidRecord) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrSyntax, what, err)
}

// memberDecoder is a jsontext.Decoder reading from a byte slice in place
// (it parses a bytes.Buffer's contents without copying them), pooled.
type memberDecoder struct {
	dec jsontext.Decoder
	in  bytes.Buffer
}

var memberDecoders = sync.Pool{New: func() any { return new(memberDecoder) }}

// decodeMembers reads data as one JSON object and nothing after it,
// calling member with each member's name to read its value.
func decodeMembers(data []byte, member func(dec *jsontext.Decoder, name string) error) error {
	m := memberDecoders.Get().(*memberDecoder)
	defer func() {
		m.in = bytes.Buffer{}
		m.dec.Reset(&m.in) // let go of data
		memberDecoders.Put(m)
	}()
	m.in = *bytes.NewBuffer(data)
	m.dec.Reset(&m.in)
	dec := &m.dec
	if err := readDelim(dec, '{'); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := readString(dec)
		if err != nil {
			return err
		}
		if err := member(dec, name); err != nil {
			return fmt.Errorf("%q: %w", clip(name), err)
		}
	}
	if err := readDelim(dec, '}'); err != nil {
		return err
	}
	end := dec.InputOffset()
	if _, err := dec.ReadToken(); err == nil {
		return fmt.Errorf("unexpected value after the object (byte %d)", end)
	} else if err != io.EOF {
		return err
	}
	return nil
}

// readDelim reads the delimiter want.
func readDelim(dec *jsontext.Decoder, want jsontext.Kind) error {
	if k := dec.PeekKind(); k != want && k != 0 {
		return fmt.Errorf("want '%c', got %v at byte %d", want, k, dec.InputOffset())
	}
	if _, err := dec.ReadToken(); err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// readString reads a JSON string.
func readString(dec *jsontext.Decoder) (string, error) {
	if k := dec.PeekKind(); k != '"' && k != 0 {
		return "", fmt.Errorf("want a string, got %v at byte %d", k, dec.InputOffset())
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return "", err
	}
	return tok.String(), nil
}

// readInt reads a JSON number that is an int.
func readInt(dec *jsontext.Decoder) (int, error) {
	if k := dec.PeekKind(); k != '0' && k != 0 {
		return 0, fmt.Errorf("want a number, got %v at byte %d", k, dec.InputOffset())
	}
	v, err := dec.ReadValue()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

// readFields reads fields as AppendFieldsJSON renders them: the value
// jsontext reads, parsed by ParseFieldsJSON.
func readFields(dec *jsontext.Decoder) ([]Field, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	return ParseFieldsJSON(v)
}
