package formatcheck

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	nm "github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// volumePy prints what reader.py reads of a volume (its path in the remote
// folder and the reader's stream arguments on the command line): the
// owner, the page versions of the retained pages, then the JSON lines.
const volumePy = `
import sys
sys.path.insert(0, ".")
import reader
rdir, args = sys.argv[1], sys.argv[2:]
k = bytes.fromhex(args[1])
volume = reader.key_volume(k)
vol = reader.Volume(reader.FileRemote(rdir), volume)
vol.fold()
print("volume %s" % volume)
print("owner %r" % (reader.decode_owner(vol.meta[b"archive.owner"]),))
print("archive.w %d bytes" % len(vol.meta[b"archive.w"]))
low, seq, w = reader.archive_range(vol)
print("pages %s" % " ".join(str(vol.page(reader.ARCHIVE_BASE + n)[4]) for n in range(low, seq)))
sys.stdout.flush()
for line in reader.read_archive(reader.FileRemote(rdir), volume, False, ("key", k)):
    sys.stdout.buffer.write(line)
`

// TestReaderKeyStreamVolume: reader.py, written from docs/FORMAT.md alone,
// reads an archive volume the real archive code wrote (an archive.Archiver
// cycle of a stream at an application's Redis key, pushed to a file://
// remote): the volume name derived from the key, the owner in its
// "{key}"+K form, and records of every shape FORMAT.md allows: the pair
// form of append input (repeated names, bytes that are not UTF-8, empty
// values; mq.ParseInputLine and Client.AppendBytes), entries XADDed by
// another Redis client with their own ids, and a 3 MiB entry of random
// bytes that spans four pages (a version-3 head and three version-4
// continuations). The expected lines are rendered by mq.AppendJSONAs from
// the records as written, not from anything the archive decodes; the
// reader's must equal them byte for byte, and reading the volume as
// another key's is refused.
func TestReaderKeyStreamVolume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	py := pythonWithZstd(ctx, t)
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	dir := t.TempDir()
	rdir := filepath.Join(dir, "remote")
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		t.Fatal(err)
	}
	rs, err := file.Open(rdir)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := graft.Open(ctx, filepath.Join(dir, "graft"), graft.Options{Remote: rs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	live, err := mq.Connect(ctx, mq.Options{URL: r.URL, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })
	arc, err := archive.New(archive.Options{Store: gs, Live: live, Logger: quiet,
		TrimAfter: archive.TrimAfterRemote, Pusher: graft.Replication{}})
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rc.Close() })

	// A key with a hashtag, a colon and a byte that is not UTF-8: its
	// volume is archive-key.E with each of them escaped.
	const key = "app:{shop}\xffevents"
	kn, err := nm.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ref := nm.KeyRef(kn)

	var written []mq.Record
	pairs := []string{
		`{"fields":[["a","1"],["a","2"],["a",""]]}`,
		`{"fields":[[{"b64":"/w=="},{"b64":"gICA"}],["k",{"b64":"AP8A"}],["k","é\u2028<>"]]}`,
		`{"fields":[["",""]]}`,
		`{"fields":{"plain":"object form","émoji":"🙂"}}`,
	}
	var batch [][]mq.Field
	for _, line := range pairs {
		f, err := mq.ParseInputLine([]byte(line))
		if err != nil {
			t.Fatalf("ParseInputLine(%s): %v", line, err)
		}
		batch = append(batch, f)
	}
	ids, err := live.AppendBytes(ctx, ref, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		written = append(written, mq.Record{ID: id.XID(), Fields: batch[i]})
	}
	// Entries of another Redis client, with ids of its own above the
	// appended ones: a repeated name, raw bytes, and one of 3 MiB.
	top := written[len(written)-1].ID
	rng := rand.New(rand.NewPCG(3, 3))
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	foreign := []mq.Record{
		{ID: xid.ID{Ms: top.Ms + 1, Seq: 0}, Fields: []mq.Field{{Name: "x", Value: "\x00\r\n"}, {Name: "x", Value: "\xc0\xaf"}}},
		{ID: xid.ID{Ms: top.Ms + 1, Seq: 1}, Fields: []mq.Field{{Name: "big", Value: string(big)}, {Name: "big", Value: "after"}}},
		{ID: xid.ID{Ms: top.Ms + 2, Seq: 7}, Fields: []mq.Field{{Name: "tail", Value: "t"}}},
		{ID: xid.ID{Ms: top.Ms + 3, Seq: 0}, Fields: []mq.Field{{Name: "live", Value: "stays in Redis"}}},
	}
	for _, rec := range foreign {
		var values []any
		for _, f := range rec.Fields {
			values = append(values, f.Name, f.Value)
		}
		if err := rc.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: rec.ID.String(), Values: values}).Err(); err != nil {
			t.Fatalf("XADD %s: %v", rec.ID, err)
		}
	}
	written = append(written, foreign...)

	res, err := arc.Cycle(ctx, ref, archive.Window{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folded != int64(len(written)-1) || len(res.TooLarge) != 0 {
		t.Fatalf("cycle: %+v, want %d folded", res, len(written)-1)
	}

	var want bytes.Buffer
	want.WriteString("volume archive-key.app_3a_7bshop_7d_ffevents\n")
	want.WriteString("owner ('key', b'app:{shop}\\xffevents')\n")
	want.WriteString("archive.w 8 bytes\n") // W has a branded id: its 8-byte form
	want.WriteString("pages 2 2 1 1 2 3 4 4 4 1\n")
	for _, rec := range written[:len(written)-1] {
		want.Write(append(mq.AppendJSONAs(nil, rec, mq.IDRedis), '\n'))
	}
	hexKey := func(k string) string { return bytesHex([]byte(k)) }
	cmd := exec.CommandContext(ctx, py, "-c", volumePy, rdir, "--key", hexKey(key))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("reader.py: %v\n%s", err, stderr.Bytes())
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("reader.py differs from the records written: %s", firstDiff(got, want.Bytes()))
	}
	// The reader's command line: the same lines, newest first too.
	lines := bytes.SplitAfter(want.Bytes(), []byte("\n"))[4:]
	lines = lines[:len(lines)-1]
	if got := runReader(ctx, t, py, rdir, "--key", "hex:"+hexKey(key)); !bytes.Equal(got, bytes.Join(lines, nil)) {
		t.Fatalf("reader.py --key: %s", firstDiff(got, bytes.Join(lines, nil)))
	}
	slices.Reverse(lines)
	if got := runReader(ctx, t, py, rdir, "--key", "hex:"+hexKey(key), "--reverse"); !bytes.Equal(got, bytes.Join(lines, nil)) {
		t.Fatalf("reader.py --key --reverse: %s", firstDiff(got, bytes.Join(lines, nil)))
	}
	// The volume read on behalf of another stream is refused: its owner is
	// this key's.
	other := exec.CommandContext(ctx, py, "-c", `
import sys
sys.path.insert(0, ".")
import reader
try:
    list(reader.read_archive(reader.FileRemote(sys.argv[1]), sys.argv[2], False, ("key", b"other")))
except reader.Corrupt as e:
    print("refused: %s" % e)
`, rdir, "archive-key.app_3a_7bshop_7d_ffevents")
	out, err := other.CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("refused: the volume belongs to ('key', b'app:{shop}\\xffevents')")) {
		t.Fatalf("reading the volume as another key's: %v: %s", err, out)
	}
}

func bytesHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
