package resp

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzReadReply: ReadReply never panics, and what it accepts it returns
// byte for byte, a prefix of its input; Elements splits it without error.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*-1\r\n", "_\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "%1\r\n+k\r\n$1\r\nv\r\n", ">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n",
		"|1\r\n+a\r\n+b\r\n:1\r\n", "=7\r\ntxt:abc\r\n", "!3\r\nerr\r\n", "#t\r\n", ",1.5\r\n", "(123\r\n", "~1\r\n:1\r\n",
		"$5\r\nab\r\n", "*1\r\n", "?\r\n", "$99999999999\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := ReadReply(bufio.NewReader(bytes.NewReader(in)), nil)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("ReadReply returned %q, not a prefix of %q", got, in)
		}
		if _, _, err := Elements(got); err != nil {
			t.Fatalf("Elements of an accepted reply %q: %v", got, err)
		}
	})
}

// FuzzBound: a range end either parses or is refused with errBadID, and a
// parsed range's record ids are ordered.
func FuzzBound(f *testing.F) {
	for _, s := range []string{"-", "+", "0", "0-0", "(0-0", "1733052000000-5", "(1733052000000", "18446744073709551615-18446744073709551615", "(18446744073709551615-18446744073709551615", "x", "1-", "-1", ""} {
		f.Add([]byte(s), []byte("+"))
	}
	f.Fuzz(func(t *testing.T, lo, hi []byte) {
		start, ok1, err1 := bound(lo, false)
		end, ok2, err2 := bound(hi, true)
		for _, err := range []error{err1, err2} {
			if err != nil && err != errBadID {
				t.Fatalf("bound error %v is not errBadID", err)
			}
		}
		if err1 != nil || err2 != nil || !ok1 || !ok2 {
			return
		}
		if sp := spanOf(start, end); !sp.empty && sp.from.Compare(sp.to) > 0 {
			t.Fatalf("span %v from %q %q", sp, lo, hi)
		}
		if _, err := afterID(lo); err != nil && err != errBadID {
			t.Fatalf("afterID error %v", err)
		}
	})
}
