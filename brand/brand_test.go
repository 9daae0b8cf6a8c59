package brand

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/echostore/echostore/xid"
	"pgregory.net/rapid"
)

func genID() *rapid.Generator[ID] {
	return rapid.Custom(func(t *rapid.T) ID {
		// Mix uniform 64-bit values with values near the field edges.
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
			return ID(rapid.Uint64().Draw(t, "raw"))
		case 1:
			id, _ := Make(rapid.Int64Range(0, MaxMillis).Draw(t, "ms"),
				rapid.IntRange(0, MaxNode).Draw(t, "node"), rapid.IntRange(0, MaxSeq).Draw(t, "seq"))
			return id
		default:
			return ID(rapid.SampledFrom([]uint64{0, 1, 1<<22 - 1, 1 << 22, 1<<63 - 1, 1 << 63, ^uint64(0) - 1, ^uint64(0)}).Draw(t, "edge"))
		}
	})
}

func TestKnownValues(t *testing.T) {
	id, err := Make(1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := uint64(id), uint64(1<<22|2<<12|3); got != want {
		t.Fatalf("Make = %d, want %d", got, want)
	}
	if got := id.RedisID(); got != "1704067200001-8195" {
		t.Fatalf("RedisID = %q", got)
	}
	if got := EVT.Format(0); got != "EVT_0000000000000" {
		t.Fatalf("Format(0) = %q", got)
	}
	if got := EVT.Format(Max); got != "EVT_FZZZZZZZZZZZZ" {
		t.Fatalf("Format(Max) = %q", got)
	}
	if got := id.Time().Format("2006-01-02T15:04:05.000Z07:00"); got != "2024-01-01T00:00:00.001Z" {
		t.Fatalf("Time = %s", got)
	}
	if id.Millis() != 1 || id.Node() != 2 || id.Seq() != 3 {
		t.Fatalf("fields = %d %d %d", id.Millis(), id.Node(), id.Seq())
	}
}

// Text form: round trip, and string order equals numeric order.
func TestPropertyTextRoundTripAndOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genID().Draw(t, "a"), genID().Draw(t, "b")
		sa, sb := JOB.Format(a), JOB.Format(b)
		got, err := JOB.Parse(sa)
		if err != nil || got != a {
			t.Fatalf("Parse(Format(%d)) = %d, %v", a, got, err)
		}
		if (a < b) != (sa < sb) || (a == b) != (sa == sb) {
			t.Fatalf("order: %d<%d is %v but %q<%q is %v", a, b, a < b, sa, sb, sa < sb)
		}
	})
}

// Redis ids: a bijection over the whole ID space that preserves order.
func TestPropertyRedisBijectionAndOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genID().Draw(t, "a"), genID().Draw(t, "b")
		ra, rb := a.RedisID(), b.RedisID()
		got, err := ParseRedisID(ra)
		if err != nil || got != a {
			t.Fatalf("ParseRedisID(%q) = %d, %v; want %d", ra, got, err, a)
		}
		if (a < b) != redisLess(ra, rb) {
			t.Fatalf("order: %d<%d is %v but redis %s<%s is %v", a, b, a < b, ra, rb, redisLess(ra, rb))
		}
	})
}

// redisLess orders Redis stream ids as Redis does: by ms, then by sequence.
func redisLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	num := func(x, y string) int { // compare decimal strings without leading zeros
		if len(x) != len(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	}
	if c := num(am, bm); c != 0 {
		return c < 0
	}
	return num(as, bs) < 0
}

// Every Redis id in the branded range maps to an id and back.
func TestPropertyRedisInRangeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := rapid.Int64Range(EpochMillis, EpochMillis+MaxMillis).Draw(t, "ms")
		seq := rapid.Uint64Range(0, 1<<22-1).Draw(t, "seq")
		s := formatRedis(ms, seq)
		id, err := ParseRedisID(s)
		if err != nil {
			t.Fatalf("ParseRedisID(%q): %v", s, err)
		}
		if id.RedisID() != s {
			t.Fatalf("round trip %q -> %q", s, id.RedisID())
		}
	})
}

