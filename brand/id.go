package brand

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/xid"
)

// Bit widths of the three fields of an ID.
const (
	MillisBits = 42
	NodeBits   = 10
	SeqBits    = 12

	// MaxNode is the largest node number.
	MaxNode = 1<<NodeBits - 1
	// MaxSeq is the largest sequence number within one millisecond.
	MaxSeq = 1<<SeqBits - 1
	// MaxMillis is the largest millisecond offset from Epoch.
	MaxMillis = 1<<MillisBits - 1

	lowBits = NodeBits + SeqBits // the bits that form the Redis id's sequence part
)

// Epoch is the zero of an ID's clock: 2024-01-01T00:00:00Z.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// EpochMillis is Epoch in Unix milliseconds.
const EpochMillis int64 = 1704067200000

// Epoch returns the zero of an ID's clock, 2024-01-01T00:00:00Z.
func Epoch() time.Time { return epoch }

// Errors wrapped by the parsers and the Minter. Callers branch on them with
// errors.Is.
var (
	// ErrMalformed: the text is not an id of any accepted form.
	ErrMalformed = errors.New("malformed id")
	// ErrBrand: a well-formed id of another brand than the one expected.
	ErrBrand = errors.New("foreign brand")
	// ErrRange: a Redis stream id that has no branded id (before Epoch,
	// past the 42-bit clock, or a sequence of 2^22 or more).
	ErrRange = errors.New("redis id outside the branded range")
	// ErrExhausted: no id exists above the one asked for.
	ErrExhausted = errors.New("id space exhausted")
	// ErrAhead: an ID chosen elsewhere lies ahead of a Minter (Admit): the
	// Minter could mint it later.
	ErrAhead = errors.New("id ahead of the minter")
)

// ID is a branded id without its brand: 42 bits of milliseconds since Epoch,
// 10 bits of node, 12 bits of sequence. The zero ID is the smallest.
type ID uint64

// Max is the largest ID.
const Max = ID(^uint64(0))

// Make assembles an ID from its fields. Out-of-range fields are an error
// wrapping ErrMalformed.
func Make(millis int64, node, seq int) (ID, error) {
	if millis < 0 || millis > MaxMillis {
		return 0, fmt.Errorf("milliseconds %d outside [0, %d]: %w", millis, int64(MaxMillis), ErrMalformed)
	}
	if node < 0 || node > MaxNode {
		return 0, fmt.Errorf("node %d outside [0, %d]: %w", node, MaxNode, ErrMalformed)
	}
	if seq < 0 || seq > MaxSeq {
		return 0, fmt.Errorf("sequence %d outside [0, %d]: %w", seq, MaxSeq, ErrMalformed)
	}
	return ID(uint64(millis)<<lowBits | uint64(node)<<SeqBits | uint64(seq)), nil
}

// FirstAt returns the smallest ID in the millisecond of t (node 0, sequence
// 0), clamped to [0, Max]: a lower bound for "from time t" ranges.
func FirstAt(t time.Time) ID {
	ms := t.UnixMilli() - EpochMillis
	switch {
	case ms < 0:
		return 0
	case ms > MaxMillis:
		return Max
	}
	return ID(uint64(ms) << lowBits)
}

// LastAt returns the largest ID in the millisecond of t, clamped to [0, Max]:
// an upper bound for "to time t" ranges.
func LastAt(t time.Time) ID {
	ms := t.UnixMilli() - EpochMillis
	switch {
	case ms < 0:
		return 0
	case ms > MaxMillis:
		return Max
	}
	return ID(uint64(ms)<<lowBits | (1<<lowBits - 1))
}

// Millis returns the milliseconds since Epoch.
func (id ID) Millis() int64 { return int64(uint64(id) >> lowBits) }

// Node returns the node field.
func (id ID) Node() int { return int(uint64(id)>>SeqBits) & MaxNode }

// Seq returns the sequence field.
func (id ID) Seq() int { return int(uint64(id) & MaxSeq) }

// Time returns the millisecond the ID was minted in.
func (id ID) Time() time.Time { return time.UnixMilli(EpochMillis + id.Millis()).UTC() }

// Next returns the successor of id, or ErrExhausted for Max. The successor in
// ID order is the successor in Redis-id order.
func (id ID) Next() (ID, error) {
	if id == Max {
		return 0, fmt.Errorf("no id above %d: %w", uint64(id), ErrExhausted)
	}
	return id + 1, nil
}

