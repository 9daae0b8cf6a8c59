package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/echostore/echostore/graft/remote"
)

// The envelope (docs/FORMAT.md, "Sealed objects", specifies every byte):
//
//	header   48 bytes: magic "ESRE", version u16 LE (1), flags u16 LE (0),
//	         key id (8), nonce (32 random bytes)
//	chunks   the plaintext in chunks of ChunkSize bytes (the last one
//	         shorter, an empty plaintext one empty chunk), each sealed with
//	         AES-256-GCM into its ciphertext and a 16-byte tag
//
// The object's AES key is HKDF-SHA256(key, salt = nonce, info =
// "echostore/sealed/object/v1"); chunk i's GCM nonce is i as 8 bytes big
// endian, three zero bytes and 1 for the last chunk (0 for the others); its
// additional data is the header and the object's key (its path in the
// store), so that an object cannot be moved, cut short, extended or
// spliced from another without failing authentication.
const (
	// Version is the envelope version this package writes and reads.
	Version = 1
	// HeaderSize is the size of the cleartext header.
	HeaderSize = 48
	// ChunkSize is the plaintext size of every chunk but the last.
	ChunkSize = 64 << 10
	// TagSize is the size of each chunk's GCM tag.
	TagSize = 16
	// sealedChunk is the stored size of a full chunk.
	sealedChunk = ChunkSize + TagSize

	objectInfo = "echostore/sealed/object/v1"
)

// header is a decoded envelope header.
type header struct {
	raw   [HeaderSize]byte
	id    KeyID
	nonce [32]byte
}

// newHeader returns a fresh header for an object sealed with key.
func newHeader(key Key) (header, error) {
	var nonce [32]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return header{}, fmt.Errorf("sealed: random nonce: %w", err)
	}
	return headerWith(key, nonce), nil
}

// headerWith returns the header of an object sealed with key and nonce.
func headerWith(key Key, nonce [32]byte) header {
	var h header
	copy(h.raw[:4], remote.SealedMagic)
	binary.LittleEndian.PutUint16(h.raw[4:], Version)
	binary.LittleEndian.PutUint16(h.raw[6:], 0)
	copy(h.raw[8:16], key.id[:])
	copy(h.raw[16:48], nonce[:])
	h.id = key.id
	h.nonce = nonce
	return h
}

// parseHeader decodes the first HeaderSize bytes of an object.
func parseHeader(key string, b []byte) (header, error) {
	var h header
	if len(b) < 4 || string(b[:4]) != remote.SealedMagic {
		return h, fmt.Errorf("%s: %w", key, ErrNotSealed)
	}
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%s: sealed header truncated at %d of %d bytes: %w", key, len(b), HeaderSize, remote.ErrCorrupt)
	}
	copy(h.raw[:], b[:HeaderSize])
	if v := binary.LittleEndian.Uint16(b[4:]); v != Version {
		return h, fmt.Errorf("%s: sealed envelope version %d, this reader knows %d: %w", key, v, Version, remote.ErrCorrupt)
	}
	if f := binary.LittleEndian.Uint16(b[6:]); f != 0 {
		return h, fmt.Errorf("%s: sealed envelope flags %#x, this reader knows none: %w", key, f, remote.ErrCorrupt)
	}
	copy(h.id[:], b[8:16])
	copy(h.nonce[:], b[16:48])
	return h, nil
}

// aead returns the AES-256-GCM of the object h heads, sealed with key.
func (h header) aead(key Key) (cipher.AEAD, error) {
	ok, err := hkdf.Key(sha256.New, key.k[:], h.nonce[:], objectInfo, KeySize)
	if err != nil {
		return nil, fmt.Errorf("sealed: derive object key: %w", err)
	}
	defer clear(ok)
	blk, err := aes.NewCipher(ok)
	if err != nil {
		return nil, fmt.Errorf("sealed: %w", err)
	}
	return cipher.NewGCM(blk)
}

