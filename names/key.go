package names

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// MaxKeyLen is the longest Redis key accepted as a stream key, in bytes.
// Redis takes keys of up to 512 MB; a stream key is named on command
// lines, in URLs and in logs, and 1 KiB is far above any key seen in use.
const MaxKeyLen = 1024

// ReservedKeyPrefix starts every key echostore keeps for itself (the
// streams of queues, their metadata, the metadata of key streams). A
// stream key may not start with it: echostore's keys would then be
// addressable as streams, and a stream key could equal the metadata key of
// another stream. A stream of queue Q is named Q S, not by its key.
const ReservedKeyPrefix = "emq:"

// KindKey is the kind of a stream key in error messages.
const KindKey Kind = "stream key"

// Key is a checked Redis key of a stream that echostore did not name: any
// non-empty bytes up to MaxKeyLen that do not start with ReservedKeyPrefix.
// The zero Key is no key (IsZero); every other value was made by ParseKey.
type Key struct{ s string }

// ParseKey checks s as a stream key. The error wraps ErrInvalid.
func ParseKey(s string) (Key, error) {
	if len(s) == 0 {
		return Key{}, fmt.Errorf("%s is empty: %w", KindKey, ErrInvalid)
	}
	if len(s) > MaxKeyLen {
		return Key{}, fmt.Errorf("%s is %d bytes long, at most %d are allowed: %w", KindKey, len(s), MaxKeyLen, ErrInvalid)
	}
	if strings.HasPrefix(s, ReservedKeyPrefix) {
		return Key{}, fmt.Errorf("%s %s starts with %q, echostore's own key space (name a stream of a queue as Q S): %w",
			KindKey, quoteKey(s), ReservedKeyPrefix, ErrInvalid)
	}
	return Key{s}, nil
}

// String returns the key's bytes ("" for the zero Key).
func (k Key) String() string { return k.s }

// IsZero reports whether k is the zero Key (no key).
func (k Key) IsZero() bool { return k.s == "" }

// MarshalText returns the key's bytes.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.s), nil }

// UnmarshalText parses b with ParseKey, so a decoded Key is checked.
func (k *Key) UnmarshalText(b []byte) (err error) {
	*k, err = ParseKey(string(b))
	return err
}

// quoteKey renders a key for messages: Go-quoted, so that control and
// non-UTF-8 bytes are visible and the message stays one line.
func quoteKey(s string) string { return strconv.Quote(s) }

// Volume names of key streams. A key is any bytes, a volume name
// [A-Za-z0-9._-]{1,128} not starting with '.', so the key is encoded:
//
//	archive-key.E     E is K with every byte outside [A-Za-z0-9.-]
//	                  written as '_' and two lowercase hex digits
//	                  ("orders" → archive-key.orders, "app:orders" →
//	                  archive-key.app_3aorders), when that fits MaxLen
//	archive-keyh.H    otherwise: H is the SHA-256 of K in lowercase hex
//
// The first form is reversible, so it is one-to-one; the second is
// one-to-one but for a SHA-256 collision; the two never meet (prefixes),
// and neither meets a queue stream's "archive.Q.S" (which starts with
// "archive.").
const (
	KeyVolumePrefix     = "archive-key."
	KeyHashVolumePrefix = "archive-keyh."
)

// keyVolume returns the archive volume name of key k.
func keyVolume(k string) string {
	const hexd = "0123456789abcdef"
	var b strings.Builder
	b.WriteString(KeyVolumePrefix)
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c != '_' && allowed(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
		if b.Len() > MaxLen {
			sum := sha256.Sum256([]byte(k))
			return KeyHashVolumePrefix + hex.EncodeToString(sum[:])
		}
	}
	return b.String()
}

// KeyOfVolume returns the key whose archive volume is v when v is of the
// reversible form archive-key.E; ok is false for every other volume
// (hashed ones included: they do not say their key).
func KeyOfVolume(v Volume) (k Key, ok bool) {
	e, found := strings.CutPrefix(v.s, KeyVolumePrefix)
	if !found || e == "" {
		return Key{}, false
	}
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		c := e[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+3 > len(e) {
			return Key{}, false
		}
		n, err := strconv.ParseUint(e[i+1:i+3], 16, 8)
		if err != nil || e[i+1:i+3] != strings.ToLower(e[i+1:i+3]) {
			return Key{}, false
		}
		b.WriteByte(byte(n))
		i += 2
	}
	k, err := ParseKey(b.String())
	if err != nil || keyVolume(k.s) != v.s {
		return Key{}, false
	}
	return k, true
}

// IsArchiveVolume reports whether v is the archive volume of a stream:
// "archive.Q.S" of a queue stream, or one of the two forms of a key
// stream.
func IsArchiveVolume(v Volume) bool {
	return strings.HasPrefix(v.s, "archive.") || strings.HasPrefix(v.s, KeyVolumePrefix) || strings.HasPrefix(v.s, KeyHashVolumePrefix)
}

// KeyRef returns the reference to the stream at key k, with its archive
// volume (see KeyVolumePrefix). The zero Key gives the zero StreamRef.
func KeyRef(k Key) StreamRef {
	if k.IsZero() {
		return StreamRef{}
	}
	return StreamRef{k: k, vol: Volume{keyVolume(k.s)}}
}

// ParseKeyRef checks k with ParseKey and returns its StreamRef.
func ParseKeyRef(k string) (StreamRef, error) {
	kk, err := ParseKey(k)
	if err != nil {
		return StreamRef{}, err
	}
	return KeyRef(kk), nil
}

// Key returns the key of r and true when r names a stream by its key;
// the zero Key and false for a stream of a queue (or the zero ref).
func (r StreamRef) Key() (Key, bool) { return r.k, !r.k.IsZero() }

// IsKey reports whether r names a stream by its key.
func (r StreamRef) IsKey() bool { return !r.k.IsZero() }
