package remote

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Page is one page: its index in the volume and its bytes.
type Page struct {
	Index uint64
	Data  []byte
}

// PageLoc locates one page inside a decompressed frame.
type PageLoc struct {
	Index  uint64
	Offset uint32
	Length uint32
}

// FrameRef locates and verifies one zstd frame of a segment: a page fault is
// one ranged GET of [Offset, Offset+Length), checked against CRC (CRC-32C of
// the compressed bytes) and zstd's own content checksum, decompressing to
// RawLength bytes. Pages lists the pages the reference covers, in ascending
// index; a checkpoint may list only the still-live pages of an older frame.
type FrameRef struct {
	Offset    uint64
	Length    uint64
	RawLength uint64
	CRC       uint32
	Pages     []PageLoc
}

// SegmentRef names a segment object and the frames of it a commit uses.
type SegmentRef struct {
	Key    string
	Frames []FrameRef
}

// codec holds the zstd encoder and decoder; both are safe for concurrent
// use and never change after construction.
type codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

var theCodec = sync.OnceValue(func() codec {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true),
		zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		panic(err) // only on bad options
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxFrameRaw), zstd.WithDecoderMaxWindow(MaxFrameRaw))
	if err != nil {
		panic(err)
	}
	return codec{enc: e, dec: d}
})

// BuiltSegment is an encoded segment object and the frame references into
// it.
type BuiltSegment struct {
	Key   string
	Data  []byte
	Frame []FrameRef
}

// BuildSegment encodes pages (ascending, unique, each at most MaxPageSize)
// as a segment object of volume. Its id is derived from salt and the
// object's bytes, so the same input always builds the same object under the
// same key.
func BuildSegment(volume, salt string, pages []Page) (BuiltSegment, error) {
	if len(pages) == 0 {
		return BuiltSegment{}, invalid("segment with no pages")
	}
	if err := checkPages(pages); err != nil {
		return BuiltSegment{}, err
	}
	c := theCodec()
	e := enc{b: make([]byte, 0, 8)}
	e.raw(segmentMagic[:])
	e.u16(FormatVersion)
	e.u16(0)
	var frames []FrameRef
	raw := make([]byte, 0, FrameBytes)
	for i := 0; i < len(pages); {
		raw = raw[:0]
		var locs []PageLoc
		for ; i < len(pages); i++ {
			p := pages[i]
			if len(locs) > 0 && (len(locs) == FramePages || len(raw)+len(p.Data) > FrameBytes) {
				break
			}
			locs = append(locs, PageLoc{Index: p.Index, Offset: uint32(len(raw)), Length: uint32(len(p.Data))})
			raw = append(raw, p.Data...)
		}
		off := len(e.b)
		e.b = c.enc.EncodeAll(raw, e.b)
		z := e.b[off:]
		frames = append(frames, FrameRef{Offset: uint64(off), Length: uint64(len(z)),
			RawLength: uint64(len(raw)), CRC: crc(z), Pages: locs})
	}
	footer := len(e.b)
	e.uvarint(uint64(len(frames)))
	for _, f := range frames {
		encodeFrame(&e, f)
	}
	e.u32(uint32(len(e.b) - footer))
	e.crc()
	sum := sha256.New()
	sum.Write([]byte(salt))
	sum.Write([]byte{0})
	sum.Write(e.b)
	id := hex.EncodeToString(sum.Sum(nil)[:16])
	return BuiltSegment{Key: SegmentKey(volume, id), Data: e.b, Frame: frames}, nil
}

func checkPages(pages []Page) error {
	for i, p := range pages {
		if len(p.Data) > MaxPageSize {
			return invalid("page %d is %d bytes, at most %d allowed", p.Index, len(p.Data), MaxPageSize)
		}
		if i > 0 && p.Index <= pages[i-1].Index {
			return invalid("pages not in strictly ascending index order at page %d", p.Index)
		}
	}
	return nil
}

func encodeFrame(e *enc, f FrameRef) {
	e.uvarint(f.Offset)
	e.uvarint(f.Length)
	e.uvarint(f.RawLength)
	e.u32(f.CRC)
	e.uvarint(uint64(len(f.Pages)))
	var prev uint64
	for i, p := range f.Pages {
		e.index(i, &prev, p.Index)
		e.uvarint(uint64(p.Offset))
		e.uvarint(uint64(p.Length))
	}
}

// decodeFrame reads one frame reference and checks it is self-consistent:
// at least one page, indexes strictly ascending, every page inside the
// decompressed frame, sizes within the format's bounds.
func decodeFrame(d *dec) FrameRef {
	var f FrameRef
	f.Offset = d.uvarint()
	f.Length = d.uvarint()
	f.RawLength = d.uvarint()
	f.CRC = d.u32()
	n := d.count(3)
	if d.err != nil {
		return f
	}
	switch {
	case f.Length == 0 || f.Length > 2*MaxFrameRaw+1024:
		d.fail("frame length %d", f.Length)
	case f.RawLength > MaxFrameRaw:
		d.fail("frame raw length %d exceeds %d", f.RawLength, MaxFrameRaw)
	case f.Offset > 1<<62:
		d.fail("frame offset %d", f.Offset)
	case n == 0:
		d.fail("frame with no pages")
	}
	if d.err != nil {
		return f
	}
	f.Pages = make([]PageLoc, n)
	var prev uint64
	for i := range f.Pages {
		idx := d.index(i, &prev)
		off, ln := d.uvarint(), d.uvarint()
		if d.err == nil && (off > f.RawLength || ln > f.RawLength-off || ln > MaxPageSize) {
			d.fail("page %d at %d+%d outside frame of %d bytes", idx, off, ln, f.RawLength)
		}
		if d.err != nil {
			return f
		}
		f.Pages[i] = PageLoc{Index: idx, Offset: uint32(off), Length: uint32(ln)}
	}
	return f
}

