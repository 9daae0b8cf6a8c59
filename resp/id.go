package resp

import (
	"errors"
	"strconv"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// This file is the one place that converts between the Redis stream ids
// of the protocol and the ids of echostore's records (xid.ID, the same ids):
// appendID renders a record's id, and bound and afterID turn a command's
// id arguments into a read's range.

// errBadID is the Redis error text for an id argument that does not parse.
var errBadID = errors.New("ERR Invalid stream ID specified as stream command argument")

// parseWatermark parses the watermark of ref's archive status as
// echostore.FormatID renders it: EVT_… for a stream of a queue, the Redis
// id for a stream at a key.
func parseWatermark(ref names.StreamRef, w string) (xid.ID, error) {
	if ref.IsKey() {
		return xid.Parse(w)
	}
	return mq.ParseID(w, false)
}

// streamID is a Redis stream id, ms-seq.
type streamID struct{ ms, seq uint64 }

// maxStreamID is the largest Redis stream id.
var maxStreamID = streamID{^uint64(0), ^uint64(0)}

// appendID appends the Redis id of a record's id.
func appendID(b []byte, id xid.ID) []byte { return id.AppendText(b) }

// idText is appendID as a string.
func idText(id xid.ID) string { return id.String() }

// parseStreamID parses "ms-seq" or "ms" as Redis does; ms alone gives seq
// missing (ok false for hasSeq).
func parseStreamID(s []byte) (id streamID, hasSeq bool, err error) {
	dash := -1
	for i, c := range s {
		if c == '-' {
			dash = i
			break
		}
	}
	num := func(b []byte) (uint64, error) {
		if len(b) == 0 {
			return 0, errBadID
		}
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, errBadID
			}
		}
		v, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			return 0, errBadID
		}
		return v, nil
	}
	if dash < 0 {
		ms, err := num(s)
		return streamID{ms: ms}, false, err
	}
	ms, err := num(s[:dash])
	if err != nil {
		return streamID{}, false, err
	}
	seq, err := num(s[dash+1:])
	return streamID{ms, seq}, true, err
}

// span is a read's range in record ids; empty when no record can be in it.
type span struct {
	from, to xid.ID
	empty    bool
}

// lowest is the smallest record id ≥ x: x itself, every Redis id being a
// record id (ok is always true).
func lowest(x streamID) (xid.ID, bool) { return xid.ID{Ms: x.ms, Seq: x.seq}, true }

// highest is the largest record id ≤ x: x itself (ok is always true).
func highest(x streamID) (xid.ID, bool) { return xid.ID{Ms: x.ms, Seq: x.seq}, true }

// next is the Redis id after x (ok false: x is the largest).
func (x streamID) next() (streamID, bool) {
	switch {
	case x == maxStreamID:
		return x, false
	case x.seq == ^uint64(0):
		return streamID{x.ms + 1, 0}, true
	}
	return streamID{x.ms, x.seq + 1}, true
}

// prev is the Redis id before x (ok false: x is 0-0).
func (x streamID) prev() (streamID, bool) {
	switch {
	case x == streamID{}:
		return x, false
	case x.seq == 0:
		return streamID{x.ms - 1, ^uint64(0)}, true
	}
	return streamID{x.ms, x.seq - 1}, true
}

// bound parses one end of an XRANGE or XREVRANGE: "-", "+", "ms",
// "ms-seq", each but "-" and "+" optionally after "(" (exclusive). upper
// says which end it is ("ms" alone is ms-0 as a start and ms-max as an
// end). It returns the Redis id the end includes, and ok false when the
// end includes none (an exclusive end past the last id).
func bound(arg []byte, upper bool) (streamID, bool, error) {
	switch string(arg) {
	case "-":
		return streamID{}, true, nil
	case "+":
		return maxStreamID, true, nil
	}
	excl := len(arg) > 0 && arg[0] == '('
	if excl {
		arg = arg[1:]
	}
	x, hasSeq, err := parseStreamID(arg)
	if err != nil {
		return streamID{}, false, err
	}
	if !hasSeq && upper {
		x.seq = ^uint64(0)
	}
	if !excl {
		return x, true, nil
	}
	if upper {
		x, ok := x.prev()
		return x, ok, nil
	}
	x, ok := x.next()
	return x, ok, nil
}

// spanOf turns an inclusive Redis id range into record ids.
func spanOf(start, end streamID) span {
	from, ok1 := lowest(start)
	to, ok2 := highest(end)
	if !ok1 || !ok2 || from.Compare(to) > 0 {
		return span{empty: true}
	}
	return span{from: from, to: to}
}

// afterID parses an XREAD id ("ms-seq" or "ms", exclusive: the records
// after it) into the range of records after it.
func afterID(arg []byte) (span, error) {
	x, _, err := parseStreamID(arg)
	if err != nil {
		return span{}, err
	}
	n, ok := x.next()
	if !ok {
		return span{empty: true}, nil
	}
	return spanOf(n, maxStreamID), nil
}
