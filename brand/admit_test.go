package brand

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestMinterTopAdmit: Top is below every later mint; Admit takes an id at
// or below Top (and the Minter then never mints it, even after the clock
// steps back) and refuses one above it with ErrAhead without moving the
// floor.
func TestMinterTopAdmit(t *testing.T) {
	clk := &fakeClock{t: time.UnixMilli(EpochMillis + 1_000_000)}
	m, _ := NewMinter(3, WithClock(clk.now))
	base, _ := Make(1_000_000, 3, 0)
	if got := m.Top(); got != base-1 {
		t.Fatalf("Top of a fresh Minter = %s, want %s", got.RedisID(), (base - 1).RedisID())
	}
	for _, id := range []ID{base, base + 1, Max} {
		if err := m.Admit(id); !errors.Is(err, ErrAhead) {
			t.Fatalf("Admit(%s) = %v, want ErrAhead", id.RedisID(), err)
		}
	}
	if m.Last() != 0 {
		t.Fatalf("a refused Admit moved the floor to %s", m.Last().RedisID())
	}
	if err := m.Admit(base - 1); err != nil {
		t.Fatal(err)
	}
	clk.add(-time.Hour)
	if id, err := m.Mint(); err != nil || id <= base-1 {
		t.Fatalf("mint after Admit and a clock step back: %s %v", id.RedisID(), err)
	}
	top := m.Top()
	if err := m.Admit(top); err != nil {
		t.Fatalf("Admit(Top()) = %v", err)
	}
	if err := m.Admit(top + 1); !errors.Is(err, ErrAhead) {
		t.Fatalf("Admit(Top()+1) = %v, want ErrAhead", err)
	}
}

// Every id Admit takes is below every later Mint, whatever the clock does.
func TestPropertyAdmitBelowMints(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := &fakeClock{t: time.UnixMilli(EpochMillis + rapid.Int64Range(0, 1<<40).Draw(t, "t0"))}
		m, _ := NewMinter(rapid.IntRange(0, MaxNode).Draw(t, "node"), WithClock(clk.now))
		var admitted ID
		for range rapid.IntRange(1, 50).Draw(t, "steps") {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				id := genID().Draw(t, "id")
				if rapid.Bool().Draw(t, "nearTop") { // mostly far ahead otherwise
					id = m.Top() + ID(rapid.IntRange(-3, 3).Draw(t, "delta"))
				}
				if m.Admit(id) == nil && id > admitted {
					admitted = id
				}
			case 1:
				clk.add(time.Duration(rapid.Int64Range(-5000, 5000).Draw(t, "step")) * time.Millisecond)
			default:
				id, err := m.Mint()
				if err != nil {
					t.Fatal(err)
				}
				if id <= admitted {
					t.Fatalf("minted %s at or below the admitted %s", id.RedisID(), admitted.RedisID())
				}
			}
		}
	})
}

// ObserveWithin ignores an id far ahead of the clock.
func TestMinterObserveWithin(t *testing.T) {
	clk := &fakeClock{t: time.UnixMilli(EpochMillis + 1_000_000)}
	m, _ := NewMinter(0, WithClock(clk.now))
	if m.ObserveWithin(Max, time.Hour) || m.Last() != 0 {
		t.Fatalf("ObserveWithin(Max) raised the floor to %s", m.Last().RedisID())
	}
	near, _ := Make(1_000_000+int64(time.Minute/time.Millisecond), 0, 9)
	if !m.ObserveWithin(near, time.Hour) || m.Last() != near {
		t.Fatalf("ObserveWithin of an id a minute ahead: floor %s", m.Last().RedisID())
	}
	if id, err := m.Mint(); err != nil || id <= near {
		t.Fatalf("Mint = %s %v", id.RedisID(), err)
	}
}