// DecodeFrame verifies the compressed bytes of one frame against its
// reference (length, CRC-32C, zstd content checksum, decompressed length)
// and returns the pages the reference lists. Any mismatch wraps ErrCorrupt.
func DecodeFrame(ref FrameRef, z []byte) ([]Page, error) {
	const what = "segment frame"
	if uint64(len(z)) != ref.Length {
		return nil, corrupt(what, "%d bytes, reference says %d", len(z), ref.Length)
	}
	if got := crc(z); got != ref.CRC {
		return nil, corrupt(what, "checksum %08x, reference says %08x", got, ref.CRC)
	}
	if ref.RawLength > MaxFrameRaw {
		return nil, corrupt(what, "raw length %d exceeds %d", ref.RawLength, MaxFrameRaw)
	}
	// A zstd frame: magic 28 B5 2F FD, then the frame header descriptor,
	// whose bit 2 says a content checksum follows the last block. We
	// require it, except for an empty frame (pages of zero bytes), which
	// the encoder writes without one.
	if len(z) < 5 || binary.LittleEndian.Uint32(z) != 0xFD2FB528 || (z[4]&0x04 == 0 && ref.RawLength != 0) {
		return nil, corrupt(what, "not a zstd frame with a content checksum")
	}
	raw, err := theCodec().dec.DecodeAll(z, make([]byte, 0, ref.RawLength))
	if err != nil {
		return nil, corrupt(what, "zstd: %v", err)
	}
	if uint64(len(raw)) != ref.RawLength {
		return nil, corrupt(what, "decompressed to %d bytes, reference says %d", len(raw), ref.RawLength)
	}
	pages := make([]Page, len(ref.Pages))
	for i, p := range ref.Pages {
		end := uint64(p.Offset) + uint64(p.Length)
		if end > uint64(len(raw)) || (i > 0 && p.Index <= ref.Pages[i-1].Index) {
			return nil, corrupt(what, "page %d at %d+%d outside frame of %d bytes", p.Index, p.Offset, p.Length, len(raw))
		}
		pages[i] = Page{Index: p.Index, Data: raw[p.Offset:end:end]}
	}
	return pages, nil
}

// DecodeSegment verifies a whole segment object (magic, version, CRC-32C
// trailer, footer, every frame) and returns its frame references and pages.
// Readers of the log never need it (commits carry the frame index); it
// serves checks and tools.
func DecodeSegment(b []byte) ([]FrameRef, []Page, error) {
	const what = "segment"
	body, err := checkTrailer(what, b)
	if err != nil {
		return nil, nil, err
	}
	if len(body) < 12 {
		return nil, nil, corrupt(what, "truncated")
	}
	flen := uint64(binary.LittleEndian.Uint32(body[len(body)-4:]))
	body = body[:len(body)-4]
	if flen > uint64(len(body)-8) {
		return nil, nil, corrupt(what, "footer length %d exceeds object", flen)
	}
	frameEnd := uint64(len(body)) - flen
	h := &dec{what: what, b: body[:8]}
	h.header(segmentMagic, 0)
	if err := h.end(); err != nil {
		return nil, nil, err
	}
	d := &dec{what: what + " footer", b: body[frameEnd:]}
	n := d.count(8)
	frames := make([]FrameRef, 0, n)
	var pages []Page
	next := uint64(8)
	for range n {
		f := decodeFrame(d)
		if d.err != nil {
			break
		}
		if f.Offset != next || f.Length > frameEnd-next {
			d.fail("frame at %d+%d, want it at %d within %d bytes", f.Offset, f.Length, next, frameEnd)
			break
		}
		if len(pages) > 0 && f.Pages[0].Index <= pages[len(pages)-1].Index {
			d.fail("page indexes not ascending across frames")
			break
		}
		ps, err := DecodeFrame(f, b[f.Offset:f.Offset+f.Length])
		if err != nil {
			return nil, nil, err
		}
		next += f.Length
		frames = append(frames, f)
		pages = append(pages, ps...)
	}
	if err := d.end(); err != nil {
		return nil, nil, err
	}
	if n == 0 || next != frameEnd {
		return nil, nil, corrupt(what, "frames cover [8,%d), object has frames up to %d", next, frameEnd)
	}
	return frames, pages, nil
}

func (f FrameRef) String() string {
	return fmt.Sprintf("frame@%d+%d", f.Offset, f.Length)
}