func formatRedis(ms int64, seq uint64) string {
	b, _ := json.Marshal(ms)
	c, _ := json.Marshal(seq)
	return string(b) + "-" + string(c)
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		in   string
		want error
	}{
		{"", ErrMalformed},
		{"EVT", ErrMalformed},
		{"EVT_", ErrMalformed},
		{"EVT_000000000000", ErrMalformed},   // 12 digits
		{"EVT_00000000000000", ErrMalformed}, // 14 digits
		{"EVT_G000000000000", ErrMalformed},  // overflows 64 bits
		{"EVT_000000000000a", ErrMalformed},  // lower case is not canonical
		{"EVT_000000000000U", ErrMalformed},  // U is not Crockford
		{"EVT_000000000000I", ErrMalformed},
		{"evt_0000000000000", ErrMalformed},
		{"_0000000000000", ErrMalformed},
		{"1EVT_0000000000000", ErrMalformed},
		{"TOOLONGBR_0000000000000", ErrMalformed},
		{"JOB_0000000000000", ErrBrand},
	}
	for _, c := range cases {
		_, err := EVT.Parse(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("EVT.Parse(%q) = %v, want %v", c.in, err, c.want)
		}
	}
	redis := []struct {
		in   string
		want error
	}{
		{"", ErrMalformed}, {"1", ErrMalformed}, {"-1", ErrMalformed}, {"1-", ErrMalformed},
		{"01704067200000-0", ErrMalformed}, {"1704067200000-01", ErrMalformed}, {"+1-1", ErrMalformed},
		{"1704067200000-1-1", ErrMalformed}, {"99999999999999999999-0", ErrMalformed},
		{"0-1", ErrRange}, {"1704067199999-0", ErrRange}, {"1704067200000-4194304", ErrRange},
		{"6102113711104-0", ErrRange}, // EpochMillis + 2^42
	}
	for _, c := range redis {
		_, err := ParseRedisID(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("ParseRedisID(%q) = %v, want %v", c.in, err, c.want)
		}
	}
	if _, err := EVT.ParseAny("1704067200000-5"); err != nil {
		t.Errorf("ParseAny(redis) = %v", err)
	}
	if _, err := EVT.ParseAny("JOB_0000000000000"); !errors.Is(err, ErrBrand) {
		t.Errorf("ParseAny(foreign) = %v", err)
	}
	if _, err := EVT.ParseAny("yesterday"); !errors.Is(err, ErrMalformed) {
		t.Errorf("ParseAny(word) = %v", err)
	}
}

func TestBrandValidate(t *testing.T) {
	for _, b := range []string{"EVT", "JOB", "A", "ORD2", "ABCDEFGH"} {
		if _, err := New(b); err != nil {
			t.Errorf("New(%q) = %v", b, err)
		}
	}
	for _, b := range []string{"", "evt", "2EV", "E_V", "ABCDEFGHI", "EV T"} {
		if _, err := New(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("New(%q) = %v, want ErrMalformed", b, err)
		}
	}
}

