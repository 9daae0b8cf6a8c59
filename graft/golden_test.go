package graft

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/echostore/echostore/graft/remote"
	goldenfile "github.com/echostore/echostore/internal/golden"
)

// Golden files of graft's Pebble keys and values (docs/GRAFT.md, "On-disk
// format"; docs/FORMAT.md, "Upgrades"). `go test ./graft -run Golden
// -update` rewrites the files of the current versions from the encoders;
// a file of an older version is written once, from the hand-built bytes of
// the test, and never rewritten (internal/golden).

// golden returns the checked-in bytes of name (golden.Bytes).
func golden(t *testing.T, name string, current bool, enc []byte) []byte {
	t.Helper()
	return goldenfile.Bytes(t, name, current, enc)
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func crcBE(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// TestGoldenStoreRecordV1: the store record, 17 bytes.
func TestGoldenStoreRecordV1(t *testing.T) {
	b := golden(t, "store-record.v1.bin", true, encodeStoreRecord(storeRecord{NextID: 3}))
	want := crcBE(append([]byte{1, 'G', 'R', 'F', 'T'}, be64(3)...))
	if !bytes.Equal(b, want) || len(b) != 17 {
		t.Fatalf("store record %x, the spec gives %x", b, want)
	}
	r, err := decodeStoreRecord(b)
	if err != nil || r.NextID != 3 {
		t.Fatalf("decode: %+v, %v", r, err)
	}
}

var goldenHash = [32]byte{0xAA, 1, 2, 3, 31: 0xBB}

// TestGoldenVolumeRecord: version 3 (written today), version 2 (stores
// written before remote identities) and version 1 (before replication),
// which the current reader still reads with the newer fields zero.
func TestGoldenVolumeRecord(t *testing.T) {
	v3 := volumeRecord{ID: 2, Head: 9, Horizon: 4, KeepFrom: Unpinned, Pages: 5, Bytes: 4100,
		Created: 1764460800123456789, RemoteLSN: 3, RemoteHash: goldenHash, SyncLocal: 8,
		RemoteID: RemoteID{0x5E, 1, 2, 15: 0xED}}
	b3 := golden(t, "volume-record.v3.bin", true, encodeVolumeRecord(v3))
	if len(b3) != 125 || b3[0] != 3 {
		t.Fatalf("version 3: %d bytes, version %d; the spec gives 125 bytes, version 3", len(b3), b3[0])
	}
	got, err := decodeVolumeRecord(b3)
	if err != nil || got != v3 {
		t.Fatalf("version 3 decodes to %+v, %v; want %+v", got, err, v3)
	}

	// Version 2, built by hand from the spec: 109 bytes, CRC at 105.
	v2 := []byte{2}
	for _, f := range []uint64{2, 9, 4, Unpinned, 5, 4100, 1764460800123456789, 3} {
		v2 = append(v2, be64(f)...)
	}
	v2 = append(v2, goldenHash[:]...)
	v2 = crcBE(append(v2, be64(8)...))
	b2 := golden(t, "volume-record.v2.bin", false, v2)
	if len(b2) != 109 || !bytes.Equal(b2, v2) {
		t.Fatalf("version 2: %x, the spec gives %x", b2, v2)
	}
	got, err = decodeVolumeRecord(b2)
	want2 := v3
	want2.RemoteID = RemoteID{}
	if err != nil || got != want2 {
		t.Fatalf("version 2 decodes to %+v, %v; want %+v", got, err, want2)
	}

	// Version 1, built by hand from the spec: 61 bytes, CRC at 57.
	v1 := []byte{1}
	for _, f := range []uint64{2, 9, 4, Unpinned, 5, 4100, 1764460800123456789} {
		v1 = append(v1, be64(f)...)
	}
	v1 = crcBE(v1)
	b1 := golden(t, "volume-record.v1.bin", false, v1)
	if len(b1) != 61 {
		t.Fatalf("version 1: %d bytes, want 61", len(b1))
	}
	got, err = decodeVolumeRecord(b1)
	want := volumeRecord{ID: 2, Head: 9, Horizon: 4, KeepFrom: Unpinned, Pages: 5, Bytes: 4100, Created: 1764460800123456789}
	if err != nil || got != want {
		t.Fatalf("the current reader reads version 1 as %+v, %v; want %+v", got, err, want)
	}
	// Re-encoding an older record upgrades it to version 3 with the new
	// fields zero, the same numbers otherwise.
	up := encodeVolumeRecord(got)
	if up[0] != 3 || len(up) != 125 || !bytes.Equal(up[1:57], b1[1:57]) || !bytes.Equal(up[57:121], make([]byte, 64)) {
		t.Fatalf("upgraded record %x", up)
	}
	// A version this reader does not know is refused, never guessed.
	v4 := crcBE(append([]byte{4}, b3[1:121]...))
	if _, err := decodeVolumeRecord(v4); err == nil {
		t.Fatal("version 4 decoded")
	}
}

// TestGoldenCommitRecordV1: a commit with business and archive pages and
// metadata (the empty key included).
func TestGoldenCommitRecordV1(t *testing.T) {
	c := Commit{LSN: 7, Time: time.Unix(0, 1764460800000000001),
		Pages: []uint64{0, 5, 300, ArchiveBase, ArchiveBase + 1},
		Meta:  []MetaEntry{{Key: "", Value: []byte{}}, {Key: "archive.seq", Value: be64(2)}, {Key: "archive.w", Value: be64(0x1234)}}}
	b := golden(t, "commit-record.v1.bin", true, encodeCommitRecord(c))
	// Hand-built: version, time, 5 pages (0, +5, +295, +2^49-300, +1), 3 entries.
	want := append([]byte{1}, be64(1764460800000000001)...)
	want = append(want, 5, 0, 5)
	want = binary.AppendUvarint(want, 295)
	want = binary.AppendUvarint(want, ArchiveBase-300)
	want = append(want, 1, 3, 0, 0)
	want = append(want, 11)
	want = append(want, "archive.seq"...)
	want = append(append(want, 8), be64(2)...)
	want = append(want, 9)
	want = append(want, "archive.w"...)
	want = append(append(want, 8), be64(0x1234)...)
	want = crcBE(want)
	if !bytes.Equal(b, want) {
		t.Fatalf("commit record %x, the spec gives %x", b, want)
	}
	got, err := decodeCommitRecord(7, b)
	if err != nil || got.LSN != 7 || !got.Time.Equal(c.Time) || !reflect.DeepEqual(got.Pages, c.Pages) || !reflect.DeepEqual(got.Meta, c.Meta) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

// TestGoldenPageAndMetaValues: page value version 1 (bytes), version 2 (a
// remote reference), and the metadata value.
func TestGoldenPageAndMetaValues(t *testing.T) {
	page := golden(t, "page-value.v1.bin", true, append([]byte{recordV1}, "hello page"...))
	data, n, _, ref, err := pageValue(page)
	if err != nil || ref || string(data) != "hello page" || n != 10 || page[0] != 1 {
		t.Fatalf("page value v1: %q %d %v %v", data, n, ref, err)
	}
	empty := golden(t, "page-value-empty.v1.bin", true, append([]byte{recordV1}, []byte{}...))
	if data, n, _, ref, err := pageValue(empty); err != nil || ref || len(data) != 0 || n != 0 || !bytes.Equal(empty, []byte{1}) {
		t.Fatalf("empty page value: %q %d %v %v", data, n, ref, err)
	}
	rb := golden(t, "page-value-ref.v2.bin", true, encodeRemoteRef(4096, 300))
	if want := []byte{2, 0x80, 0x20, 0xAC, 0x02}; !bytes.Equal(rb, want) {
		t.Fatalf("remote reference %x, the spec gives %x", rb, want)
	}
	if _, n, seq, ref, err := pageValue(rb); err != nil || !ref || n != 4096 || seq != 300 {
		t.Fatalf("remote reference: %d %d %v %v", n, seq, ref, err)
	}
	meta := golden(t, "meta-value.v1.bin", true, append([]byte{recordV1}, be64(42)...))
	if v, err := versionedPayload("metadata", meta); err != nil || !bytes.Equal(v, be64(42)) {
		t.Fatalf("metadata value: %x, %v", v, err)
	}
}

// TestGoldenFrameRecordV1: the record of an unfetched remote frame.
func TestGoldenFrameRecordV1(t *testing.T) {
	seg := "segments/archive.q.s/00112233445566778899aabbccddeeff"
	f := frameRecord{Segment: seg, Ref: remote.FrameRef{Offset: 8, Length: 1000, RawLength: 8192, CRC: 0xDEADBEEF,
		Pages: []remote.PageLoc{{Index: 10, Offset: 0, Length: 4096}, {Index: 12, Offset: 4096, Length: 4096}}}}
	b := golden(t, "frame-record.v1.bin", true, encodeFrameRecord(f))
	want := []byte{1, byte(len(seg))}
	want = append(want, seg...)
	want = append(want, 8, 0xE8, 0x07, 0x80, 0x40, 0xDE, 0xAD, 0xBE, 0xEF, 2, 10, 0, 0x80, 0x20, 2, 0x80, 0x20, 0x80, 0x20)
	want = crcBE(want)
	if !bytes.Equal(b, want) {
		t.Fatalf("frame record %x, the spec gives %x", b, want)
	}
	got, err := decodeFrameRecord(b)
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

// TestGoldenKeysV1: every key kind, as hex lines. The key layout has no
// version byte of its own: any change to it is a new store format.
func TestGoldenKeysV1(t *testing.T) {
	var pk [pageKeyLen]byte
	keys := []struct {
		name string
		key  []byte
		want string // hand-written hex
	}{
		{"store", storeKey, "00"},
		{"volume archive.q.s", volumeKey("archive.q.s"), "01" + hex.EncodeToString([]byte("archive.q.s"))},
		{"page vid=2 i=5 lsn=7", appendPageKey(nil, 2, 5, 7), "02" + "0000000000000002" + "0000000000000005" + "fffffffffffffff8"},
		{"page vid=2 i=2^49+1 lsn=1 (fixed buffer)", putPageKey(&pk, 2, ArchiveBase+1, 1), "02" + "0000000000000002" + "0002000000000001" + "fffffffffffffffe"},
		{"commit vid=2 lsn=7", appendCommitKey(nil, 2, 7), "03" + "0000000000000002" + "0000000000000007"},
		{"meta vid=2 archive.w lsn=7", appendMetaKey(nil, 2, "archive.w", 7), "04" + "0000000000000002" + "09" + hex.EncodeToString([]byte("archive.w")) + "fffffffffffffff8"},
		{"meta vid=2 empty key lsn=1", appendMetaKey(nil, 2, "", 1), "04" + "0000000000000002" + "00" + "fffffffffffffffe"},
		{"frame vid=2 lsn=7 frame=3", appendFrameKey(nil, 2, 7, 3), "05" + "0000000000000002" + "0000000000000007" + "00000003"},
		{"pending vid=2", pendingKey(2), "06" + "0000000000000002"},
	}
	var enc strings.Builder
	enc.WriteString("# graft Pebble keys, layout 1 (docs/GRAFT.md, \"Keys\"): name<TAB>hex\n")
	for _, k := range keys {
		fmt.Fprintf(&enc, "%s\t%x\n", k.name, k.key)
	}
	file := golden(t, "keys.v1.txt", true, []byte(enc.String()))
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")[1:]
	if len(lines) != len(keys) {
		t.Fatalf("%d keys in the file, want %d", len(lines), len(keys))
	}
	for i, line := range lines {
		name, hx, _ := strings.Cut(line, "\t")
		if name != keys[i].name || hx != keys[i].want {
			t.Fatalf("key %q = %s, the spec gives %s", name, hx, keys[i].want)
		}
	}
	raw := func(i int) []byte { b, _ := hex.DecodeString(strings.Split(lines[i], "\t")[1]); return b }
	if i, lsn, ok := decodePageKey(raw(2), 2); !ok || i != 5 || lsn != 7 {
		t.Fatalf("page key: %d %d %v", i, lsn, ok)
	}
	if i, lsn, ok := decodePageKey(raw(3), 2); !ok || i != ArchiveBase+1 || lsn != 1 {
		t.Fatalf("archive page key: %d %d %v", i, lsn, ok)
	}
	if lsn, ok := decodeCommitKey(raw(4), 2); !ok || lsn != 7 {
		t.Fatalf("commit key: %d %v", lsn, ok)
	}
	if lsn, seq, ok := decodeFrameKey(raw(7), 2); !ok || lsn != 7 || seq != 3 {
		t.Fatalf("frame key: %d %d %v", lsn, seq, ok)
	}
	// Newer versions sort first: the key of LSN 8 sorts before LSN 7's.
	if bytes.Compare(appendPageKey(nil, 2, 5, 8), raw(2)) >= 0 {
		t.Fatal("page versions do not sort newest first")
	}
}

// The data dir golden is a whole Pebble directory written by this version
// of graft (Pebble format FormatValueSeparation): two volumes, one of them
// with its volume record rewritten in version 1, as a store written before
// replication has it. It is written once and never regenerated (Pebble's
// bytes are not deterministic); every later binary must open it and read the
// same pages, metadata and commits.
const goldenDataDir = "datadir.v1"

func makeGoldenDataDir(t *testing.T, dir string) {
	ctx := t.Context()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"archive.q.s", "old.v1"} {
		v, err := s.CreateVolume(ctx, volName(name))
		if err != nil {
			t.Fatal(err)
		}
		tx := v.Begin()
		if err := errors.Join(tx.Put(1, []byte("one")), tx.SetMeta("k", []byte("v"))); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(ctx, Synced); err != nil {
			t.Fatal(err)
		}
		tx = v.Begin()
		if err := errors.Join(tx.PutArchive(0, []byte("arch")), tx.Put(1, []byte("uno"))); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(ctx, Synced); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(s.Compact(ctx), s.Close()); err != nil {
		t.Fatal(err)
	}
	// Rewrite old.v1's volume record as version 1 (the first 57 bytes).
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: formatMajorVersion})
	if err != nil {
		t.Fatal(err)
	}
	val, closer, err := db.Get(volumeKey("old.v1"))
	if err != nil {
		t.Fatal(err)
	}
	v1 := crcBE(append([]byte{1}, val[1:57]...))
	closer.Close()
	if err := errors.Join(db.Set(volumeKey("old.v1"), v1, pebble.Sync), db.Flush(), db.Close()); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "LOCK"))
}

