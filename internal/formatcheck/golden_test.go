package formatcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
)

// dumpPy prints what reader.py decodes from the golden files named on its
// command line (KIND=PATH), in the text form goDump builds from the Go
// decoders.
const dumpPy = `
import sys
sys.path.insert(0, ".")
import reader

def commit(c):
    print("commit lsn=%d from=%d to=%d checkpoint=%s prev=%s volume=%s" % (
        c.lsn, c.local_from, c.local_to, str(c.checkpoint).lower(), c.prev.hex(), c.volume))
    for k in sorted(c.meta):
        print("meta %s=%s" % (k.decode(), c.meta[k].hex()))
    for idx, data in c.inline:
        print("inline %d=%s" % (idx, data.hex()))
    for key, frames in c.segments:
        print("segment " + key)
        for f in frames:
            frame(f)

def frame(f):
    print("frame %d+%d raw=%d crc=%08x" % (f.offset, f.length, f.raw_length, f.crc))
    for idx, off, ln in f.pages:
        print("page %d@%d+%d" % (idx, off, ln))

for arg in sys.argv[1:]:
    kind, path = arg.split("=", 1)
    print("== " + arg)
    if kind == "span":
        parts = [reader.decode_record_page(open(p, "rb").read()) for p in path.split("+")]
        head, conts = parts[0], parts[1:]
        assert head[0] == "head" and len(conts) == head[2]
        assert all(c[0] == "cont" and c[1] == head[1] and c[2] == i + 1 for i, c in enumerate(conts))
        sys.stdout.flush()
        sys.stdout.buffer.write(reader.record_json(*reader.span_record(head[1], head[3], [head[4]] + [c[4] for c in conts])))
        sys.stdout.buffer.flush()
        continue
    b = open(path, "rb").read()
    if kind == "commit":
        commit(reader.decode_commit(b))
    elif kind == "tombstone":
        print("tombstone volume=%s lsn=%d" % reader.decode_tombstone(b))
    elif kind == "marker":
        v, lsn, h = reader.decode_marker(b)
        print("marker volume=%s lsn=%d hash=%s" % (v, lsn, h.hex()))
    elif kind == "segment":
        refs, pages = reader.decode_segment(b)
        for f in refs:
            frame(f)
        for idx, data in pages:
            print("data %d=%s" % (idx, data.hex()))
    elif kind == "identity":
        rid, created = reader.decode_identity(b)
        print("identity id=%s created=%d" % (rid.hex(), created))
    elif kind == "page":
        sys.stdout.flush()
        sys.stdout.buffer.write(reader.record_json(*reader.decode_record_page(b)))
        sys.stdout.buffer.flush()
`

// TestReaderDecodesGoldenObjects: reader.py decodes every golden object of
// the remote (commits, checkpoint, tombstone, marker, the old segment, the
// identity) and the archive's golden record pages to exactly what the Go
// decoders give, so each byte layout of docs/FORMAT.md, the worked example
// of the commit included, is read the same by both.
func TestReaderDecodesGoldenObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	py := pythonWithZstd(ctx, t)
	rg := func(name string) string {
		return filepath.Join("..", "..", "graft", "remote", "testdata", "golden", name)
	}
	ag := func(name string) string { return filepath.Join("..", "..", "archive", "testdata", "golden", name) }
	args := []string{
		"commit=" + rg("commit.v1.bin"), "commit=" + rg("commit-checkpoint.v1.bin"),
		"tombstone=" + rg("tombstone.v1.bin"), "marker=" + rg("checkpoint-marker.v1.bin"),
		"segment=" + rg("segment.v1.bin"),
		"identity=" + filepath.Join("..", "..", "graft", "testdata", "golden", "identity.v1.bin"),
		"page=" + ag("record-page.v1.bin"), "page=" + ag("record-page-fields.v1.bin"),
		"span=" + ag("record-page-span.v3.bin") + "+" + ag("record-page-span.v4.bin"),
	}
	var want bytes.Buffer
	for _, a := range args {
		kind, path, _ := strings.Cut(a, "=")
		fmt.Fprintf(&want, "== %s\n", a)
		if kind == "span" { // a record spanning pages: its page files, joined by "+"
			var pages [][]byte
			for _, p := range strings.Split(path, "+") {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				pages = append(pages, b)
			}
			r, err := archive.DecodeRecordPages(pages)
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			want.Write(append(mq.AppendJSON(nil, r), '\n'))
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := goDump(&want, kind, b); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	cmd := exec.CommandContext(ctx, py, append([]string{"-c", dumpPy}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("reader.py on the golden files: %v\n%s", err, stderr.Bytes())
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("reader.py decodes the golden files as\n%s\nthe Go decoders as\n%s", got, want.Bytes())
	}
}

// goDump writes what the Go decoders read from b, in dumpPy's form.
func goDump(w *bytes.Buffer, kind string, b []byte) error {
	frame := func(f remote.FrameRef) {
		fmt.Fprintf(w, "frame %d+%d raw=%d crc=%08x\n", f.Offset, f.Length, f.RawLength, f.CRC)
		for _, p := range f.Pages {
			fmt.Fprintf(w, "page %d@%d+%d\n", p.Index, p.Offset, p.Length)
		}
	}
	switch kind {
	case "commit":
		c, err := remote.DecodeCommit(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "commit lsn=%d from=%d to=%d checkpoint=%t prev=%x volume=%s\n", c.LSN, c.LocalFrom, c.LocalTo, c.Checkpoint, c.Prev[:], c.Volume)
		keys := make([]string, 0, len(c.Meta))
		for k := range c.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "meta %s=%x\n", k, c.Meta[k])
		}
		for _, p := range c.Inline {
			fmt.Fprintf(w, "inline %d=%x\n", p.Index, p.Data)
		}
		for _, s := range c.Segments {
			fmt.Fprintf(w, "segment %s\n", s.Key)
			for _, f := range s.Frames {
				frame(f)
			}
		}
	case "tombstone":
		v, lsn, err := remote.DecodeTombstone(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "tombstone volume=%s lsn=%d\n", v, lsn)
	case "marker":
		v, lsn, h, err := remote.DecodeCheckpointMarker(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "marker volume=%s lsn=%d hash=%x\n", v, lsn, h[:])
	case "segment":
		frames, pages, err := remote.DecodeSegment(b)
		if err != nil {
			return err
		}
		for _, f := range frames {
			frame(f)
		}
		for _, p := range pages {
			fmt.Fprintf(w, "data %d=%x\n", p.Index, p.Data)
		}
	case "identity":
		in, err := graft.DecodeIdentity(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "identity id=%x created=%d\n", in.ID[:], in.Created.UnixNano())
	case "page":
		r, err := archive.DecodeRecordPage(b)
		if err != nil {
			return err
		}
		w.Write(append(mq.AppendJSON(nil, r), '\n'))
	default:
		return fmt.Errorf("kind %q", kind)
	}
	return nil
}

