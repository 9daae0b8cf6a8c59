package mq

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/redis/rueidis"
)

// MaxConsumerName is the longest consumer name, in bytes, that Claim,
// Recover and Fail take.
const MaxConsumerName = 128

// CheckConsumer reports whether name is a consumer name Claim takes: 1 to
// MaxConsumerName bytes of UTF-8, every character graphic and none a space
// (so letters, digits and punctuation of any script). The error wraps
// ErrInvalidConsumer.
func CheckConsumer(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidConsumer)
	case len(name) > MaxConsumerName:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidConsumer, len(name), MaxConsumerName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidConsumer)
	}
	for i, r := range name {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: character %U at byte %d (want letters, digits and punctuation, no spaces)", ErrInvalidConsumer, r, i)
		}
	}
	return nil
}

// CheckEntryID reports whether id is a stream entry id: <ms>-<seq> or
// <ms>, decimal numbers that fit 64 bits. The error wraps
// ErrInvalidEntryID and quotes (a clipped) id.
func CheckEntryID(id string) error {
	ms, seq, two := strings.Cut(id, "-")
	if !decimal64(ms) || two && !decimal64(seq) {
		return fmt.Errorf("%w %q: want <ms>-<seq>, such as 1700000000000-0", ErrInvalidEntryID, clip(id))
	}
	return nil
}

func decimal64(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

func checkEntryIDs(ids []string) error {
	for _, id := range ids {
		if err := CheckEntryID(id); err != nil {
			return err
		}
	}
	return nil
}

// IsUnavailable reports whether err says that Redis could not be reached
// or cannot serve now, so that the same call may succeed later: a
// connection refused, reset or closed (also io.EOF: the server closed it),
// a network timeout, a client that is closing, or an error reply LOADING, BUSY, MASTERDOWN, TRYAGAIN or
// CLUSTERDOWN. Errors wrapping ErrUnavailable are too. It is not true of
// an error reply that refuses the command itself (a syntax error, a wrong
// type), nor of a context ended by the caller.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		if re.IsNil() {
			return false
		}
		if re.IsLoading() || re.IsTryAgain() || re.IsClusterDown() {
			return true
		}
		msg := re.Error()
		return strings.HasPrefix(msg, "BUSY ") || strings.HasPrefix(msg, "MASTERDOWN")
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, rueidis.ErrClosing) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// A network error, but not a bare errno: syscall.Errno is a net.Error
	// too, and a file system's EACCES or EROFS is not Redis being down.
	var ne net.Error
	if errors.As(err, &ne) {
		_, errno := ne.(syscall.Errno)
		return !errno
	}
	return false
}