// aad is a chunk's additional data: the header and the object's key.
func (h header) aad(key string) []byte {
	return append(h.raw[:HeaderSize:HeaderSize], key...)
}

// chunkNonce is chunk i's GCM nonce.
func chunkNonce(i uint64, last bool) []byte {
	n := make([]byte, 12)
	binary.BigEndian.PutUint64(n, i)
	if last {
		n[11] = 1
	}
	return n
}

// SealedSize returns the stored size of an object of n plaintext bytes.
func SealedSize(n int64) int64 {
	chunks := max(1, (n+ChunkSize-1)/ChunkSize)
	return HeaderSize + n + chunks*TagSize
}

// PlainSize returns the plaintext size of a stored object of n bytes, and
// false if no envelope has that size.
func PlainSize(n int64) (int64, bool) {
	body := n - HeaderSize
	if body < TagSize {
		return 0, false
	}
	chunks := (body + sealedChunk - 1) / sealedChunk
	p := body - chunks*TagSize
	if chunks > 1 && p <= (chunks-1)*ChunkSize {
		return 0, false // an empty last chunk, which no writer makes
	}
	return p, true
}

// seal returns the envelope of plain under the object key key.
func seal(ring *Keyring, key string, plain []byte) ([]byte, error) {
	h, err := newHeader(ring.write)
	if err != nil {
		return nil, err
	}
	return sealWith(ring.write, h, key, plain)
}

// sealWith returns the envelope of plain under the object key key, headed
// by h and sealed with k.
func sealWith(k Key, h header, key string, plain []byte) ([]byte, error) {
	a, err := h.aead(k)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, SealedSize(int64(len(plain))))
	out = append(out, h.raw[:]...)
	aad := h.aad(key)
	for i := uint64(0); ; i++ {
		c := plain[min(len(plain), int(i)*ChunkSize):min(len(plain), int(i+1)*ChunkSize)]
		last := (int(i)+1)*ChunkSize >= len(plain)
		out = a.Seal(out, chunkNonce(i, last), c, aad)
		if last {
			return out, nil
		}
	}
}

// openChunks opens the stored chunks b, which start at chunk first of the
// object key headed by h; the last of them is the object's last chunk if
// final. It returns their plaintext.
func openChunks(ring *Keyring, key string, h header, first uint64, b []byte, final bool) ([]byte, error) {
	k, ok := ring.lookup(h.id)
	if !ok {
		return nil, fmt.Errorf("%s: sealed with key %s, which is not among this keyring's %v: %w", key, h.id, ring.ReadIDs(), ErrUnknownKey)
	}
	a, err := h.aead(k)
	if err != nil {
		return nil, err
	}
	aad := h.aad(key)
	out := make([]byte, 0, len(b))
	for i := first; len(b) > 0; i++ {
		n := min(len(b), sealedChunk)
		last := n == len(b) && final
		if n < TagSize || (last && n == TagSize && i > 0) || (!last && n != sealedChunk) {
			return nil, fmt.Errorf("%s: sealed chunk %d of %d bytes: %w", key, i, n, ErrTampered)
		}
		out, err = a.Open(out, chunkNonce(i, last), b[:n], aad)
		if err != nil {
			return nil, fmt.Errorf("%s: sealed chunk %d does not authenticate (altered, cut short, moved from another key, or sealed with another key of the same id): %w", key, i, ErrTampered)
		}
		b = b[n:]
	}
	return out, nil
}

// open returns the plaintext of the whole stored object env of key.
func open(ring *Keyring, key string, env []byte) ([]byte, error) {
	h, err := parseHeader(key, env)
	if err != nil {
		return nil, err
	}
	body := env[HeaderSize:]
	if len(body) == 0 {
		return nil, fmt.Errorf("%s: sealed object has no chunk: %w", key, ErrTampered)
	}
	return openChunks(ring, key, h, 0, body, true)
}
