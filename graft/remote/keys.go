package remote

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/echostore/echostore/names"
)

// MaxKeyLen is the longest object key accepted, in bytes.
const MaxKeyLen = 1024

// Key layout of the remote (see docs/REMOTE.md):
//
//	volumes/<V>/log/<16 hex: ^lsn>              commit objects (newest first)
//	volumes/<V>/checkpoints/<16 hex: ^lsn>-<64 hex: commit hash>   checkpoint markers
//	segments/<V>/<32 hex>                       segments (zstd frames) of volume V
const (
	segmentPrefix = "segments/"
	lsnHexLen     = 16
)

// CheckKey reports whether key is a well-formed object key: 1..MaxKeyLen
// bytes of valid UTF-8, '/'-separated segments, none empty, none "." or "..",
// none starting with '.', no NUL or other control byte, no backslash, not
// absolute. Such a key can never name a path outside a file:// root. The
// error wraps ErrBadKey.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty key: %w", ErrBadKey)
	}
	return checkPath(key, false)
}

// CheckPrefix checks a List prefix (or the prefix= of a bucket URL): like a
// key, but it may be empty and may end with '/'. The error wraps ErrBadKey.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return checkPath(prefix, true)
}

func checkPath(s string, prefix bool) error {
	if len(s) > MaxKeyLen {
		return fmt.Errorf("key of %d bytes, at most %d allowed: %w", len(s), MaxKeyLen, ErrBadKey)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("key %q is not valid UTF-8: %w", s, ErrBadKey)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("key %q has byte %#x at %d: %w", s, c, i, ErrBadKey)
		}
	}
	segs := strings.Split(s, "/")
	if prefix && len(segs) > 1 && segs[len(segs)-1] == "" {
		segs = segs[:len(segs)-1] // trailing '/' of a prefix
	}
	for _, seg := range segs {
		switch {
		case seg == "":
			return fmt.Errorf("key %q has an empty segment or is absolute: %w", s, ErrBadKey)
		case seg[0] == '.':
			return fmt.Errorf("key %q has a segment starting with '.': %w", s, ErrBadKey)
		}
	}
	return nil
}

func lsnHex(lsn uint64) string {
	return fmt.Sprintf("%016x", math.MaxUint64-lsn)
}

func parseLSNHex(s string) (uint64, bool) {
	if len(s) != lsnHexLen {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || strings.ToLower(s) != s {
		return 0, false
	}
	lsn := math.MaxUint64 - v
	return lsn, lsn >= 1 && lsn <= MaxLSN
}

// MaxLSN is the largest remote LSN; LSN 0 means "no commit".
const MaxLSN = math.MaxUint64 - 1

// LogPrefix returns the key prefix of the commit objects of volume.
func LogPrefix(volume string) string { return "volumes/" + volume + "/log/" }

// CheckpointPrefix returns the key prefix of the checkpoint markers of volume.
func CheckpointPrefix(volume string) string { return "volumes/" + volume + "/checkpoints/" }

// LogKey returns the key of the commit object at remote LSN lsn of volume:
// volumes/<volume>/log/<16 lower-case hex digits of MaxUint64-lsn>, so that
// keys sort newest first.
func LogKey(volume string, lsn uint64) string { return LogPrefix(volume) + lsnHex(lsn) }

// ParseLogKey returns the LSN named by a key of LogPrefix(volume).
func ParseLogKey(volume, key string) (uint64, error) {
	rest, ok := strings.CutPrefix(key, LogPrefix(volume))
	if !ok {
		return 0, corrupt("log key "+key, "not under %s", LogPrefix(volume))
	}
	lsn, ok := parseLSNHex(rest)
	if !ok {
		return 0, corrupt("log key "+key, "not 16 lower-case hex digits of an inverted LSN")
	}
	return lsn, nil
}

// CheckpointKey returns the key of the checkpoint marker of the checkpoint
// commit at lsn with hash h.
func CheckpointKey(volume string, lsn uint64, h Hash) string {
	return CheckpointPrefix(volume) + lsnHex(lsn) + "-" + h.String()
}

// ParseCheckpointKey returns the LSN and commit hash a checkpoint marker key
// names.
func ParseCheckpointKey(volume, key string) (uint64, Hash, error) {
	rest, ok := strings.CutPrefix(key, CheckpointPrefix(volume))
	if !ok {
		return 0, Hash{}, corrupt("checkpoint key "+key, "not under %s", CheckpointPrefix(volume))
	}
	l, hs, ok := strings.Cut(rest, "-")
	lsn, ok2 := parseLSNHex(l)
	h, err := ParseHash(hs)
	if !ok || !ok2 || err != nil {
		return 0, Hash{}, corrupt("checkpoint key "+key, "want <16 hex>-<64 hex>")
	}
	return lsn, h, nil
}

// SegmentPrefix returns the key prefix of the segments of volume.
func SegmentPrefix(volume string) string { return segmentPrefix + volume + "/" }

// SegmentKey returns the key of the segment of volume with the given
// 32-hex-digit id.
func SegmentKey(volume, id string) string { return SegmentPrefix(volume) + id }

// checkSegmentKey reports whether key is segments/<volume>/<32 lower-case hex>.
func checkSegmentKey(volume, key string) bool {
	id, ok := strings.CutPrefix(key, SegmentPrefix(volume))
	if !ok || len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func checkVolume(v string) error {
	if err := names.Check(names.KindVolume, v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
