package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits of a reply read from Redis (ReadReply). Redis's own proto-max-bulk-len
// is 512 MiB; an aggregate nested deeper than MaxDepth is refused.
const (
	// MaxBulk is the largest bulk string (or verbatim string, blob error)
	// ReadReply accepts, in bytes.
	MaxBulk = 512 << 20
	// MaxDepth is the deepest nesting of aggregates ReadReply accepts.
	MaxDepth = 64
	// maxCount bounds an aggregate's element count as a header gives it.
	maxCount = 1 << 31
)

// ErrProtocol is wrapped by every error about bytes that are not a RESP2 or
// RESP3 reply.
var ErrProtocol = errors.New("resp: protocol error")

// ReadReply reads one complete RESP2 or RESP3 reply from r (every type:
// simple string, error, integer, bulk, array, null, boolean, double, big
// number, blob error, verbatim string, map, set, attribute, push) and
// appends its bytes, exactly as they came, to dst. An attribute (|) is read
// with the reply it annotates, as one. Bytes that are not a reply fail
// wrapping ErrProtocol; a short read fails with the reader's error.
func ReadReply(r *bufio.Reader, dst []byte) ([]byte, error) {
	return readReply(r, dst, 0)
}

func readReply(r *bufio.Reader, dst []byte, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("%w: aggregates nested deeper than %d", ErrProtocol, MaxDepth)
	}
	dst, line, err := readLine(r, dst)
	if err != nil {
		return dst, err
	}
	if len(line) == 0 {
		return dst, fmt.Errorf("%w: empty line where a reply starts", ErrProtocol)
	}
	kind, body := line[0], line[1:]
	switch kind {
	case '+', '-', ':', '_', '#', ',', '(':
		if kind == '_' && len(body) != 0 {
			return dst, fmt.Errorf("%w: null with a body", ErrProtocol)
		}
		if kind == ':' {
			if _, err := strconv.ParseInt(string(body), 10, 64); err != nil {
				return dst, fmt.Errorf("%w: integer %q", ErrProtocol, clip(body))
			}
		}
		return dst, nil
	case '$', '!', '=':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil || n < -1 || n > MaxBulk || (n == -1 && kind != '$') {
			return dst, fmt.Errorf("%w: bulk length %q", ErrProtocol, clip(body))
		}
		if n == -1 {
			return dst, nil
		}
		need := int(n) + 2
		off := len(dst)
		dst = grow(dst, need)
		if _, err := ioReadFull(r, dst[off:off+need]); err != nil {
			return dst[:off], err
		}
		if dst[off+need-2] != '\r' || dst[off+need-1] != '\n' {
			return dst, fmt.Errorf("%w: bulk string not ended by CRLF", ErrProtocol)
		}
		return dst, nil
	case '*', '%', '~', '>', '|':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil || n < -1 || n > maxCount || (n == -1 && kind != '*') {
			return dst, fmt.Errorf("%w: aggregate length %q", ErrProtocol, clip(body))
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		for i := int64(0); i < n; i++ {
			if dst, err = readReply(r, dst, depth+1); err != nil {
				return dst, err
			}
		}
		if kind == '|' { // an attribute annotates the reply that follows
			return readReply(r, dst, depth+1)
		}
		return dst, nil
	}
	return dst, fmt.Errorf("%w: unknown reply type %q", ErrProtocol, kind)
}

// readLine appends one CRLF-terminated line to dst and returns dst and the
// line without its CRLF (a slice of dst).
func readLine(r *bufio.Reader, dst []byte) ([]byte, []byte, error) {
	off := len(dst)
	for {
		frag, err := r.ReadSlice('\n')
		dst = append(dst, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return dst[:off], nil, err
		}
		if len(dst)-off > 64<<10 {
			return dst[:off], nil, fmt.Errorf("%w: a line longer than 64 KiB", ErrProtocol)
		}
	}
	line := dst[off:]
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return dst, nil, fmt.Errorf("%w: line not ended by CRLF", ErrProtocol)
	}
	return dst, line[:len(line)-2], nil
}

// grow extends dst by n bytes.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	out := make([]byte, len(dst)+n, 2*cap(dst)+n)
	copy(out, dst)
	return out
}

// ioReadFull is io.ReadFull over a bufio.Reader.
func ioReadFull(r *bufio.Reader, b []byte) (int, error) { return io.ReadFull(r, b) }

// clip shortens b for an error message.
func clip(b []byte) string {
	const n = 32
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// Elements splits a complete reply (as ReadReply returns it) that is an
// aggregate into its kind ('*', '%', '~', '>') and its elements' bytes (a
// map's keys and values in turn). A null array has no elements. An
// attribute before the aggregate is skipped.
func Elements(raw []byte) (kind byte, elems [][]byte, err error) {
	r := bufio.NewReaderSize(&sliceReader{b: raw}, 4096)
	var line []byte
	var scratch []byte
	for {
		scratch, line, err = readLine(r, scratch[:0])
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if len(line) > 0 && line[0] == '|' { // skip the attribute
			n, _ := strconv.Atoi(string(line[1:]))
			for range 2 * n {
				if _, err := ReadReply(r, nil); err != nil {
					return 0, nil, err
				}
			}
			continue
		}
		break
	}
	if len(line) == 0 {
		return 0, nil, fmt.Errorf("%w: empty reply", ErrProtocol)
	}
	kind = line[0]
	switch kind {
	case '*', '%', '~', '>':
	default:
		return kind, nil, nil
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < -1 {
		return 0, nil, fmt.Errorf("%w: aggregate length %q", ErrProtocol, clip(line[1:]))
	}
	if kind == '%' {
		n *= 2
	}
	for range max(n, 0) {
		e, err := ReadReply(r, nil)
		if err != nil {
			return 0, nil, err
		}
		elems = append(elems, e)
	}
	return kind, elems, nil
}

// sliceReader reads a byte slice.
type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, eof
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// eof is io.EOF, named here so that reply.go needs no io import for it.
var eof = io.EOF