// TestGoldenDataDirV1 opens a copy of the checked-in data dir, read-only
// and writable, and reads both volumes at both LSNs; then a commit on the
// version-1 volume rewrites its record as version 2.
func TestGoldenDataDirV1(t *testing.T) {
	src := goldenfile.Path(goldenDataDir)
	if _, err := os.Stat(src); os.IsNotExist(err) && goldenfile.Updating() {
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		makeGoldenDataDir(t, src)
	}
	ctx := t.Context()
	for _, readOnly := range []bool{true, false} {
		dir := goldenfile.CopyDir(t, src)
		s, err := Open(ctx, dir, Options{ReadOnly: readOnly})
		if err != nil {
			t.Fatalf("open the golden data dir (read-only %v): %v", readOnly, err)
		}
		infos, err := s.Volumes(ctx)
		if err != nil || len(infos) != 2 || infos[0].Volume.String() != "archive.q.s" || infos[1].Volume.String() != "old.v1" {
			t.Fatalf("volumes: %+v, %v", infos, err)
		}
		for _, name := range []string{"archive.q.s", "old.v1"} {
			v, err := s.Volume(ctx, volName(name))
			if err != nil {
				t.Fatal(err)
			}
			in := v.Info()
			if in.LocalLSN != 2 || in.Pages != 2 || in.Bytes != 7 || in.RemoteLSN != 0 || in.SyncLSN != 0 || in.Horizon != 0 || in.Created.IsZero() {
				t.Fatalf("%s: info %+v", name, in)
			}
			want := map[uint64]map[uint64]string{1: {1: "one"}, 2: {1: "uno", ArchiveBase: "arch"}}
			for lsn, pages := range want {
				snap, err := v.SnapshotAt(ctx, lsn)
				if err != nil {
					t.Fatal(err)
				}
				for _, i := range []uint64{0, 1, ArchiveBase} {
					got, err := snap.Get(ctx, i)
					w, ok := pages[i]
					if ok && (err != nil || string(got) != w) || !ok && !errors.Is(err, ErrNotFound) {
						t.Fatalf("%s@%d page %d = %q, %v; want %q", name, lsn, i, got, err, w)
					}
				}
				if m, err := snap.Meta(ctx, "k"); err != nil || string(m) != "v" {
					t.Fatalf("%s@%d meta k = %q, %v", name, lsn, m, err)
				}
				snap.Close()
			}
			cs, err := v.Commits(ctx, 1, 2)
			if err != nil || len(cs) != 2 || !reflect.DeepEqual(cs[0].Pages, []uint64{1}) || len(cs[0].Meta) != 1 ||
				!reflect.DeepEqual(cs[1].Pages, []uint64{1, ArchiveBase}) || len(cs[1].Meta) != 0 {
				t.Fatalf("%s commits: %+v, %v", name, cs, err)
			}
		}
		if !readOnly {
			v, _ := s.Volume(ctx, volName("old.v1"))
			tx := v.Begin()
			if err := tx.Put(2, []byte("two")); err != nil {
				t.Fatal(err)
			}
			if lsn, err := tx.Commit(ctx, Synced); err != nil || lsn != 3 {
				t.Fatalf("commit on the version-1 volume: %d, %v", lsn, err)
			}
			val, closer, err := s.db.Get(volumeKey("old.v1"))
			if err != nil || val[0] != 3 || len(val) != 125 {
				t.Fatalf("after a commit the record is %x, %v; want version 3", val, err)
			}
			closer.Close()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGoldenPendingCommitV1: the pending remote commit of a writer (key
// 06·vid): a version byte, then the commit object's bytes, as SetPending
// writes it and Pending reads it back.
func TestGoldenPendingCommitV1(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.CreateVolume(ctx, volName("v"))
	if err != nil {
		t.Fatal(err)
	}
	tx := v.Begin()
	if err := tx.Put(0, []byte("p")); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx, Synced); err != nil {
		t.Fatal(err)
	}
	commit, err := remote.EncodeCommit(&remote.Commit{Volume: "v", LSN: 1, LocalFrom: 0, LocalTo: 1,
		Inline: []remote.Page{{Index: 0, Data: []byte("p")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.SetPending(ctx, commit); err != nil {
		t.Fatal(err)
	}
	val, closer, err := s.db.Get(pendingKey(v.id))
	if err != nil {
		t.Fatal(err)
	}
	stored := bytes.Clone(val)
	closer.Close()
	b := golden(t, "pending-commit.v1.bin", true, stored)
	if b[0] != 1 || !bytes.Equal(b[1:], commit) {
		t.Fatalf("pending value %x, the spec gives 01 · %x", b, commit)
	}
	got, err := v.Pending(ctx)
	if err != nil || !bytes.Equal(got, commit) {
		t.Fatalf("Pending: %x, %v", got, err)
	}
}