// RedisID returns the Redis stream id of id: "<unix ms>-<node*4096+seq>".
func (id ID) RedisID() string {
	var b [41]byte
	out := strconv.AppendInt(b[:0], EpochMillis+id.Millis(), 10)
	out = append(out, '-')
	out = strconv.AppendUint(out, uint64(id)&(1<<lowBits-1), 10)
	return string(out)
}

// RedisIDs returns the RedisID of each of ids, as strings that share one
// backing allocation (for the ids of a batch, formatted at once).
func RedisIDs(ids []ID) []string {
	buf := make([]byte, 0, len(ids)*20)
	ends := make([]int, len(ids))
	for i, id := range ids {
		buf = strconv.AppendInt(buf, EpochMillis+id.Millis(), 10)
		buf = append(buf, '-')
		buf = strconv.AppendUint(buf, uint64(id)&(1<<lowBits-1), 10)
		ends[i] = len(buf)
	}
	return splitAt(string(buf), ends)
}

// splitAt cuts all at ends (ascending) into strings that share its bytes.
func splitAt(all string, ends []int) []string {
	out := make([]string, len(ends))
	start := 0
	for i, e := range ends {
		out[i], start = all[start:e], e
	}
	return out
}

// XID returns the Redis stream id of id as an xid.ID (ms since the Unix
// epoch, node*4096+seq): the same id RedisID prints. It is lossless.
func (id ID) XID() xid.ID {
	return xid.ID{Ms: uint64(EpochMillis + id.Millis()), Seq: uint64(id) & (1<<lowBits - 1)}
}

// FromXID returns the ID whose Redis stream id is x, or an error wrapping
// ErrRange if x has none (milliseconds before Epoch or past the 42-bit
// clock, or a sequence of 2^22 or more). FromXID(id.XID()) is id.
func FromXID(x xid.ID) (ID, error) {
	if x.Ms < uint64(EpochMillis) || x.Ms-uint64(EpochMillis) > MaxMillis {
		return 0, fmt.Errorf("redis id %s: milliseconds outside [%d, %d]: %w",
			x, EpochMillis, EpochMillis+MaxMillis, ErrRange)
	}
	if x.Seq >= 1<<lowBits {
		return 0, fmt.Errorf("redis id %s: sequence %d is %d or more: %w", x, x.Seq, 1<<lowBits, ErrRange)
	}
	return ID((x.Ms-uint64(EpochMillis))<<lowBits | x.Seq), nil
}

// ParseRedisID returns the ID whose Redis stream id is s. It accepts exactly
// the canonical "<ms>-<seq>" form (decimal, no sign, no leading zeros) and
// fails with ErrMalformed for other text and ErrRange for Redis ids outside
// the branded range.
func ParseRedisID(s string) (ID, error) {
	dash := strings.IndexByte(s, '-')
	if dash < 0 {
		return 0, fmt.Errorf("redis id %q: want <ms>-<seq>: %w", clip(s), ErrMalformed)
	}
	ms, err := parseDecimal(s[:dash])
	if err != nil {
		return 0, fmt.Errorf("redis id %q: milliseconds: %v: %w", clip(s), err, ErrMalformed)
	}
	seq, err := parseDecimal(s[dash+1:])
	if err != nil {
		return 0, fmt.Errorf("redis id %q: sequence: %v: %w", clip(s), err, ErrMalformed)
	}
	if ms < uint64(EpochMillis) || ms-uint64(EpochMillis) > MaxMillis {
		return 0, fmt.Errorf("redis id %q: milliseconds outside [%d, %d]: %w",
			clip(s), EpochMillis, EpochMillis+MaxMillis, ErrRange)
	}
	if seq >= 1<<lowBits {
		return 0, fmt.Errorf("redis id %q: sequence %d is %d or more: %w", clip(s), seq, 1<<lowBits, ErrRange)
	}
	return ID((ms-uint64(EpochMillis))<<lowBits | seq), nil
}

// parseDecimal parses a canonical unsigned decimal that fits in 64 bits.
func parseDecimal(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a digit", s[i])
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errors.New("does not fit in 64 bits")
	}
	return v, nil
}

// clip shortens s for an error message, so a huge bad input does not become a
// huge message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
