package accept

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/echostore/echostore/durable"
)

func sampleRecs(n int) []rec {
	var out []rec
	for i := 1; i <= n; i++ {
		if i%4 == 0 {
			out = append(out, rec{kind: kindCommitted, id: brandID(i - 2)})
			continue
		}
		in := intent(uint64(i))
		out = append(out, rec{kind: kindAccepted, id: in.ID, queue: in.Queue, payload: in.Payload})
	}
	return out
}

func TestBlockRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 7} {
		recs := sampleRecs(n)
		b := appendBlock(nil, 42, recs)
		seq, got, size, err := decodeBlock(append(b, 0xFF, 0xFF))
		if err != nil || seq != 42 || size != len(b) || len(got) != n {
			t.Fatalf("decode: seq %d size %d/%d %d recs, %v", seq, size, len(b), len(got), err)
		}
		if again := appendBlock(nil, seq, got); !bytes.Equal(again, b) {
			t.Fatal("re-encoding differs")
		}
	}
}

func TestDecodersTotal(t *testing.T) {
	blk := appendBlock(nil, 9, sampleRecs(5))
	snap := encodeSnapshot(3, []Intent{intent(1), intent(2), intent(10)})
	for _, c := range []struct {
		name   string
		data   []byte
		decode func([]byte) error
	}{
		{"block", blk, func(b []byte) error { _, _, _, err := decodeBlock(b); return err }},
		{"snapshot", snap, func(b []byte) error { _, _, err := decodeSnapshot(b); return err }},
		{"segment header", appendSegHeader(nil, 7), func(b []byte) error { _, _, err := decodeSegHeader(b); return err }},
	} {
		if err := c.decode(c.data); err != nil {
			t.Fatalf("%s: intact bytes fail: %v", c.name, err)
		}
		for cut := 0; cut < len(c.data); cut++ {
			if err := c.decode(c.data[:cut]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s cut at %d: %v, want ErrCorrupt", c.name, cut, err)
			}
		}
		for i := range c.data {
			bad := bytes.Clone(c.data)
			bad[i] ^= 0x01
			if err := c.decode(bad); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("%s with bit 0 of byte %d flipped: %v, want ErrCorrupt", c.name, i, err)
			}
		}
	}
}

// TestTornTail cuts the log at every byte offset, and flips a byte at
// every offset of its last block: recovery keeps exactly the blocks that
// lie wholly before the damage, truncates the file to them, and appends
// after them. A flip in an earlier block, with intact blocks after it, is
// ErrCorrupt: dropping them would lose durable records.
//
//echostore:fault
func TestTornTail(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	o := open(t, src, Options{K: 100})
	var boundaries []int // file size after each block
	var want [][]uint64  // live ids after each block
	next := uint64(1)
	for blk := 0; blk < 4; blk++ {
		for i := 0; i < 3; i++ {
			if err := o.Record(ctx, intent(next)); err != nil {
				t.Fatal(err)
			}
			next++
		}
		if blk == 2 {
			if _, err := o.MarkCommitted(ctx, brandID(int(next)-2)); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(src, segName(1)))
		if err != nil {
			t.Fatal(err)
		}
		boundaries = append(boundaries, int(fi.Size()))
		want = append(want, ids(pending(t, o)))
	}
	closeOK(t, o)
	log, err := os.ReadFile(filepath.Join(src, segName(1)))
	if err != nil {
		t.Fatal(err)
	}
	// expect returns the live ids and size kept when the damage starts at off.
	expect := func(off int) ([]uint64, int) {
		var ids []uint64
		size := segHeaderLen
		for i, end := range boundaries {
			if end > off {
				break
			}
			ids, size = want[i], end
		}
		return ids, size
	}
	check := func(name string, data []byte, off int) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := Open(ctx, dir, Options{K: 100})
		if name == "flip" && off < boundaries[len(boundaries)-2] {
			// Damage before the last block, with intact blocks after it, is
			// not a torn tail: dropping those would lose durable records.
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d, before the last block: Open = %v, want ErrCorrupt", off, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s at %d: Open: %v", name, off, err)
		}
		wantIDs, wantSize := expect(off)
		if got := ids(pending(t, o)); fmt.Sprint(got) != fmt.Sprint(wantIDs) && !(len(got) == 0 && len(wantIDs) == 0) {
			t.Fatalf("%s at %d: recovered %v, want %v", name, off, got, wantIDs)
		}
		// The next record lands right after the intact prefix.
		if err := o.Record(ctx, intent(1000)); err != nil {
			t.Fatal(err)
		}
		closeOK(t, o)
		after, _ := os.ReadFile(filepath.Join(dir, segName(1)))
		if !bytes.Equal(after[:wantSize], log[:wantSize]) {
			t.Fatalf("%s at %d: the intact prefix changed", name, off)
		}
		if _, recs, n, err := decodeBlock(after[wantSize:]); err != nil || wantSize+n != len(after) || len(recs) != 1 || recs[0].id != 1000 {
			t.Fatalf("%s at %d: the file does not end with the new block after the prefix: %v", name, off, err)
		}
	}
	for off := segHeaderLen; off < len(log); off++ {
		check("cut", log[:off], off)
		bad := bytes.Clone(log)
		bad[off] ^= 0x80
		check("flip", bad, off)
	}
	// A segment no longer than its header is a torn creation: rewritten.
	for off := 0; off < segHeaderLen; off++ {
		check("cut header", log[:off], segHeaderLen)
	}
	// A damaged header with blocks after it is not a torn write.
	bad := bytes.Clone(log)
	bad[3] ^= 1
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, segName(1)), bad, 0o644)
	if _, err := Open(ctx, dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged segment header = %v, want ErrCorrupt", err)
	}
}

