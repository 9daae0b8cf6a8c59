package names

import (
	"errors"
	"fmt"
)

// MaxLen is the longest name accepted, in bytes.
const MaxLen = 128

// ErrInvalid is wrapped by every error returned for a malformed name.
var ErrInvalid = errors.New("invalid name")

// Kind says what a name names; it only shapes error messages.
type Kind string

// The kinds of names echostore validates.
const (
	KindQueue  Kind = "queue"
	KindStream Kind = "stream"
	KindVolume Kind = "volume"
	KindLane   Kind = "lane"
)

// Check reports whether s is a valid name of the given kind. The error wraps
// ErrInvalid and says which rule s breaks.
func Check(kind Kind, s string) error {
	if len(s) == 0 {
		return fmt.Errorf("%s name is empty: %w", kind, ErrInvalid)
	}
	if len(s) > MaxLen {
		return fmt.Errorf("%s name is %d bytes long, at most %d are allowed: %w", kind, len(s), MaxLen, ErrInvalid)
	}
	if s == "." || s == ".." {
		return fmt.Errorf("%s name %q is reserved: %w", kind, s, ErrInvalid)
	}
	if kind == KindVolume && s[0] == '.' {
		return fmt.Errorf("volume name %q starts with '.', which a remote object key may not (reserved for temporaries): %w", s, ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if !allowed(s[i]) {
			return fmt.Errorf("%s name %q has %q at byte %d; only A-Z a-z 0-9 . _ - are allowed: %w",
				kind, s, rune(s[i]), i, ErrInvalid)
		}
	}
	return nil
}

func allowed(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == '.', c == '_', c == '-':
		return true
	}
	return false
}
