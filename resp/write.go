package resp

import "strconv"

// The writers below append one reply in the connection's protocol, 2 or 3
// (HELLO): RESP2 has no map, null or push type of its own.

func appendSimple(b []byte, s string) []byte {
	b = append(b, '+')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendError appends an error reply; msg starts with its code (ERR,
// NOAUTH, NOPERM, WRONGPASS, …). CR and LF in msg become spaces.
func appendError(b []byte, msg string) []byte {
	b = append(b, '-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

func appendInt(b []byte, n int64) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

func appendHeader(b []byte, kind byte, n int) []byte {
	switch {
	case n >= 0 && n < 10:
		return append(b, kind, byte('0'+n), '\r', '\n')
	case n >= 10 && n < 100:
		return append(b, kind, byte('0'+n/10), byte('0'+n%10), '\r', '\n')
	}
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendArray(b []byte, n int) []byte { return appendHeader(b, '*', n) }

// appendMap appends a map header of n pairs: a map in RESP3, an array of
// 2n elements in RESP2.
func appendMap(b []byte, proto, n int) []byte {
	if proto >= 3 {
		return appendHeader(b, '%', n)
	}
	return appendHeader(b, '*', 2*n)
}

func appendBulk(b []byte, s []byte) []byte {
	b = appendHeader(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendBulkString(b []byte, s string) []byte {
	b = appendHeader(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendNull appends the null bulk string (RESP2 $-1, RESP3 _).
func appendNull(b []byte, proto int) []byte {
	if proto >= 3 {
		return append(b, '_', '\r', '\n')
	}
	return append(b, '$', '-', '1', '\r', '\n')
}

// appendNullArray appends the null array (RESP2 *-1, RESP3 _).
func appendNullArray(b []byte, proto int) []byte {
	if proto >= 3 {
		return append(b, '_', '\r', '\n')
	}
	return append(b, '*', '-', '1', '\r', '\n')
}
