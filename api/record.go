package api

import (
	"errors"
	"fmt"

	"github.com/echostore/echostore/xid"
)

// Field is one (name, value) pair of a record. Both are byte strings as
// Redis keeps them: a record read from Redis may hold any bytes, empty
// values and duplicate names; on input (mq's Limits.Check) both must be
// valid UTF-8 and names distinct.
type Field struct {
	Name  string // the field's name
	Value string // its value
}

// Record is a stream entry: its Redis id and its fields in stored order.
// Every entry Redis stores is a Record, whatever its bytes or id. Its JSON
// form is {"id":"EVT_…","fields":{…}} with the fields in stored order
// (AppendJSON gives the forms of ids without a branded id and of fields
// that are not a UTF-8 object); AppendJSONAs is the one place that renders
// a record, so a record prints byte-identically wherever it was read from.
type Record struct {
	ID     xid.ID  // the entry's Redis id
	Fields []Field // the fields in stored order
}

// Get returns the value of the field named name and whether there is one.
func (r Record) Get(name string) (string, bool) {
	for _, f := range r.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

// The errors of a record that cannot be stored, and of JSON that is not a
// record. Callers branch on them with errors.Is (package mq names them
// too).
var (
	// ErrInvalidRecord is wrapped by every error about a record that cannot
	// be stored: no fields, a duplicate field name, invalid UTF-8, too large.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrEmptyRecord: a record with no fields (Redis keeps no such entry).
	ErrEmptyRecord = fmt.Errorf("record has no fields: %w", ErrInvalidRecord)
	// ErrDuplicateField: two fields of one record share a name.
	ErrDuplicateField = fmt.Errorf("duplicate field name: %w", ErrInvalidRecord)
	// ErrInvalidUTF8: a field name or value is not valid UTF-8.
	ErrInvalidUTF8 = fmt.Errorf("field is not valid UTF-8: %w", ErrInvalidRecord)

	// ErrSyntax: JSON text that is not a record (or not a fields object).
	ErrSyntax = errors.New("malformed record JSON")
)

// RecordError says which record and field of an input is invalid. It wraps
// one of the ErrInvalidRecord sentinels.
type RecordError struct {
	Index int    // position of the record in the batch (0 for a single one)
	Field string // the field name concerned, if any
	Err   error  // the sentinel that applies, possibly wrapped with detail
}

// Error names the record, the field if any, and the sentinel.
func (e *RecordError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("record %d, field %q: %v", e.Index, clip(e.Field), e.Err)
	}
	return fmt.Sprintf("record %d: %v", e.Index, e.Err)
}

// Unwrap returns Err.
func (e *RecordError) Unwrap() error { return e.Err }

// DuplicateName returns a name that occurs twice in fields, if any: such
// fields render in the pair form (AppendFieldsJSON), and input refuses
// them (ErrDuplicateField).
func DuplicateName(fields []Field) (string, bool) {
	if len(fields) <= 16 {
		for i := 1; i < len(fields); i++ {
			for j := 0; j < i; j++ {
				if fields[i].Name == fields[j].Name {
					return fields[i].Name, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(fields))
	for _, f := range fields {
		if _, ok := seen[f.Name]; ok {
			return f.Name, true
		}
		seen[f.Name] = struct{}{}
	}
	return "", false
}

// FieldsSize returns the bytes of names and values of fields: what the
// limits of a record count.
func FieldsSize(fields []Field) int {
	n := 0
	for _, f := range fields {
		n += len(f.Name) + len(f.Value)
	}
	return n
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
