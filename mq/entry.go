package mq

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/xid"
	"github.com/redis/rueidis"
)

// rawEntry is a stream entry as the server sent it.
type rawEntry struct {
	xid string
	kv  []string // name, value, name, value, …; nil for a deleted entry
}

// rawEntries converts an XRANGE-shaped reply (an array of [id, [k, v, …]]).
func rawEntries(msgs []rueidis.RedisMessage) ([]rawEntry, error) {
	out := make([]rawEntry, 0, len(msgs))
	for i := range msgs {
		e, err := rawEntryOf(&msgs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func rawEntryOf(m *rueidis.RedisMessage) (rawEntry, error) {
	parts, err := m.ToArray()
	if err != nil || len(parts) != 2 {
		return rawEntry{}, fmt.Errorf("stream entry: unexpected reply shape (%v)", err)
	}
	xid, err := parts[0].ToString()
	if err != nil {
		return rawEntry{}, fmt.Errorf("stream entry id: %w", err)
	}
	if parts[1].IsNil() {
		return rawEntry{xid: xid}, nil
	}
	kvm, err := parts[1].ToArray()
	if err != nil {
		return rawEntry{}, fmt.Errorf("stream entry %s fields: %w", xid, err)
	}
	kv := make([]string, len(kvm))
	for j := range kvm {
		if kv[j], err = kvm[j].ToString(); err != nil {
			return rawEntry{}, fmt.Errorf("stream entry %s field %d: %w", xid, j, err)
		}
	}
	return rawEntry{xid: xid, kv: kv}, nil
}

// decodeEntry turns a raw entry of the stream at key into a Record. Every
// entry Redis stores decodes: any id, any bytes, empty values, duplicate
// names. Only a reply that is no entry at all (an id that does not parse, no
// fields, an odd number of field strings) is an *EntryError.
func decodeEntry(key, text string, kv []string) (Record, error) {
	id, err := xid.Parse(text)
	if err != nil {
		return Record{}, &EntryError{Key: key, XID: text, Err: err}
	}
	fields, err := decodeFields(kv)
	if err != nil {
		return Record{}, &EntryError{Key: key, XID: text, Err: err}
	}
	return Record{ID: id, Fields: fields}, nil
}

// decodeFields pairs a flat name/value list into fields. What is stored is
// stored: no check of bytes, names or sizes.
func decodeFields(kv []string) ([]Field, error) {
	if len(kv) == 0 {
		return nil, ErrEmptyRecord
	}
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("%d field strings, not name/value pairs: %w", len(kv), ErrInvalidRecord)
	}
	fields := make([]Field, len(kv)/2)
	for i := range fields {
		fields[i] = Field{Name: kv[2*i], Value: kv[2*i+1]}
	}
	return fields, nil
}

// brandedFloor returns the largest branded id at or below the Redis id xid:
// 0 below the branded range; the last id of xid's millisecond for a
// sequence of 2^22 or more. A Redis id past the branded range (year 2163)
// has no branded id at or above it usable for appends: ErrForeignEntry.
func brandedFloor(xid string) (brand.ID, error) {
	id, err := brand.ParseRedisID(xid)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, brand.ErrRange) {
		return 0, err
	}
	msText, _, _ := strings.Cut(xid, "-")
	ms, perr := strconv.ParseUint(msText, 10, 64)
	if perr != nil {
		return 0, err
	}
	switch {
	case ms < uint64(brand.EpochMillis):
		return 0, nil
	case ms-uint64(brand.EpochMillis) > brand.MaxMillis:
		return 0, fmt.Errorf("redis id %s is past the branded range: %w", xid, ErrForeignEntry)
	}
	return brand.Make(int64(ms-uint64(brand.EpochMillis)), brand.MaxNode, brand.MaxSeq)
}

// startBound and endBound are the XRANGE bounds of an inclusive range.
func startBound(from xid.ID) string {
	if from == xid.Min {
		return "-"
	}
	return from.String()
}

func endBound(to xid.ID) string {
	if to == xid.Max {
		return "+"
	}
	return to.String()
}
