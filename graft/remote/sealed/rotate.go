package sealed

import (
	"context"
	"errors"
	"fmt"

	"github.com/echostore/echostore/graft/remote"
)

// Census is what Survey found under a prefix: how many objects each key
// seals, and how many are not envelopes.
type Census struct {
	// Objects is the number of objects listed.
	Objects int
	// ByKey counts the envelopes of each key id.
	ByKey map[KeyID]int
	// NotSealed counts the objects that are not envelopes.
	NotSealed int
}

// Survey reads the header of every object of inner (the store that holds
// the envelopes: Store.Inner) whose key starts with prefix, one ranged
// read of HeaderSize bytes each, and counts them by key id. A key id of no
// object under the remote's prefix is a key that can leave the keyring.
func Survey(ctx context.Context, inner remote.Store, prefix string) (Census, error) {
	c := Census{ByKey: map[KeyID]int{}}
	objs, err := inner.List(ctx, prefix, 0)
	if err != nil {
		return c, fmt.Errorf("sealed: survey: %w", err)
	}
	for _, o := range objs {
		b, err := inner.GetRange(ctx, o.Key, 0, HeaderSize)
		if errors.Is(err, remote.ErrNotFound) {
			continue // deleted since the list
		}
		if err != nil {
			return c, fmt.Errorf("sealed: survey: %w", err)
		}
		c.Objects++
		h, err := parseHeader(o.Key, b)
		if errors.Is(err, ErrNotSealed) {
			c.NotSealed++
			continue
		}
		if err != nil {
			return c, fmt.Errorf("sealed: survey: %w", err)
		}
		c.ByKey[h.id]++
	}
	return c, nil
}

// ResealResult is what Reseal did.
type ResealResult struct {
	// Checked is the number of objects whose header was read.
	Checked int
	// Resealed is the number of objects sealed again with the write key.
	Resealed int
	// Encrypted is the number of plaintext objects sealed with the write
	// key (a remote written before encryption was turned on).
	Encrypted int
}

// Reseal seals again with the write key of s's keyring every object under
// prefix that another key of the keyring seals: it reads the object (Get,
// opened with its old key) and writes the same plaintext back under the
// same key (Put), so that readers see the same bytes before and after. A
// plaintext object (a remote written before encryption was turned on) is
// sealed likewise, so that Reseal also encrypts an existing remote.
// Objects already under the write key cost one ranged read of their
// header. Reseal replaces objects in place: run it while no node writes to
// the remote (no serve, no `volume push` or `volume gc`), since an object
// replaced by a writer between the read and the write would be put back.
// After it, Survey finds no object of the old keys, which can then leave
// the keyring.
func Reseal(ctx context.Context, s *Store, prefix string) (ResealResult, error) {
	var res ResealResult
	objs, err := s.inner.List(ctx, prefix, 0)
	if err != nil {
		return res, fmt.Errorf("sealed: reseal: %w", err)
	}
	for _, o := range objs {
		b, err := s.inner.GetRange(ctx, o.Key, 0, HeaderSize)
		if errors.Is(err, remote.ErrNotFound) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("sealed: reseal: %w", err)
		}
		res.Checked++
		h, err := parseHeader(o.Key, b)
		if errors.Is(err, ErrNotSealed) {
			plain, err := s.inner.Get(ctx, o.Key)
			if err != nil {
				return res, fmt.Errorf("sealed: reseal: %w", err)
			}
			if err := s.Put(ctx, o.Key, plain); err != nil {
				return res, fmt.Errorf("sealed: reseal: %w", err)
			}
			res.Encrypted++
			continue
		}
		if err != nil {
			return res, fmt.Errorf("sealed: reseal: %w", err)
		}
		if h.id == s.ring.WriteID() {
			continue
		}
		plain, err := s.Get(ctx, o.Key)
		if err != nil {
			return res, fmt.Errorf("sealed: reseal: %w", err)
		}
		if err := s.Put(ctx, o.Key, plain); err != nil {
			return res, fmt.Errorf("sealed: reseal: %w", err)
		}
		res.Resealed++
	}
	return res, nil
}
