package xid

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

func TestOrderAndEdges(t *testing.T) {
	ids := []ID{Min, {0, 1}, {0, ^uint64(0)}, {1, 0}, {1704067200000, 5}, {^uint64(0), 0}, Max}
	for i := range ids {
		for j := range ids {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ids[i].Compare(ids[j]); got != want {
				t.Fatalf("%v.Compare(%v) = %d, want %d", ids[i], ids[j], got, want)
			}
			if got := ids[i].Less(ids[j]); got != (want < 0) {
				t.Fatalf("%v.Less(%v) = %v", ids[i], ids[j], got)
			}
		}
		if i+1 < len(ids) {
			if n, ok := ids[i].Next(); !ok || n.Less(ids[i]) || n == ids[i] {
				t.Fatalf("%v.Next() = %v, %v", ids[i], n, ok)
			}
		}
	}
	if n, ok := Max.Next(); ok || n != Max {
		t.Fatalf("Max.Next() = %v, %v", n, ok)
	}
	if p, ok := Min.Prev(); ok || p != Min {
		t.Fatalf("Min.Prev() = %v, %v", p, ok)
	}
	if n, _ := (ID{3, ^uint64(0)}).Next(); n != (ID{4, 0}) {
		t.Fatalf("carry: %v", n)
	}
	if p, _ := (ID{4, 0}).Prev(); p != (ID{3, ^uint64(0)}) {
		t.Fatalf("borrow: %v", p)
	}
	if MinOf(Max, Min) != Min || MaxOf(Min, Max) != Max {
		t.Fatal("MinOf/MaxOf")
	}
	if !Min.IsZero() || Max.IsZero() {
		t.Fatal("IsZero")
	}
}

func TestParseAndString(t *testing.T) {
	for _, c := range []struct {
		s  string
		id ID
	}{
		{"0-0", Min},
		{"0-1", ID{0, 1}},
		{"1704067200000-4194304", ID{1704067200000, 4194304}},
		{"18446744073709551615-18446744073709551615", Max},
	} {
		got, err := Parse(c.s)
		if err != nil || got != c.id {
			t.Fatalf("Parse(%q) = %v, %v; want %v", c.s, got, err, c.id)
		}
		if c.id.String() != c.s {
			t.Fatalf("String() = %q, want %q", c.id.String(), c.s)
		}
		b, _ := c.id.MarshalText()
		var back ID
		if err := back.UnmarshalText(b); err != nil || back != c.id {
			t.Fatalf("text round trip of %v: %v, %v", c.id, back, err)
		}
	}
	for _, bad := range []string{"", "-", "1", "1-", "-1", "01-1", "1-01", "+1-1", "1-+1", " 1-1", "1-1 ",
		"1-2-3", "18446744073709551616-0", "0-18446744073709551616", "99999999999999999999-0",
		"1x-0", "*", "1-*", "+", "(1-1"} {
		_, err := Parse(bad)
		var se *SyntaxError
		if !errors.Is(err, ErrSyntax) || !errors.As(err, &se) {
			t.Fatalf("Parse(%q) = %v, want a *SyntaxError", bad, err)
		}
	}
}

func TestParseBound(t *testing.T) {
	if id, err := ParseBound("5", false); err != nil || id != (ID{5, 0}) {
		t.Fatalf("start 5: %v %v", id, err)
	}
	if id, err := ParseBound("5", true); err != nil || id != (ID{5, ^uint64(0)}) {
		t.Fatalf("end 5: %v %v", id, err)
	}
	if id, err := ParseBound("5-3", true); err != nil || id != (ID{5, 3}) {
		t.Fatalf("end 5-3: %v %v", id, err)
	}
	for _, bad := range []string{"", "-", "+", "(5", "05", "5-"} {
		if _, err := ParseBound(bad, false); !errors.Is(err, ErrSyntax) {
			t.Fatalf("ParseBound(%q) = %v", bad, err)
		}
	}
}

func TestTime(t *testing.T) {
	at := time.UnixMilli(1704067200123)
	if FirstAt(at) != (ID{1704067200123, 0}) || LastAt(at) != (ID{1704067200123, ^uint64(0)}) {
		t.Fatal("FirstAt/LastAt")
	}
	if FirstAt(time.UnixMilli(-5)) != Min || LastAt(time.UnixMilli(-5)) != Min {
		t.Fatal("before the Unix epoch")
	}
}

// FuzzParse: Parse accepts exactly the canonical decimal "ms-seq" text, and
// String gives it back.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-0", "0-1", "1-01", "18446744073709551615-18446744073709551615",
		"18446744073709551616-0", "", "-", "5", "1704067200000-4194304"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q): untyped error %v", s, err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("Parse(%q) = %v, which prints %q", s, id, id.String())
		}
		// The reference: strconv on both halves, canonical.
		for _, part := range splitDash(s) {
			v, err := strconv.ParseUint(part, 10, 64)
			if err != nil || strconv.FormatUint(v, 10) != part {
				t.Fatalf("Parse(%q) accepted non-canonical part %q", s, part)
			}
		}
	})
}

func splitDash(s string) []string {
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			return []string{s[:i], s[i+1:]}
		}
	}
	return []string{s}
}
