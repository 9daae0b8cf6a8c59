package brand

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	goldenfile "github.com/echostore/echostore/internal/golden"
)

// Golden files of the id forms (docs/FORMAT.md, "Branded ids" and
// "Upgrades"). `go test ./brand -run Golden -update` rewrites the files of
// the current version from the encoders; files of older versions are never
// rewritten (internal/golden).

// goldenIDs are the hand-written expectations: each id's fields, text and
// Redis forms, worked out from the spec, not from the code.
var goldenIDs = []struct {
	brand       Brand
	value       uint64
	ms          int64
	node, seq   int
	text, redis string
}{
	{EVT, 0, 0, 0, 0, "EVT_0000000000000", "1704067200000-0"},
	{EVT, 1, 0, 0, 1, "EVT_0000000000001", "1704067200000-1"},
	{JOB, 1<<22 | 2<<12 | 3, 1, 2, 3, "JOB_0000000040803", "1704067200001-8195"},
	{EVT, 4095, 0, 0, 4095, "EVT_00000000003ZZ", "1704067200000-4095"},
	{EVT, 1 << 12, 0, 1, 0, "EVT_0000000000400", "1704067200000-4096"},
	{EVT, 1<<22 - 1, 0, 1023, 4095, "EVT_000000003ZZZZ", "1704067200000-4194303"},
	// 2026-11-30T00:00:00Z = Unix 1796083200000 ms: 92016000000 ms after the epoch.
	{EVT, 92016000000<<22 | 7<<12 | 42, 92016000000, 7, 42, "EVT_0APS55W000W1A", "1796083200000-28714"},
	{A, 1 << 63, 1 << 41, 0, 0, "A_8000000000000", "3903090455552-0"},
	{Brand("TENANT42"), uint64(Max), MaxMillis, MaxNode, MaxSeq, "TENANT42_FZZZZZZZZZZZZ", "6102113711103-4194303"},
}

// A is a one-letter brand, the shortest there is.
const A Brand = "A"

const goldenIDHeader = "# brand value(hex) text redis-id ms node seq: ids, version 1 (docs/FORMAT.md)\n"

func encodeGoldenIDs() []byte {
	var b bytes.Buffer
	b.WriteString(goldenIDHeader)
	for _, g := range goldenIDs {
		id := ID(g.value)
		fmt.Fprintf(&b, "%s %016x %s %s %d %d %d\n", g.brand, uint64(id), g.brand.Format(id), id.RedisID(), id.Millis(), id.Node(), id.Seq())
	}
	return b.Bytes()
}

// TestGoldenIDsV1 reads the checked-in ids of version 1 and checks every
// field against the hand-written expectations, then re-encodes them and
// compares the bytes (a change of the text or Redis form fails here).
func TestGoldenIDsV1(t *testing.T) {
	path := goldenfile.Path("ids.v1.txt")
	enc := encodeGoldenIDs()
	file := goldenfile.Bytes(t, "ids.v1.txt", true, enc)
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
	if lines[0]+"\n" != goldenIDHeader || len(lines)-1 != len(goldenIDs) {
		t.Fatalf("%s: %d lines, want a header and %d ids", path, len(lines), len(goldenIDs))
	}
	for i, line := range lines[1:] {
		g := goldenIDs[i]
		f := strings.Fields(line)
		if len(f) != 7 {
			t.Fatalf("line %d: %q", i+2, line)
		}
		v, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil || v != g.value || f[0] != string(g.brand) || f[2] != g.text || f[3] != g.redis {
			t.Fatalf("line %d = %q, want %s %016x %s %s", i+2, line, g.brand, g.value, g.text, g.redis)
		}
		// Decode both forms with the current readers.
		got, err := Parse(f[2])
		if err != nil || got.ID != ID(g.value) || got.Brand != g.brand {
			t.Fatalf("Parse(%q) = %v, %v; want %s %d", f[2], got, err, g.brand, g.value)
		}
		if id, err := g.brand.Parse(f[2]); err != nil || id != ID(g.value) {
			t.Fatalf("%s.Parse(%q) = %d, %v", g.brand, f[2], id, err)
		}
		rid, err := ParseRedisID(f[3])
		if err != nil || rid != ID(g.value) {
			t.Fatalf("ParseRedisID(%q) = %d, %v; want %d", f[3], rid, err, g.value)
		}
		id := ID(g.value)
		if id.Millis() != g.ms || id.Node() != g.node || id.Seq() != g.seq {
			t.Fatalf("%s: fields %d/%d/%d, want %d/%d/%d", f[2], id.Millis(), id.Node(), id.Seq(), g.ms, g.node, g.seq)
		}
		if f[4] != strconv.FormatInt(g.ms, 10) || f[5] != strconv.Itoa(g.node) || f[6] != strconv.Itoa(g.seq) {
			t.Fatalf("line %d: fields %v", i+2, f[4:])
		}
		if mk, err := Make(g.ms, g.node, g.seq); err != nil || mk != id {
			t.Fatalf("Make(%d, %d, %d) = %d, %v", g.ms, g.node, g.seq, mk, err)
		}
	}
}