// jsonPy reads records framed as u64 id, u32 field count, then u32 length
// and bytes of each name and value (big-endian), from stdin, and prints
// reader.py's JSON line of each.
const jsonPy = `
import struct, sys
sys.path.insert(0, ".")
import reader
data, off, out = sys.stdin.buffer.read(), 0, []
while off < len(data):
    rid, n = struct.unpack_from(">QI", data, off)
    off += 12
    fields = []
    for _ in range(2 * n):
        (ln,) = struct.unpack_from(">I", data, off)
        fields.append(data[off + 4:off + 4 + ln])
        off += 4 + ln
    out.append(reader.record_json(reader.branded_to_xid(rid), list(zip(fields[0::2], fields[1::2]))))
sys.stdout.buffer.write(b"".join(out))
`

// TestReaderJSONMatchesAppendJSON: reader.py's Record JSON, written from
// docs/FORMAT.md's escaping table, equals mq.AppendJSON byte for byte on
// 50,000 records of random bytes biased to every case of the table: every
// byte value, <, >, &, U+2028/U+2029, and invalid UTF-8 (stray continuation
// bytes, truncated sequences, overlong forms, encoded surrogates, code
// points above U+10FFFF) in quantities the archive tests do not write.
func TestReaderJSONMatchesAppendJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	py := pythonWithZstd(ctx, t)
	rng := rand.New(rand.NewPCG(16, 7))
	frags := [][]byte{
		{0xe2, 0x80, 0xa8}, {0xe2, 0x80, 0xa9}, {0xed, 0xa0, 0x80}, {0xc0, 0xaf}, {0xc1, 0xbf}, {0xe0, 0x80, 0xaf},
		{0xf4, 0x90, 0x80, 0x80}, {0xef, 0xbf, 0xbd}, {0xf0, 0x9f, 0x99, 0x82}, {0xe2, 0x82}, {0xf0, 0x9f}, {0x80},
		{0xbf}, {0xf5}, {0xff}, {0xc3, 0xa9}, {0xdf, 0xbf}, {0xe0, 0xa0, 0x80}, {0xf4, 0x8f, 0xbf, 0xbf},
		[]byte("<"), []byte(">"), []byte("&"), []byte(`"`), []byte(`\`), []byte("/"), {0x7f}, {0x08}, {0x0c},
	}
	text := func() []byte {
		var b []byte
		for range rng.IntN(24) {
			if rng.IntN(2) == 0 {
				b = append(b, byte(rng.IntN(256)))
			} else {
				b = append(b, frags[rng.IntN(len(frags))]...)
			}
		}
		return b
	}
	var in, want bytes.Buffer
	invalid := 0
	for range 50_000 {
		id := rng.Uint64()
		fields := make([][2][]byte, 1+rng.IntN(3))
		for i := range fields {
			fields[i] = [2][]byte{text(), text()}
			if !utf8.Valid(fields[i][0]) || !utf8.Valid(fields[i][1]) {
				invalid++
			}
		}
		in.Write(binary.BigEndian.AppendUint64(nil, id))
		in.Write(binary.BigEndian.AppendUint32(nil, uint32(len(fields))))
		for _, f := range fields {
			for _, s := range f {
				in.Write(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
				in.Write(s)
			}
		}
		want.Write(appendJSON(nil, id, fields))
	}
	if invalid < 10_000 {
		t.Fatalf("only %d fields of invalid UTF-8: the test does not exercise the case", invalid)
	}
	cmd := exec.CommandContext(ctx, py, "-c", jsonPy)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("reader.py: %v\n%s", err, stderr.Bytes())
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("reader.py's JSON differs from mq.AppendJSON: %s", firstDiff(got, want.Bytes()))
	}
}

// appendJSON appends mq.AppendJSON's line of the record with id and fields
// (the one place this package builds an mq.Record).
func appendJSON(dst []byte, id uint64, fields [][2][]byte) []byte {
	r := mq.Record{ID: brand.ID(id).XID()}
	for _, f := range fields {
		r.Fields = append(r.Fields, mq.Field{Name: string(f[0]), Value: string(f[1])})
	}
	return append(mq.AppendJSON(dst, r), '\n')
}
