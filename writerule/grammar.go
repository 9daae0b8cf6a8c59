package writerule

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/echostore/echostore/xid"
)

// ErrSyntax is wrapped by every refusal of ParseXAdd and ParseXTrim: the
// arguments are ones Redis refuses too (an error reply, nothing done).
var ErrSyntax = errors.New("not a command Redis accepts")

// Strategy is how a trim chooses what it removes.
type Strategy int

// The trim strategies.
const (
	// NoTrim: the command trims nothing (an XADD without MAXLEN or MINID).
	NoTrim Strategy = iota
	// MaxLen keeps the newest Threshold entries (MAXLEN).
	MaxLen
	// MinID removes the entries whose id is below MinID (MINID).
	MinID
)

// String names the strategy as Redis spells it.
func (s Strategy) String() string {
	switch s {
	case MaxLen:
		return "MAXLEN"
	case MinID:
		return "MINID"
	}
	return "none"
}

// Trim is the trim an XADD or XTRIM asks for, as Redis parses it.
type Trim struct {
	// Strategy is MaxLen, MinID, or NoTrim.
	Strategy Strategy
	// Approx: the ~ form (Redis may remove fewer entries, never more).
	Approx bool
	// MaxLen is the MAXLEN threshold (Strategy MaxLen).
	MaxLen int64
	// MinID is the MINID threshold (Strategy MinID): entries with an id
	// below it are removed, MinID itself is kept.
	MinID xid.ID
	// Limit is the LIMIT given (the last one, if several), 0 if none: at
	// most that many entries removed, 0 meaning no bound. Redis takes it
	// with ~ only.
	Limit int64
}

// Add is an XADD as Redis parses it.
type Add struct {
	// Trim is the trim after the append (Strategy NoTrim for none).
	Trim
	// NoMkStream: NOMKSTREAM was given (no append, nor trim, when the key
	// is missing).
	NoMkStream bool
	// AutoID: the id is * (Redis makes it); else ID is given.
	AutoID bool
	// AutoSeq: the id is ms-* (ID.Ms given, the sequence Redis's).
	AutoSeq bool
	// ID is the id given (not AutoID).
	ID xid.ID
	// IDPos is the index in the arguments of the id; field-value pairs
	// follow it.
	IDPos int
}

// ParseXAdd parses args (args[0] is XADD, args[1] the key) by Redis's
// grammar, as redis-server 7 reads it:
//
//	XADD key [NOMKSTREAM] [<MAXLEN|MINID> [=|~] threshold] [LIMIT count] <*|id> field value [field value …]
//
// in Redis's own terms: before the id, NOMKSTREAM, one MAXLEN or MINID
// (with its =, ~ and threshold) and LIMIT count come in any order and any
// number of times (LIMIT: the last wins; a second MAXLEN or MINID is an
// error, even the same one); the first argument that is none of them is the
// id, and every argument after it a field or a value. A keyword compares up
// to its first NUL byte, as Redis's C strings do (MAXLEN\x00x is MAXLEN).
// LIMIT needs ~ (so a trim). A MAXLEN or LIMIT count is a strict decimal
// int64 ≥ 0; an id is Redis's (see parseID: it takes " 5", "+5", "007" and
// "5--1" as Redis does). ParseXAdd does not know the stream: an explicit
// id at or below the stream's top is refused by Redis at run time (and
// then nothing is trimmed).
func ParseXAdd(args [][]byte) (Add, error) {
	var a Add
	if len(args) < 5 {
		return a, fmt.Errorf("xadd: wrong number of arguments: %w", ErrSyntax)
	}
	i, err := parseOptions(args, true, &a.Trim, &a.NoMkStream)
	if err != nil {
		return a, err
	}
	a.IDPos = i
	if i < len(args) {
		id := args[i]
		if string(cstr(id)) == "*" {
			a.AutoID = true
		} else {
			var seqGiven bool
			if a.ID, seqGiven, err = parseID(id, true); err != nil {
				return a, fmt.Errorf("xadd: id: %w", err)
			}
			a.AutoSeq = !seqGiven
			if seqGiven && a.ID == (xid.ID{}) {
				return a, fmt.Errorf("xadd: the id must be greater than 0-0: %w", ErrSyntax)
			}
		}
	}
	if n := len(args) - (i + 1); n < 2 || n%2 == 1 {
		return a, fmt.Errorf("xadd: wrong number of arguments: %w", ErrSyntax)
	}
	return a, nil
}

