package sealed

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// keyIDLabel prefixes the key when its id is derived (docs/FORMAT.md).
const keyIDLabel = "echostore/sealed/key-id/v1\x00"

// KeyID names a key without revealing it: the first 8 bytes of
// SHA-256("echostore/sealed/key-id/v1\x00" || key). Every envelope carries
// the id of the key that sealed it, in the clear.
type KeyID [8]byte

// String returns the id as 16 lower-case hex digits.
func (id KeyID) String() string { return hex.EncodeToString(id[:]) }

// Key is one AES-256 key and its id. Its bytes never leave the package:
// every way of printing a Key (String, GoString, LogValue, %v, %+v, %#v)
// shows its id alone.
type Key struct {
	id KeyID
	k  *[KeySize]byte // behind a pointer, so that fmt shows an address for a Key inside a value
}

// NewKey returns the Key of 32 bytes (copied); any other length wraps
// ErrBadKey.
func NewKey(b []byte) (Key, error) {
	if len(b) != KeySize {
		return Key{}, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(b), KeySize)
	}
	k := Key{k: new([KeySize]byte)}
	copy(k.k[:], b)
	sum := sha256.Sum256(append([]byte(keyIDLabel), b...))
	copy(k.id[:], sum[:8])
	return k, nil
}

// ParseKey reads a key in one of the three forms a key file or the
// ECHOSTORE_REMOTE_KEY variable may hold:
//
//   - exactly 32 bytes: the key itself (head -c 32 /dev/urandom > key);
//   - 64 hex digits (either case): openssl rand -hex 32 > key;
//   - 44 characters of standard base64 with its padding: openssl rand -base64 32 > key.
//
// The text forms may end with one newline (\n or \r\n). Anything else
// (other lengths, other characters, spaces, a second line) wraps ErrBadKey,
// with an error that says what is wrong without showing the bytes.
func ParseKey(b []byte) (Key, error) {
	if len(b) == KeySize {
		return NewKey(b)
	}
	t := bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	switch len(t) {
	case 2 * KeySize:
		raw := make([]byte, KeySize)
		if _, err := hex.Decode(raw, t); err != nil {
			return Key{}, fmt.Errorf("%w: 64 characters that are not all hex digits", ErrBadKey)
		}
		return NewKey(raw)
	case base64.StdEncoding.EncodedLen(KeySize):
		raw, err := base64.StdEncoding.Strict().DecodeString(string(t))
		if err != nil || len(raw) != KeySize {
			return Key{}, fmt.Errorf("%w: 44 characters that are not the standard base64 of 32 bytes", ErrBadKey)
		}
		return NewKey(raw)
	}
	return Key{}, fmt.Errorf("%w: %d bytes; want 32 random bytes, or them as 64 hex digits or 44 base64 characters (openssl rand -hex 32)", ErrBadKey, len(b))
}

// ReadKeyFile reads and parses a key file (see ParseKey). A file readable
// by every user of the machine is refused, as serve's token files are. Its
// errors name the file, never its contents, and wrap ErrBadKey.
func ReadKeyFile(path string) (Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Key{}, fmt.Errorf("%w: key file: %w", ErrBadKey, err)
	}
	if fi.Mode().Perm()&0o004 != 0 {
		return Key{}, fmt.Errorf("%w: key file %s is readable by every user of the machine (mode %v): chmod 600 %s", ErrBadKey, path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("%w: key file: %w", ErrBadKey, err)
	}
	k, err := ParseKey(b)
	clear(b)
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// ID returns the key's id.
func (k Key) ID() KeyID { return k.id }

// IsZero reports whether k is the zero Key (no key).
func (k Key) IsZero() bool { return k.id == KeyID{} }

// String shows the key's id alone.
func (k Key) String() string { return "key " + k.id.String() }

// GoString shows the key's id alone.
func (k Key) GoString() string { return "sealed.Key{id: " + k.id.String() + "}" }

// Format shows the key's id alone, whatever the verb.
func (k Key) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

// LogValue shows the key's id alone.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.id.String()) }

// Keyring is the keys of a sealed store: one writes (every object is sealed
// with it), every one reads (an object is opened with the key its envelope
// names). Rotation is a new write key with the old ones kept for reading
// until no object is sealed with them (docs/FORMAT.md). A Keyring never
// changes after NewKeyring and is safe for concurrent use; printing it
// shows key ids alone.
type Keyring struct {
	write Key
	read  []Key // the write key first, then the others in their order
}

// NewKeyring returns the keyring that writes with write and reads with
// write and every key of read (a repeated key counts once). The zero Key
// as write wraps ErrBadKey.
func NewKeyring(write Key, read ...Key) (*Keyring, error) {
	if write.IsZero() {
		return nil, fmt.Errorf("%w: no write key", ErrBadKey)
	}
	r := &Keyring{write: write, read: []Key{write}}
	for _, k := range read {
		if k.IsZero() {
			return nil, fmt.Errorf("%w: a zero read key", ErrBadKey)
		}
		if !slices.ContainsFunc(r.read, func(h Key) bool { return h.id == k.id }) {
			r.read = append(r.read, k)
		}
	}
	return r, nil
}

// WriteID returns the id of the key that seals.
func (r *Keyring) WriteID() KeyID { return r.write.id }

// ReadIDs returns the ids of every key that opens, the write key's first.
func (r *Keyring) ReadIDs() []KeyID {
	ids := make([]KeyID, len(r.read))
	for i, k := range r.read {
		ids[i] = k.id
	}
	return ids
}

// lookup returns the key of id.
func (r *Keyring) lookup(id KeyID) (Key, bool) {
	for _, k := range r.read {
		if k.id == id {
			return k, true
		}
	}
	return Key{}, false
}

// String shows the keys' ids alone.
func (r Keyring) String() string {
	if len(r.read) == 0 {
		return "no keyring"
	}
	ids := make([]string, 0, len(r.read)-1)
	for _, k := range r.read[1:] {
		ids = append(ids, k.id.String())
	}
	return "keyring(write " + r.write.id.String() + ", also read [" + strings.Join(ids, " ") + "])"
}

// GoString shows the keys' ids alone.
func (r Keyring) GoString() string { return r.String() }

// Format shows the keys' ids alone, whatever the verb.
func (r Keyring) Format(f fmt.State, _ rune) { fmt.Fprint(f, r.String()) }

// LogValue shows the keys' ids alone.
func (r Keyring) LogValue() slog.Value { return slog.StringValue(r.String()) }

// LoadKeyring returns the keyring of a configuration: the write key from
// the key file writeFile or, if writeFile is "", write (a key given
// otherwise: ECHOSTORE_REMOTE_KEY), and the read-only keys from the files
// of old. Neither a write key nor old keys: nil, nil (no encryption). Old
// keys without a write key, or a key file that holds no key, wrap
// ErrBadKey; no error shows a key.
func LoadKeyring(writeFile string, write Key, old []string) (*Keyring, error) {
	switch {
	case writeFile != "":
		var err error
		if write, err = ReadKeyFile(writeFile); err != nil {
			return nil, err
		}
	case !write.IsZero():
	case len(old) > 0:
		return nil, fmt.Errorf("%w: old keys (remote_old_key_files) given without a key to write with (remote_key_file)", ErrBadKey)
	default:
		return nil, nil
	}
	read := make([]Key, 0, len(old))
	for _, f := range old {
		k, err := ReadKeyFile(f)
		if err != nil {
			return nil, err
		}
		read = append(read, k)
	}
	return NewKeyring(write, read...)
}
