package remote

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/echostore/echostore/durable"
)

// Format constants shared by every object (docs/REMOTE.md specifies them).
const (
	// FormatVersion is the version every object this package writes carries.
	FormatVersion = 1
	// MaxPageSize is the largest page, in bytes.
	MaxPageSize = 1 << 20
	// FramePages and FrameBytes bound a frame written by this package: a
	// new frame starts before a page that would make the frame hold more
	// than FramePages pages or more than FrameBytes raw bytes. A page
	// larger than FrameBytes gets a frame of its own.
	FramePages = 64
	FrameBytes = 256 << 10
	// MaxFrameRaw is the largest decompressed frame a reader accepts.
	MaxFrameRaw = MaxPageSize
	// InlineLimit: a commit whose new pages total at most this many bytes
	// carries them inline in the commit object (one PUT, no segment).
	InlineLimit = 64 << 10
	// SegmentBytes bounds the raw bytes of one segment; a larger commit
	// uploads several.
	SegmentBytes = 64 << 20
	// MaxMetaKey and MaxMetaValue bound commit metadata entries.
	MaxMetaKey   = 255
	MaxMetaValue = 1 << 20
)

// Magics of the three object kinds.
var (
	commitMagic     = [4]byte{'E', 'S', 'R', 'C'}
	segmentMagic    = [4]byte{'E', 'S', 'R', 'S'}
	checkpointMagic = [4]byte{'E', 'S', 'R', 'K'}
	tombstoneMagic  = [4]byte{'E', 'S', 'R', 'T'}
)

func crc(b []byte) uint32 { return crc32.Checksum(b, durable.Castagnoli) }

// Hash is the SHA-256 of a commit object's bytes, all of them. Each commit
// names its predecessor's Hash, chaining the log.
type Hash [32]byte

// HashOf returns the Hash of an encoded commit object.
func HashOf(b []byte) Hash { return sha256.Sum256(b) }

// IsZero reports whether h is the zero hash (the predecessor of LSN 1).
func (h Hash) IsZero() bool { return h == Hash{} }

// String returns h as 64 lower-case hex digits.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Short returns the first 12 hex digits of h, for messages.
func (h Hash) Short() string { return h.String()[:12] }

// ParseHash parses 64 lower-case hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 64 {
		return h, corrupt("hash", "%d hex digits, want 64", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return h, corrupt("hash", "not lower-case hex")
		}
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err
}

// enc appends little-endian fields to a buffer.
type enc struct{ b []byte }

func (e *enc) u16(v uint16)     { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32)     { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64)     { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) raw(p []byte)     { e.b = append(e.b, p...) }
func (e *enc) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.raw(p) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) crc()             { e.u32(crc(e.b)) }

// index appends the i-th of an ascending run of page indexes: the first
// as is, each next as the difference from *prev.
func (e *enc) index(i int, prev *uint64, idx uint64) {
	if i == 0 {
		e.uvarint(idx)
	} else {
		e.uvarint(idx - *prev)
	}
	*prev = idx
}

// dec reads fields with bounds checks; the first failure sticks in err and
// every later read returns zero values.
type dec struct {
	what string
	b    []byte
	off  int
	err  error
}

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corrupt(d.what, "at byte %d: %s", d.off, fmt.Sprintf(format, args...))
	}
}

func (d *dec) left() int { return len(d.b) - d.off }

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > d.left() {
		d.fail("truncated: need %d bytes, %d left", n, d.left())
		return nil
	}
	p := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return p
}

func (d *dec) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *dec) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// index reads the i-th of a strictly ascending run of page indexes
// written by enc.index.
func (d *dec) index(i int, prev *uint64) uint64 {
	v := d.uvarint()
	idx := v
	if i > 0 {
		idx = *prev + v
		if d.err == nil && (v == 0 || idx < *prev) {
			d.fail("page indexes not strictly ascending")
		}
	}
	*prev = idx
	return idx
}

// count reads a uvarint count of items that each take at least minSize
// bytes, rejecting counts the remaining bytes cannot hold.
func (d *dec) count(minSize int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(d.left()/minSize) {
		d.fail("count %d exceeds what %d bytes can hold", v, d.left())
		return 0
	}
	return int(v)
}

// bytes reads a uvarint length (at most maxLen) and that many bytes.
func (d *dec) bytes(maxLen int) []byte {
	n := d.uvarint()
	if d.err == nil && n > uint64(maxLen) {
		d.fail("length %d exceeds %d", n, maxLen)
		return nil
	}
	if n > math.MaxInt32 {
		d.fail("length %d", n)
		return nil
	}
	return d.take(int(n))
}

// header checks magic, version and flags (only the bits in allowed may be
// set) and returns the flags.
func (d *dec) header(magic [4]byte, allowed uint16) uint16 {
	m := d.take(4)
	if d.err == nil && [4]byte(m) != magic {
		d.fail("bad magic %q, want %q", m, magic[:])
	}
	if v := d.u16(); d.err == nil && v != FormatVersion {
		d.fail("version %d, this reader knows %d", v, FormatVersion)
	}
	f := d.u16()
	if d.err == nil && f&^allowed != 0 {
		d.fail("unknown flags %#x", f)
	}
	return f
}

// checkTrailer verifies that the last 4 bytes of b are the CRC-32C of the
// rest and returns the rest.
func checkTrailer(what string, b []byte) ([]byte, error) {
	if len(b) >= 4 && string(b[:4]) == SealedMagic {
		return nil, fmt.Errorf("%s: %w: %w", what, ErrSealed, ErrCorrupt)
	}
	if len(b) < 12 {
		return nil, corrupt(what, "truncated: %d bytes", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc(body); got != sum {
		return nil, corrupt(what, "checksum %08x, stored %08x", got, sum)
	}
	return body, nil
}

// end reports an error if bytes are left over or a read failed.
func (d *dec) end() error {
	if d.err == nil && d.left() != 0 {
		d.fail("%d trailing bytes", d.left())
	}
	return d.err
}
