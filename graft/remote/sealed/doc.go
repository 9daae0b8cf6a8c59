// Package sealed encrypts at rest everything echostore writes to its
// remote: Store wraps a remote.Store and seals every object it writes with
// AES-256-GCM (Go's crypto/aes and crypto/cipher) in an envelope that
// docs/FORMAT.md ("Sealed objects") specifies byte by byte.
//
// # The envelope
//
// A 48-byte cleartext header (magic "ESRE", version, flags, the id of the
// key that sealed it, a 32-byte random nonce) and the plaintext in chunks
// of ChunkSize bytes, each sealed on its own with a key derived for the
// object from the key and the nonce (HKDF-SHA256). Each chunk's GCM nonce
// counts the chunks and marks the last one; its additional data is the
// header and the object's key (its path), so an object cannot be moved to
// another key, cut short at a chunk boundary, extended or spliced. Chunks
// keep ranged reads ranged: GetRange reads the chunks covering the range
// (and one byte more, which says whether the last of them ends the
// object), so a page fault stays one ranged GET once the object's header
// is known.
//
// # Keys
//
// A Keyring holds one key that writes and any number that read; the
// envelope's key id picks the key that opens it, so that keys rotate:
// write with a new key, keep the old one for reading, and drop it once
// Survey finds no object sealed with it (Reseal seals old objects again
// with the write key). A key never shows in an error, a log line or a
// printed value: Key and Keyring print their ids alone.
//
// # Errors
//
// Every failure is a typed error, never a panic and never unauthenticated
// bytes: ErrBadKey (a key that is not 32 bytes in a known form),
// ErrUnknownKey (sealed with a key the keyring lacks), ErrNotSealed (an
// object written without encryption), ErrTampered (an envelope that does
// not authenticate; it wraps remote.ErrCorrupt). A store opened without a
// key that reads an envelope fails with remote.ErrSealed.
package sealed