// ParseXTrim parses args (args[0] is XTRIM, args[1] the key) by Redis's
// grammar:
//
//	XTRIM key <MAXLEN|MINID> [=|~] threshold [LIMIT count]
//
// with ParseXAdd's rules for the options (any order, LIMIT repeated with
// the last winning, one strategy only); a strategy is required, and any
// other argument is an error.
func ParseXTrim(args [][]byte) (Trim, error) {
	var t Trim
	if len(args) < 4 {
		return t, fmt.Errorf("xtrim: wrong number of arguments: %w", ErrSyntax)
	}
	if _, err := parseOptions(args, false, &t, nil); err != nil {
		return t, err
	}
	if t.Strategy == NoTrim {
		return t, fmt.Errorf("xtrim: no trimming strategy: %w", ErrSyntax)
	}
	return t, nil
}

// parseOptions is Redis's streamParseAddOrTrimArgsOrReply: it reads the
// options from args[2] on and returns the index of the id (XADD; len(args)
// when there is none) or len(args).
func parseOptions(args [][]byte, xadd bool, t *Trim, noMk *bool) (int, error) {
	limitGiven := false
	i := 2
loop:
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		opt := cstr(args[i])
		switch {
		case xadd && string(opt) == "*":
			break loop
		case more > 0 && (bytes.EqualFold(opt, []byte("maxlen")) || bytes.EqualFold(opt, []byte("minid"))):
			if t.Strategy != NoTrim {
				return 0, fmt.Errorf("MAXLEN and MINID options at the same time: %w", ErrSyntax)
			}
			t.Approx = false
			next := string(cstr(args[i+1]))
			if more >= 2 && next == "~" {
				t.Approx = true
				i++
			} else if more >= 2 && next == "=" {
				i++
			}
			if bytes.EqualFold(opt, []byte("maxlen")) {
				n, ok := string2ll(args[i+1])
				if !ok || n < 0 {
					return 0, fmt.Errorf("MAXLEN %q: %w", args[i+1], ErrSyntax)
				}
				t.Strategy, t.MaxLen = MaxLen, n
			} else {
				id, _, err := parseID(args[i+1], false)
				if err != nil {
					return 0, fmt.Errorf("MINID: %w", err)
				}
				t.Strategy, t.MinID = MinID, id
			}
			i++
		case more > 0 && bytes.EqualFold(opt, []byte("limit")):
			n, ok := string2ll(args[i+1])
			if !ok || n < 0 {
				return 0, fmt.Errorf("LIMIT %q: %w", args[i+1], ErrSyntax)
			}
			t.Limit, limitGiven = n, true
			i++
		case xadd && bytes.EqualFold(opt, []byte("nomkstream")):
			*noMk = true
		case xadd:
			break loop // the id (parsed by the caller)
		default:
			return 0, fmt.Errorf("xtrim: %q: %w", args[i], ErrSyntax)
		}
	}
	if limitGiven && !t.Approx {
		return 0, fmt.Errorf("LIMIT without ~ (or without a trim): %w", ErrSyntax)
	}
	return i, nil
}

// parseID is Redis's streamParseStrictIDOrReply (missing sequence 0): an
// argument longer than 127 bytes is refused; the rest is read as a C
// string (up to its first NUL), "-" and "+" refused, split at its first
// '-' into ms and seq, each read by string2ull. With star (XADD's id)
// the sequence may be "*": seqGiven is then false.
func parseID(b []byte, star bool) (id xid.ID, seqGiven bool, err error) {
	if len(b) > 127 {
		return id, false, fmt.Errorf("id longer than 127 bytes: %w", ErrSyntax)
	}
	s := cstr(b)
	if string(s) == "-" || string(s) == "+" {
		return id, false, fmt.Errorf("id %q: %w", s, ErrSyntax)
	}
	ms, seq, dash := bytes.Cut(s, []byte("-"))
	var ok bool
	if id.Ms, ok = string2ull(ms); !ok {
		return id, false, fmt.Errorf("id %q: %w", s, ErrSyntax)
	}
	if !dash {
		return id, true, nil
	}
	if star && string(seq) == "*" {
		return id, false, nil
	}
	if id.Seq, ok = string2ull(seq); !ok {
		return id, false, fmt.Errorf("id %q: %w", s, ErrSyntax)
	}
	return id, true, nil
}

// cstr is b as C reads it: up to its first NUL byte.
func cstr(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// string2ll is Redis's string2ll over all of b: an optional '-', then
// digits without a leading zero (or "0" alone), no other byte, within
// int64, fewer than 21 bytes.
func string2ll(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) >= 21 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > math.MaxUint64/10 || v*10 > math.MaxUint64-d {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// string2ull is Redis's string2ull of a C string: string2ll first (a
// negative value refused), else C's strtoull in base 10 (leading white
// space, a '+' or '-' sign, leading zeros, a negative value wrapping
// around), which must take the whole string and not overflow.
func string2ull(s []byte) (uint64, bool) {
	if v, ok := string2ll(s); ok {
		return uint64(v), v >= 0
	}
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var v uint64
	over := false
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > math.MaxUint64/10 || v*10 > math.MaxUint64-d {
			over = true
		}
		v = v*10 + d
	}
	if i == start || i < len(s) || over {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}