func FuzzDecodeBlock(f *testing.F) {
	f.Add(appendBlock(nil, 1, sampleRecs(3)))
	f.Add(appendBlock(nil, 7, nil))
	f.Add(appendBlock(nil, 1, goldenBlocksV2()[0])) // kind 3
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// As given, and framed with a valid length and checksum so that the
		// fuzzer reaches the body's structure.
		framed := binary.LittleEndian.AppendUint32(nil, uint32(len(data)))
		framed = binary.LittleEndian.AppendUint32(framed, crc32.Update(crc32.Checksum(framed, durable.Castagnoli), durable.Castagnoli, data))
		for _, in := range [][]byte{data, append(framed, data...)} {
			seq, recs, n, err := decodeBlock(in)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not ErrCorrupt: %v", err)
				}
				continue
			}
			if again := appendBlock(nil, seq, recs); !bytes.Equal(again, in[:n]) {
				t.Fatalf("decoded block does not re-encode to its bytes")
			}
		}
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(3, []Intent{intent(1), intent(2), intent(10)}))
	f.Add(encodeSnapshot(1, nil))
	f.Add(encodeSnapshot(2, goldenIntentsV2()))                        // kind 3
	f.Add(encodeSnapshotVersion(1, 3, []Intent{intent(1), intent(2)})) // version 1
	f.Add([]byte("ECHOACSN"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// As given, and with a valid checksum appended so that the fuzzer
		// reaches the structure.
		sealed := binary.LittleEndian.AppendUint32(bytes.Clone(data), crc32.Checksum(data, durable.Castagnoli))
		for _, in := range [][]byte{data, sealed} {
			seq, intents, err := decodeSnapshot(in)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
					t.Fatalf("error not ErrCorrupt: %v", err)
				}
				continue
			}
			// A decoded snapshot is of a version the reader reads: re-encoded
			// in that version, it gives the same bytes.
			ver := binary.LittleEndian.Uint16(in[8:10])
			if again := encodeSnapshotVersion(ver, seq, intents); !bytes.Equal(again, in) {
				t.Fatalf("decoded snapshot does not re-encode to its bytes")
			}
		}
	})
}

// TestWriteFuzzCorpus regenerates the checked-in seed corpora of the fuzz
// targets when ACCEPT_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("ACCEPT_WRITE_CORPUS") != "1" {
		t.Skip("set ACCEPT_WRITE_CORPUS=1 to rewrite testdata/fuzz")
	}
	write := func(target, name string, data []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	blk := appendBlock(nil, 5, sampleRecs(6))
	write("FuzzDecodeBlock", "block-6-records", blk)
	write("FuzzDecodeBlock", "block-empty", appendBlock(nil, 1, nil))
	write("FuzzDecodeBlock", "block-torn", blk[:len(blk)-3])
	write("FuzzDecodeBlock", "block-two", appendBlock(appendBlock(nil, 1, sampleRecs(1)), 2, sampleRecs(2)))
	snap := encodeSnapshot(9, []Intent{intent(1), intent(5), intent(6), intent(90)})
	write("FuzzDecodeSnapshot", "snapshot-4-intents", snap)
	write("FuzzDecodeSnapshot", "snapshot-empty", encodeSnapshot(1, nil))
	write("FuzzDecodeSnapshot", "snapshot-torn", snap[:len(snap)-1])
}

// FuzzRecoverSegment opens a directory whose only log segment holds the
// fuzzed bytes: Open either recovers or fails with ErrCorrupt/ErrVersion,
// and a recovered outbox takes and keeps a new record.
func FuzzRecoverSegment(f *testing.F) {
	seg := appendSegHeader(nil, 1)
	seg = appendBlock(seg, 1, sampleRecs(3))
	seg = appendBlock(seg, 2, sampleRecs(5))
	f.Add(seg)
	f.Add(seg[:len(seg)-5])
	f.Add(appendSegHeader(nil, 1))
	f.Add(goldenSegment(1, goldenBlocks()))   // version 1: the next block starts a new segment
	f.Add(goldenSegment(2, goldenBlocksV2())) // kind 3
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := Open(ctx, dir, Options{K: 10})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		n := o.Len()
		rerr := o.Record(ctx, Intent{ID: 1 << 60, Queue: qn("q")})
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
		o, err = Open(ctx, dir, Options{K: 10})
		if err != nil {
			t.Fatalf("reopen after a recovery: %v", err)
		}
		defer o.Close(ctx)
		if o.Len() != n+1 {
			t.Fatalf("reopen: %d intents, want %d", o.Len(), n+1)
		}
	})
}
