package mq

import (
	"fmt"
	"unicode/utf8"

	"github.com/echostore/echostore/api"
)

// Field is api.Field: one (name, value) pair of a record.
type Field = api.Field

// Record is api.Record: a stream entry, its Redis id and its fields in
// stored order, whose JSON AppendJSONAs renders.
type Record = api.Record

// Limits bound what one record may hold. A zero field means the default.
type Limits struct {
	// MaxFields is the most fields a record may have (default 1024).
	MaxFields int
	// MaxBytes is the most bytes of names and values a record may hold
	// (default DefaultMaxBytes).
	MaxBytes int
}

// Default limits. DefaultMaxBytes is 1 MiB less 16 KiB, so that the largest
// record accepted (DefaultMaxFields fields, 8 bytes of framing each, plus a
// 25-byte header of a version-2 page) fits one archive page of 1 MiB. These
// bound what is appended through mq; entries other producers XADD may be
// larger, and the archive holds them across pages up to its own limit
// (archive.MaxRecordBytes).
const (
	DefaultMaxFields = 1024
	DefaultMaxBytes  = 1<<20 - 16<<10
)

func (l Limits) withDefaults() Limits {
	if l.MaxFields <= 0 {
		l.MaxFields = DefaultMaxFields
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Check reports whether fields form a valid record under l: at least one
// field, no duplicate names, valid UTF-8 throughout, within the limits. The
// error is a *RecordError (Index 0) wrapping the sentinel that applies.
func (l Limits) Check(fields []Field) error {
	l = l.withDefaults()
	if len(fields) == 0 {
		return &RecordError{Err: ErrEmptyRecord}
	}
	if len(fields) > l.MaxFields {
		return &RecordError{Err: fmt.Errorf("%d fields, at most %d allowed: %w", len(fields), l.MaxFields, ErrTooLarge)}
	}
	size := 0
	for _, f := range fields {
		if !utf8.ValidString(f.Name) {
			return &RecordError{Field: f.Name, Err: fmt.Errorf("name: %w", ErrInvalidUTF8)}
		}
		if !utf8.ValidString(f.Value) {
			return &RecordError{Field: f.Name, Err: fmt.Errorf("value: %w", ErrInvalidUTF8)}
		}
		size += len(f.Name) + len(f.Value)
	}
	if size > l.MaxBytes {
		return &RecordError{Err: fmt.Errorf("%d bytes of names and values, at most %d allowed: %w", size, l.MaxBytes, ErrTooLarge)}
	}
	if name, dup := api.DuplicateName(fields); dup {
		return &RecordError{Field: name, Err: ErrDuplicateField}
	}
	return nil
}

// CheckSize reports whether fields are within l's limits, whatever their
// bytes: at least one field, at most MaxFields of them and MaxBytes of
// names and values. It is what a record read from Redis must meet to be
// archived (Check adds the input rules). The error is a *RecordError
// (Index 0).
func (l Limits) CheckSize(fields []Field) error {
	l = l.withDefaults()
	if len(fields) == 0 {
		return &RecordError{Err: ErrEmptyRecord}
	}
	if len(fields) > l.MaxFields {
		return &RecordError{Err: fmt.Errorf("%d fields, at most %d allowed: %w", len(fields), l.MaxFields, ErrTooLarge)}
	}
	if n := api.FieldsSize(fields); n > l.MaxBytes {
		return &RecordError{Err: fmt.Errorf("%d bytes of names and values, at most %d allowed: %w", n, l.MaxBytes, ErrTooLarge)}
	}
	return nil
}
