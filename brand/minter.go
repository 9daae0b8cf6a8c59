package brand

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Clock returns the current time. Minter takes one so tests can step it.
type Clock func() time.Time

// Minter mints IDs for one node that are strictly increasing across
// goroutines, whatever the clock does.
//
// Each ID is the larger of (now, node, 0) and the successor of the last ID
// minted or observed. When the clock steps back, the Minter keeps counting
// from its last ID (it runs on logical time until the clock catches up).
// When the 4,096 sequence numbers of a millisecond are used up, it borrows
// the next millisecond. After a restart, give it the highest ID the previous
// process may have minted (WithFloor or Observe), typically the top of the
// stream it appends to: it never mints at or below that floor.
//
// ID 0 is never minted: a fresh Minter behaves as if it had minted it.
//
// A Minter is safe for concurrent use. Its zero value is not usable; make one
// with NewMinter.
type Minter struct {
	node  uint64
	clock Clock
	last  atomic.Uint64 // the highest ID minted or observed; starts at 0
}

// MinterOption configures a Minter.
type MinterOption func(*Minter)

// WithClock sets the clock (default time.Now).
func WithClock(c Clock) MinterOption { return func(m *Minter) { m.clock = c } }

// WithFloor makes the Minter mint only above id.
func WithFloor(id ID) MinterOption { return func(m *Minter) { m.last.Store(uint64(id)) } }

// NewMinter returns a Minter for node (0..MaxNode).
func NewMinter(node int, opts ...MinterOption) (*Minter, error) {
	if node < 0 || node > MaxNode {
		return nil, fmt.Errorf("node %d outside [0, %d]: %w", node, MaxNode, ErrMalformed)
	}
	m := &Minter{node: uint64(node), clock: time.Now}
	for _, o := range opts {
		o(m)
	}
	return m, nil
}

// Node returns the Minter's node.
func (m *Minter) Node() int { return int(m.node) }

// Mint returns a new ID above every ID this Minter minted or observed. It
// fails only when the 64-bit space is exhausted.
func (m *Minter) Mint() (ID, error) {
	return m.above(0)
}

// MintAbove returns a new ID above floor and above every ID minted or
// observed before. Producers use it to re-mint above a stream's top when an
// append was rejected as not above it.
func (m *Minter) MintAbove(floor ID) (ID, error) {
	return m.above(floor)
}

// Observe raises the Minter's floor to id if it is higher: no later ID will
// be at or below it.
func (m *Minter) Observe(id ID) {
	for {
		cur := m.last.Load()
		if cur >= uint64(id) || m.last.CompareAndSwap(cur, uint64(id)) {
			return
		}
	}
}

// Last returns the highest ID minted or observed (0 if none).
func (m *Minter) Last() ID { return ID(m.last.Load()) }

// Top returns the highest ID that the Minter's next Mint is sure to be
// above: the larger of Last and the ID just below this node's first ID of
// the clock's current millisecond. An ID at or below Top, observed, can
// never be minted by this Minter; an ID above it may be minted within the
// next moments (or, far above, at a later time).
func (m *Minter) Top() ID {
	last := m.last.Load()
	if base := m.base(); base > 0 && base-1 > last {
		return ID(base - 1)
	}
	return ID(last)
}

// Admit vets an ID that someone else chose (a client's explicit job id) so
// that this Minter never mints it: an ID at or below Top is observed (so a
// clock that steps back cannot reach it either) and nil is returned; an ID
// above Top is refused with an error wrapping ErrAhead, and the Minter is
// left as it was. Admit never raises the floor above Top, so no chosen ID
// can push the Minter ahead of its clock.
func (m *Minter) Admit(id ID) error {
	if top := m.Top(); id > top {
		return fmt.Errorf("id %s (time %s) is ahead of node %d's clock: it mints up to %s (time %s) now: %w",
			id.RedisID(), id.Time().Format(time.RFC3339Nano), m.node, top.RedisID(), top.Time().Format(time.RFC3339Nano), ErrAhead)
	}
	m.Observe(id)
	return nil
}

// ObserveWithin observes id only if its time is at most lead ahead of the
// Minter's clock, and reports whether it did. Recovery uses it for IDs read
// back from disk that may have been chosen by a client: one far in the
// future must not push the floor there (which could exhaust the ID space).
func (m *Minter) ObserveWithin(id ID, lead time.Duration) bool {
	limit := m.clock().Add(lead).UnixMilli() - EpochMillis
	if limit < 0 {
		limit = 0
	}
	if id.Millis() > limit {
		return false
	}
	m.Observe(id)
	return true
}

// base returns this node's first ID of the clock's current millisecond.
func (m *Minter) base() uint64 {
	now := m.clock().UnixMilli() - EpochMillis
	if now < 0 {
		now = 0
	}
	if now > MaxMillis {
		now = MaxMillis
	}
	return uint64(now)<<lowBits | m.node<<SeqBits
}

func (m *Minter) above(floor ID) (ID, error) {
	base := m.base()
	for {
		cur := m.last.Load()
		lo := cur
		if uint64(floor) > lo {
			lo = uint64(floor)
		}
		next := base
		if next <= lo {
			n, err := m.successor(ID(lo))
			if err != nil {
				return 0, err
			}
			next = uint64(n)
		}
		if m.last.CompareAndSwap(cur, next) {
			return ID(next), nil
		}
	}
}

// successor returns the smallest ID of this node above lo: the next sequence
// in lo's millisecond if lo is this node's and has room, otherwise the first
// sequence of this node in the next millisecond that is above lo.
func (m *Minter) successor(lo ID) (ID, error) {
	ms := uint64(lo) >> lowBits
	cand := ms<<lowBits | m.node<<SeqBits
	if cand > uint64(lo) {
		return ID(cand), nil // lo belongs to a lower node in the same millisecond
	}
	if lo.Node() == int(m.node) && lo.Seq() < MaxSeq {
		return lo + 1, nil
	}
	if ms >= MaxMillis {
		return 0, fmt.Errorf("node %d: no id above %s: %w", m.node, lo.RedisID(), ErrExhausted)
	}
	return ID((ms+1)<<lowBits | m.node<<SeqBits), nil
}
