// Package xid is the Redis stream entry id: two unsigned 64-bit numbers,
// milliseconds and a sequence, ordered by milliseconds then sequence, and
// written "ms-seq" in decimal. Every id Redis accepts for an entry is an ID,
// whoever produced it; the branded ids of package brand are a subset
// (brand.ID.XID, brand.FromXID).
package xid

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ID is a Redis stream id. The zero ID, 0-0, is the smallest (Redis never
// stores an entry at it, but it is a valid bound); Max, the largest. IDs are
// comparable with == and ordered by Compare.
type ID struct {
	Ms  uint64 // the milliseconds part
	Seq uint64 // the sequence part
}

// Min is the smallest ID, 0-0; Max the largest,
// 18446744073709551615-18446744073709551615.
var (
	Min = ID{}
	Max = ID{Ms: ^uint64(0), Seq: ^uint64(0)}
)

// ErrSyntax is wrapped by every parse failure (see Parse).
var ErrSyntax = errors.New("malformed redis stream id")

// SyntaxError is the error of Parse: Text (clipped to 64 bytes) is not a
// Redis stream id, for Reason.
type SyntaxError struct {
	Text   string // the input, clipped
	Reason string // what is wrong with it
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("redis stream id %q: %s", e.Text, e.Reason)
}

// Unwrap makes errors.Is(err, ErrSyntax) hold.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Compare returns -1, 0 or +1 as id is below, equal to or above o.
func (id ID) Compare(o ID) int {
	switch {
	case id.Ms < o.Ms:
		return -1
	case id.Ms > o.Ms:
		return 1
	case id.Seq < o.Seq:
		return -1
	case id.Seq > o.Seq:
		return 1
	}
	return 0
}

// Less reports whether id is below o.
func (id ID) Less(o ID) bool { return id.Compare(o) < 0 }

// IsZero reports whether id is 0-0.
func (id ID) IsZero() bool { return id == Min }

// Next returns the successor of id and true, or Max and false for Max,
// which has none.
func (id ID) Next() (ID, bool) {
	switch {
	case id == Max:
		return Max, false
	case id.Seq == ^uint64(0):
		return ID{Ms: id.Ms + 1}, true
	}
	return ID{Ms: id.Ms, Seq: id.Seq + 1}, true
}

// Prev returns the predecessor of id and true, or Min and false for Min,
// which has none.
func (id ID) Prev() (ID, bool) {
	switch {
	case id == Min:
		return Min, false
	case id.Seq == 0:
		return ID{Ms: id.Ms - 1, Seq: ^uint64(0)}, true
	}
	return ID{Ms: id.Ms, Seq: id.Seq - 1}, true
}

// MinOf returns the smaller of a and b; MaxOf the larger.
func MinOf(a, b ID) ID {
	if b.Less(a) {
		return b
	}
	return a
}

// MaxOf returns the larger of a and b.
func MaxOf(a, b ID) ID {
	if a.Less(b) {
		return b
	}
	return a
}

// FirstAt returns the smallest id of the millisecond of t (sequence 0);
// instants before the Unix epoch give Min.
func FirstAt(t time.Time) ID {
	ms := t.UnixMilli()
	if ms < 0 {
		return Min
	}
	return ID{Ms: uint64(ms)}
}

// LastAt returns the largest id of the millisecond of t; instants before the
// Unix epoch give Min (no id lies at or before them but 0-0).
func LastAt(t time.Time) ID {
	ms := t.UnixMilli()
	if ms < 0 {
		return Min
	}
	return ID{Ms: uint64(ms), Seq: ^uint64(0)}
}

// String returns the canonical text of id, "ms-seq", as Redis prints it.
func (id ID) String() string { return string(id.AppendText(make([]byte, 0, 41))) }

// AppendText appends String's text to dst. It never fails.
func (id ID) AppendText(dst []byte) []byte {
	dst = strconv.AppendUint(dst, id.Ms, 10)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, id.Seq, 10)
}

// MarshalText returns String's text.
func (id ID) MarshalText() ([]byte, error) { return id.AppendText(nil), nil }

// UnmarshalText parses the canonical "ms-seq" text (Parse).
func (id *ID) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Parse parses the canonical text of an id, "ms-seq": two unsigned decimal
// numbers of at most 64 bits, no sign, no leading zeros (0 itself is
// "0"), no spaces. It is the form Redis replies with, so an id read from
// Redis always parses, and parsing then String gives the text back. Any
// other text fails with a *SyntaxError (ErrSyntax).
//
// Redis also accepts "ms" alone as an XRANGE bound (meaning ms-0 as a start,
// ms-18446744073709551615 as an end) and as an XADD id (meaning ms-0); Parse does
// not, since its meaning depends on the side. ParseBound accepts it.
func Parse(s string) (ID, error) {
	dash := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			dash = i
			break
		}
	}
	if dash < 0 {
		return ID{}, syntax(s, `want "ms-seq"`)
	}
	ms, why := decimal(s[:dash])
	if why != "" {
		return ID{}, syntax(s, "milliseconds: "+why)
	}
	seq, why := decimal(s[dash+1:])
	if why != "" {
		return ID{}, syntax(s, "sequence: "+why)
	}
	return ID{Ms: ms, Seq: seq}, nil
}

// ParseBound parses a range bound as Redis reads one for XRANGE: "ms-seq"
// (Parse), or "ms" alone, which is ms-0 as a start (end false) and
// ms-18446744073709551615 as an end (end true). The special bounds "-",
// "+" and exclusive "(" bounds are not ids and are not accepted.
func ParseBound(s string, end bool) (ID, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			return Parse(s)
		}
	}
	ms, why := decimal(s)
	if why != "" {
		return ID{}, syntax(s, `want "ms-seq" or "ms"`+": "+why)
	}
	if end {
		return ID{Ms: ms, Seq: ^uint64(0)}, nil
	}
	return ID{Ms: ms}, nil
}

func syntax(s, reason string) error {
	const n = 64
	if len(s) > n {
		s = s[:n] + "…"
	}
	return &SyntaxError{Text: s, Reason: reason}
}

// decimal parses a canonical unsigned decimal of at most 64 bits; why is
// "" on success.
func decimal(s string) (v uint64, why string) {
	switch {
	case s == "":
		return 0, "empty"
	case len(s) > 1 && s[0] == '0':
		return 0, "leading zero"
	case len(s) > 20:
		return 0, "does not fit in 64 bits"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("%q is not a digit", c)
		}
		d := uint64(c - '0')
		if v > (^uint64(0)-d)/10 {
			return 0, "does not fit in 64 bits"
		}
		v = v*10 + d
	}
	return v, ""
}
