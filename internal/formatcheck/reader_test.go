package formatcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/internal/testserver"
)

// TestReaderMatchesCLI: reader.py, written from docs/FORMAT.md alone, reads
// the file:// remote of an archived stream and prints exactly the bytes of
// `echostore stream read --archive-only`, in both directions. The stream's
// tens of thousands of records hold every escaping case of Record JSON
// (every ASCII byte, <, >, &, U+2028/U+2029, backspace and form feed, other
// control characters), multi-byte and non-BMP characters, empty names and
// values, long values (one larger than a frame) and many fields; the remote
// log holds segment commits and inline commits, a retention drop (the
// archive floor) that earlier commits' pages lie below, a checkpoint that
// leaves the dropped pages out, tombstones below it and commits after it; the reader is also compared
// once before the first checkpoint, when it folds the log from LSN 1.
func TestReaderMatchesCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	py := pythonWithZstd(ctx, t)
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })

	dir := t.TempDir()
	bin := filepath.Join(dir, "echostore")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/echostore/echostore/cmd/echostore").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rdir := filepath.Join(dir, "remote")
	global := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--remote", "file://" + rdir}
	cli := func(stdin []byte, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(append([]string{}, global...), args...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("echostore %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
	gen := newRecords(7)
	appendN := func(n int, small bool) {
		t.Helper()
		for n > 0 {
			k := min(n, 2000)
			ids := cli(gen.jsonl(k, small), "stream", "append", "q", "s", "--jsonl", "-")
			if got := bytes.Count(ids, []byte("\n")); got != k {
				t.Fatalf("append printed %d ids, want %d", got, k)
			}
			n -= k
		}
	}
	cycle := func(args ...string) {
		t.Helper()
		cli(nil, append([]string{"archive", "cycle", "q", "s", "--trim-after", "remote"}, args...)...)
	}

	built := time.Now()
	appendN(12_000, false) // folds of 1,000 records, pushed as one commit of segments
	cycle("--keep", "1000")
	appendN(5, true) // a small fold: an inline commit
	cycle("--keep", "1000")
	appendN(11_000, false)
	cycle("--keep", "500", "--retain-count", "15000") // drops the oldest: archive.low > 0
	// A log without a checkpoint: the reader folds it from LSN 1.
	if markers, _ := os.ReadDir(filepath.Join(rdir, "volumes", "archive.q.s", "checkpoints")); len(markers) != 0 {
		t.Fatalf("%d checkpoint markers before the first volume checkpoint", len(markers))
	}
	early := cli(nil, "stream", "read", "q", "s", "--archive-only")
	if got := runReader(ctx, t, py, rdir, "--volume", "archive.q.s"); !bytes.Equal(got, early) {
		t.Fatalf("reader.py on the log without a checkpoint differs from stream read --archive-only: %s", firstDiff(got, early))
	}
	cli(nil, "volume", "checkpoint", "archive.q.s")
	cli(nil, "volume", "gc", "archive.q.s", "--trim-log", "--min-age", "0s") // tombstones below the checkpoint
	appendN(8_000, false)
	cycle("--keep", "1") // segments after the checkpoint
	appendN(3, true)
	cycle("--keep", "1") // and an inline commit after it

	var st struct {
		Archived, Low, Retained uint64
	}
	if err := json.Unmarshal(cli(nil, "archive", "status", "q", "s"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Low == 0 || st.Retained != st.Archived-st.Low || st.Retained < 20_000 {
		t.Fatalf("archive status %+v: want a retention floor and tens of thousands retained", st)
	}
	checkRemoteShapes(t, rdir)
	t.Logf("appended, cycled and pushed %d records (%d retained) in %v", gen.n, st.Retained, time.Since(built).Round(time.Millisecond))

	var forward []byte
	for _, dir := range [][]string{nil, {"--reverse"}} {
		want := cli(nil, append([]string{"stream", "read", "q", "s", "--archive-only"}, dir...)...)
		if n := uint64(bytes.Count(want, []byte("\n"))); n != st.Retained {
			t.Fatalf("stream read %v printed %d lines, status says %d retained", dir, n, st.Retained)
		}
		start := time.Now()
		got := runReader(ctx, t, py, append([]string{rdir, "q", "s"}, dir...)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("reader.py %v differs from stream read --archive-only: %s", dir, firstDiff(got, want))
		}
		t.Logf("reader.py %v: %d records, %d bytes of JSON lines, identical to the CLI's (%v)", dir, st.Retained, len(got), time.Since(start).Round(time.Millisecond))
		if forward == nil {
			forward = got
		}
	}
	for _, want := range []string{`\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`, `\u0008`, `\u000c`, `\u0000`, `\u001f`, `\n`, `\"`, `\\`, "\x7f", "🙂", "\U0010ffff"} {
		if !bytes.Contains(forward, []byte(want)) {
			t.Fatalf("the output holds no %q: the test does not exercise it", want)
		}
	}

	// The reader refuses a corrupt commit (a flipped byte of the head).
	logs, err := os.ReadDir(filepath.Join(rdir, "volumes", "archive.q.s", "log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("log folder: %v", err)
	}
	head := filepath.Join(rdir, "volumes", "archive.q.s", "log", logs[0].Name())
	b, err := os.ReadFile(head)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(head, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "reader.py", rdir, "q", "s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "CRC-32C") {
		t.Fatalf("reader on a corrupt head commit: %v, stderr %q; want exit status 1 naming the CRC", err, stderr.String())
	}
}

// runReader runs reader.py with args and returns its stdout.
func runReader(ctx context.Context, t *testing.T, py string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, py, append([]string{"reader.py"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reader.py %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// checkRemoteShapes asserts that the remote log holds every shape the
// reader must handle, so that a match proves each of them: commits with
// segments and with inline archive pages, a checkpoint marker, tombstones
// below it, commits above it, and an archive.low value.
func checkRemoteShapes(t *testing.T, rdir string) {
	t.Helper()
	logDir := filepath.Join(rdir, "volumes", "archive.q.s", "log")
	ents, err := os.ReadDir(logDir)
	if err != nil {
		t.Fatal(err)
	}
	var tombstones, inline, segments, low int
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(logDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(b, []byte("ESRT")) {
			if _, _, err := remote.DecodeTombstone(b); err != nil {
				t.Fatal(err)
			}
			tombstones++
			continue
		}
		c, err := remote.DecodeCommit(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range c.Inline {
			if p.Index >= graft.ArchiveBase {
				inline++
				break
			}
		}
		if len(c.Segments) > 0 {
			segments++
		}
		if _, ok := c.Meta["archive.low"]; ok {
			low++
		}
	}
	marks, err := os.ReadDir(filepath.Join(rdir, "volumes", "archive.q.s", "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	var cpLSN uint64
	if len(marks) > 0 {
		if _, err := fmt.Sscanf(marks[0].Name()[:16], "%x", &cpLSN); err != nil {
			t.Fatal(err)
		}
		cpLSN = ^cpLSN
	}
	head := uint64(0)
	if len(ents) > 0 {
		if _, err := fmt.Sscanf(ents[0].Name(), "%x", &head); err != nil {
			t.Fatal(err)
		}
		head = ^head
	}
	if tombstones == 0 || inline < 2 || segments < 2 || low == 0 || len(marks) == 0 || head <= cpLSN {
		t.Fatalf("remote log: %d tombstones, %d inline and %d segment commits, %d with archive.low, %d checkpoints (newest at %d), head %d: the test misses a shape",
			tombstones, inline, segments, low, len(marks), cpLSN, head)
	}
	// The checkpoint references no page below the archive floor (a
	// checkpoint leaves dropped pages out, so that remote GC can delete
	// their segments), while the commits the early comparison folded from
	// LSN 1 do: there only archive.low hides them, so a reader that ignored
	// the floor would have printed dropped records.
	cpb, err := os.ReadFile(filepath.Join(logDir, fmt.Sprintf("%016x", ^cpLSN)))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := remote.DecodeCommit(cpb)
	if err != nil {
		t.Fatal(err)
	}
	lowMeta := cp.Meta["archive.low"]
	if len(lowMeta) != 8 {
		t.Fatalf("checkpoint at %d: archive.low %x, want 8 bytes", cpLSN, lowMeta)
	}
	floor := graft.ArchiveBase + binary.BigEndian.Uint64(lowMeta)
	pages := cp.Pages()
	if !cp.Checkpoint || len(pages) == 0 {
		t.Fatalf("commit at %d: not a checkpoint, or no page", cpLSN)
	}
	for _, p := range pages {
		if p.Index >= graft.ArchiveBase && p.Index < floor {
			t.Fatalf("checkpoint at %d references page %d below the floor %d", cpLSN, p.Index, floor)
		}
	}
}

// firstDiff describes where two outputs first differ, by line.
func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) && i < len(w); i++ {
		if !bytes.Equal(g[i], w[i]) {
			return fmt.Sprintf("line %d:\n got  %.400q\n want %.400q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g)-1, len(w)-1)
}

// records generates append input with awkward content, deterministically.
type records struct {
	rng *rand.Rand
	n   int
}

func newRecords(seed uint64) *records { return &records{rng: rand.New(rand.NewPCG(seed, seed))} }

// pieces are what names and values are made of: every ASCII byte, and
// characters of every UTF-8 length, the line and paragraph separators,
// U+FFFD itself and the largest code point among them.
var pieces = func() []string {
	var p []string
	for c := range 0x80 {
		p = append(p, string(rune(c)))
	}
	return append(p, "\u0080", "é", "\u00ff", "\u07ff", "\u0800", "\u2028", "\u2029", "\ufffd", "\uffff",
		"\U00010000", "🙂", "\U0010ffff", "<script>&amp;</script>", `\"\\`, "\b\f", "日本語", "   ", "/")
}()

var names = []string{"a", "", "<k>", "ü", "\u2028n", "\x01", "k&v", "\"q\"", "tab\tname", "🙂", "z"}

func (g *records) text(maxPieces int) string {
	var b strings.Builder
	for range g.rng.IntN(maxPieces + 1) {
		b.WriteString(pieces[g.rng.IntN(len(pieces))])
	}
	return b.String()
}

// record returns the fields of the next record.
func (g *records) record(small bool) [][2]string {
	g.n++
	nf := 1 + g.rng.IntN(8)
	switch {
	case small:
		nf = 1 + g.rng.IntN(3)
	case g.n%1000 == 0:
		nf = 300
	}
	fields := make([][2]string, nf)
	for j := range fields {
		name := names[j%len(names)]
		if j >= len(names) {
			name += fmt.Sprint(j)
		}
		v := g.text(30)
		switch {
		case small:
		case g.n == 1 && j == 0:
			v = strings.Join(pieces, "")
		case g.n%5000 == 0 && j == 0:
			v = strings.Repeat(g.text(40)+"x", 1)
			for len(v) < 300<<10 { // a page larger than a frame
				v += v
			}
		case g.n%97 == 0 && j == 0:
			v = strings.Repeat(g.text(20)+"y", 500)
		}
		fields[j] = [2]string{name, v}
	}
	return fields
}

// jsonl returns n lines of `stream append --jsonl` input.
func (g *records) jsonl(n int, small bool) []byte {
	var b bytes.Buffer
	for range n {
		b.WriteString(`{"fields":{`)
		for j, f := range g.record(small) {
			if j > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(f[0])
			v, _ := json.Marshal(f[1])
			b.Write(k)
			b.WriteByte(':')
			b.Write(v)
		}
		b.WriteString("}}\n")
	}
	return b.Bytes()
}
