package sealed

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/echostore/echostore/graft/remote"
)

// Sentinel errors: every error of this package for one of these conditions
// wraps the matching one, so that callers branch with errors.Is. None
// shows a key's bytes.
var (
	// ErrBadKey: a key (or key file, or ECHOSTORE_REMOTE_KEY) that is not
	// 32 bytes in one of the forms ParseKey reads. A configuration error:
	// nothing was opened or written.
	ErrBadKey = errors.New("sealed: bad key")
	// ErrUnknownKey: the object is sealed with a key the keyring does not
	// hold (a wrong key, or an old key dropped too early). The object may
	// well be fine.
	ErrUnknownKey = errors.New("sealed: object sealed with a key this keyring lacks")
	// ErrNotSealed: a sealed store met an object that is not an envelope
	// (written without encryption, or by something else).
	ErrNotSealed = errors.New("sealed: object is not encrypted (it was written without remote_key_file)")
	// ErrTampered: an envelope whose chunks do not authenticate under the
	// key its header names: altered, cut short, extended, or moved from
	// another object key. It also wraps remote.ErrCorrupt.
	ErrTampered = fmt.Errorf("sealed: object fails authentication: %w", remote.ErrCorrupt)
)

// headerCacheSize bounds the headers a Store keeps for ranged reads.
const headerCacheSize = 4096

// Store is a remote.Store that encrypts and authenticates every object it
// writes to the store it wraps, and opens every object it reads (see the
// package doc). Keys (paths), listing order and the fence of PutIfAbsent
// are those of the wrapped store; sizes and ranges are of the plaintext.
// It is safe for concurrent use.
type Store struct {
	inner remote.Store
	ring  *Keyring

	mu      sync.Mutex
	headers map[string]header // of objects read by range, for the next range
}

var _ remote.Store = (*Store)(nil)

// New returns the sealed store over inner with the keys of ring.
func New(inner remote.Store, ring *Keyring) *Store {
	return &Store{inner: inner, ring: ring, headers: map[string]header{}}
}

// Keyring returns the store's keyring.
func (s *Store) Keyring() *Keyring { return s.ring }

// Inner returns the wrapped store, which holds the envelopes.
func (s *Store) Inner() remote.Store { return s.inner }

// Seal returns the envelope of plain stored under the object key key, as
// Put would write it.
func (s *Store) Seal(key string, plain []byte) ([]byte, error) {
	if err := remote.CheckKey(key); err != nil {
		return nil, err
	}
	return seal(s.ring, key, plain)
}

// Open returns the plaintext of the envelope env stored under key, as Get
// would read it.
func (s *Store) Open(key string, env []byte) ([]byte, error) {
	return open(s.ring, key, env)
}

// PutIfAbsent implements remote.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	env, err := s.Seal(key, data)
	if err != nil {
		return err
	}
	s.forget(key)
	return s.inner.PutIfAbsent(ctx, key, env)
}

// Put implements remote.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	env, err := s.Seal(key, data)
	if err != nil {
		return err
	}
	s.forget(key)
	return s.inner.Put(ctx, key, env)
}

// Get implements remote.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	env, err := s.inner.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.Open(key, env)
}

// GetRange implements remote.Store: it reads the chunks that cover
// [off, off+n) of the plaintext and one byte more (which says whether the
// last of them is the object's last), in one ranged read of the wrapped
// store once the object's header is known (read with the first chunk, or
// by a read of its own the first time a range of an object starts past
// it).
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := remote.CheckKey(key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("get %s: range at %d of %d bytes: %w", key, off, n, remote.ErrInvalid)
	}
	if n == 0 {
		return []byte{}, nil
	}
	first, last := uint64(off/ChunkSize), uint64((off+n-1)/ChunkSize)
	start := int64(HeaderSize) + int64(first)*sealedChunk
	size := int64(last-first+1)*sealedChunk + 1
	s.mu.Lock()
	h, cached := s.headers[key]
	s.mu.Unlock()
	var b []byte
	var err error
	switch {
	case first == 0:
		// The header comes with the first chunk.
		if b, err = s.inner.GetRange(ctx, key, 0, start+size); err != nil {
			return nil, err
		}
		if h, err = parseHeader(key, b); err != nil {
			return nil, err
		}
		b = b[HeaderSize:]
	case !cached:
		if h, err = s.readHeader(ctx, key); err != nil {
			return nil, err
		}
		fallthrough
	default:
		if b, err = s.inner.GetRange(ctx, key, start, size); err != nil {
			return nil, err
		}
	}
	plain, err := s.openRange(key, h, first, b, size)
	if err != nil && first > 0 && !errors.Is(err, ErrUnknownKey) {
		// The header and the chunks came from two reads: the object may
		// have been replaced between them (or since the header was
		// cached). Once more, with its header read again.
		s.forget(key)
		if h, err = s.readHeader(ctx, key); err != nil {
			return nil, err
		}
		if b, err = s.inner.GetRange(ctx, key, start, size); err != nil {
			return nil, err
		}
		plain, err = s.openRange(key, h, first, b, size)
	}
	if err != nil {
		return nil, err
	}
	s.remember(key, h)
	lo := min(off-int64(first)*ChunkSize, int64(len(plain)))
	return plain[lo:min(lo+n, int64(len(plain)))], nil
}

// openRange opens the stored chunks b (asked as size bytes from chunk
// first: whole chunks and one byte more).
func (s *Store) openRange(key string, h header, first uint64, b []byte, size int64) ([]byte, error) {
	if len(b) == 0 {
		if first == 0 {
			return nil, fmt.Errorf("%s: sealed object has no chunk: %w", key, ErrTampered)
		}
		return []byte{}, nil // the object ends before the range, as on the wrapped store
	}
	final := int64(len(b)) < size
	if !final {
		b = b[:len(b)-1]
	}
	return openChunks(s.ring, key, h, first, b, final)
}

// readHeader reads the header of key.
func (s *Store) readHeader(ctx context.Context, key string) (header, error) {
	b, err := s.inner.GetRange(ctx, key, 0, HeaderSize)
	if err != nil {
		return header{}, err
	}
	if len(b) == 0 {
		return header{}, fmt.Errorf("%s: empty object: %w", key, ErrNotSealed)
	}
	return parseHeader(key, b)
}

func (s *Store) remember(key string, h header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.headers[key]; !ok && len(s.headers) >= headerCacheSize {
		for k := range s.headers { // drop any one
			delete(s.headers, k)
			break
		}
	}
	s.headers[key] = h
}

func (s *Store) forget(key string) {
	s.mu.Lock()
	delete(s.headers, key)
	s.mu.Unlock()
}

// List implements remote.Store. Each Size is the plaintext size of the
// object (an object whose stored size no envelope has keeps it).
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]remote.ObjectInfo, error) {
	objs, err := s.inner.List(ctx, prefix, limit)
	if err != nil {
		return nil, err
	}
	for i := range objs {
		if p, ok := PlainSize(objs[i].Size); ok {
			objs[i].Size = p
		}
	}
	return objs, nil
}

// Delete implements remote.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	s.forget(key)
	return s.inner.Delete(ctx, key)
}

// Close implements remote.Store: it closes the wrapped store.
func (s *Store) Close() error { return s.inner.Close() }