func TestTextMarshaling(t *testing.T) {
	id, _ := Make(123456, 7, 8)
	x := Branded{Brand: EVT, ID: id}
	b, err := json.Marshal(struct {
		ID Branded `json:"id"`
	}{x})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"` + x.String() + `"}`; string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
	var back struct {
		ID Branded `json:"id"`
	}
	back.ID.Brand = EVT
	if err := json.Unmarshal(b, &back); err != nil || back.ID != x {
		t.Fatalf("unmarshal = %v, %v", back.ID, err)
	}
	want := Branded{Brand: JOB}
	if err := want.UnmarshalText([]byte(x.String())); !errors.Is(err, ErrBrand) {
		t.Fatalf("UnmarshalText foreign = %v", err)
	}
	if _, err := (Branded{}).MarshalText(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("MarshalText zero = %v", err)
	}
}

func TestRangeHelpers(t *testing.T) {
	at := Epoch().Add(1500 * 1e6) // 1.5 s
	lo, hi := FirstAt(at), LastAt(at)
	if lo.Millis() != 1500 || hi.Millis() != 1500 || lo.Node() != 0 || lo.Seq() != 0 || hi.Node() != MaxNode || hi.Seq() != MaxSeq {
		t.Fatalf("FirstAt/LastAt = %v %v", lo.RedisID(), hi.RedisID())
	}
	if FirstAt(Epoch().Add(-1)) != 0 || LastAt(Epoch().Add(-1e6)) != 0 {
		t.Fatal("before epoch not clamped to 0")
	}
	if n, err := Max.Next(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Max.Next = %v, %v", n, err)
	}
	if n, _ := ID(1<<22 - 1).Next(); n.RedisID() != "1704067200001-0" {
		t.Fatalf("Next across ms = %s", n.RedisID())
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"EVT_0000000000000", "JOB_FZZZZZZZZZZZZ", "EVT_G000000000000", "a_b", "", "_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q): error %v is not ErrMalformed", s, err)
			}
			return
		}
		if x.String() != s {
			t.Fatalf("Parse(%q) accepted a non-canonical form; canonical is %q", s, x.String())
		}
	})
}

func FuzzParseRedisID(f *testing.F) {
	for _, s := range []string{"1704067200000-0", "0-0", "6102113711103-4194303", "1-", "-", "00-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseRedisID(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrRange) {
				t.Fatalf("ParseRedisID(%q): untyped error %v", s, err)
			}
			return
		}
		if id.RedisID() != s {
			t.Fatalf("ParseRedisID(%q) accepted a non-canonical form; canonical is %q", s, id.RedisID())
		}
	})
}

func FuzzParseAny(f *testing.F) {
	for _, s := range []string{"EVT_0000000000000", "1704067200000-0", "x", "9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := EVT.ParseAny(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrRange) && !errors.Is(err, ErrBrand) {
				t.Fatalf("ParseAny(%q): untyped error %v", s, err)
			}
			return
		}
		if EVT.Format(id) != s && id.RedisID() != s {
			t.Fatalf("ParseAny(%q) = %d, which formats as neither form", s, id)
		}
	})
}

func TestXIDConversion(t *testing.T) {
	for _, id := range []ID{0, 1, 1<<22 | 5, MaxMillis << 22, Max} {
		x := id.XID()
		if x.String() != id.RedisID() {
			t.Fatalf("%d: XID %v, RedisID %s", uint64(id), x, id.RedisID())
		}
		back, err := FromXID(x)
		if err != nil || back != id {
			t.Fatalf("FromXID(%v) = %d, %v; want %d", x, uint64(back), err, uint64(id))
		}
	}
	for _, x := range []xid.ID{{Ms: 0, Seq: 1}, {Ms: uint64(EpochMillis) - 1, Seq: 0},
		{Ms: uint64(EpochMillis), Seq: 1 << 22}, {Ms: uint64(EpochMillis) + MaxMillis + 1}, xid.Max} {
		if _, err := FromXID(x); !errors.Is(err, ErrRange) {
			t.Fatalf("FromXID(%v) = %v, want ErrRange", x, err)
		}
	}
	// Order is kept: brand order is xid order.
	a, b := ID(1<<22|4095), ID(2<<22)
	if !a.XID().Less(b.XID()) {
		t.Fatal("order")
	}
}

// TestRedisIDs: RedisIDs formats each id as RedisID does, in order.
func TestRedisIDs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOf(genID()).Draw(t, "ids")
		got := RedisIDs(ids)
		if len(got) != len(ids) {
			t.Fatalf("%d strings for %d ids", len(got), len(ids))
		}
		for i, id := range ids {
			if got[i] != id.RedisID() {
				t.Fatalf("id %d: %q, want %q", i, got[i], id.RedisID())
			}
		}
	})
}
