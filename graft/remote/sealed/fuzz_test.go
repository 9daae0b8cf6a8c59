package sealed

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/mem"
)

// FuzzOpen feeds arbitrary bytes to the envelope decoder, whole (Open) and
// by range (GetRange, with and without the header known): it never panics,
// every failure is one of the package's typed errors, nothing but an
// envelope the keyring sealed (a seed, unchanged) opens whole, and a range
// returns only bytes a seed holds at that place (a range authenticates the
// chunks it covers).
func FuzzOpen(f *testing.F) {
	k, err := NewKey(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		f.Fatal(err)
	}
	r, err := NewKeyring(k)
	if err != nil {
		f.Fatal(err)
	}
	s := New(nil, r)
	// Envelopes of fixed nonces, so that every fuzzing process knows the
	// seeds (Seal's nonces are random).
	plains := [][]byte{{}, []byte("hello"), bytes.Repeat([]byte("abc"), ChunkSize/3+5)}
	var envs [][]byte
	for _, p := range plains {
		env, err := sealWith(k, headerWith(k, [32]byte{byte(len(envs)), 1}), "obj", p)
		if err != nil {
			f.Fatal(err)
		}
		envs = append(envs, env)
		f.Add(env, int64(0), int64(10))
		f.Add(env, int64(ChunkSize-2), int64(5))
	}
	// One wrapped store for every input (a worker runs them one by one).
	inner, err := remote.Open(context.Background(), "mem://", mem.Driver{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = inner.Close() })
	f.Add([]byte("ESRE"), int64(0), int64(1))
	f.Add([]byte("ESRC plain commit"), int64(3), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, off, n int64) {
		typed := func(err error) bool {
			return errors.Is(err, ErrTampered) || errors.Is(err, ErrNotSealed) ||
				errors.Is(err, ErrUnknownKey) || errors.Is(err, remote.ErrCorrupt)
		}
		// seed is the seed data is; head the seed whose header it has (a
		// range opens only the chunks it covers, so chunks of that seed
		// elsewhere may be altered).
		seed, head := -1, -1
		for i, e := range envs {
			if bytes.Equal(e, data) {
				seed = i
			}
			if len(data) >= HeaderSize && bytes.Equal(e[:HeaderSize], data[:HeaderSize]) {
				head = i
			}
		}
		got, err := s.Open("obj", data)
		switch {
		case err != nil && !typed(err):
			t.Fatalf("Open: untyped error %v", err)
		case err == nil && seed < 0:
			t.Fatalf("Open: %d bytes that no key sealed opened", len(data))
		case err == nil && !bytes.Equal(got, plains[seed]):
			t.Fatal("Open: other bytes than sealed")
		}
		ctx := context.Background()
		if err := inner.Put(ctx, "obj", data); err != nil {
			t.Fatal(err)
		}
		off, n = max(0, off%(3*ChunkSize)), max(0, n%(2*ChunkSize))
		rd := New(inner, r)
		for range 2 { // the second with the header known
			got, err := rd.GetRange(ctx, "obj", off, n)
			if err != nil && !typed(err) {
				t.Fatalf("GetRange: untyped error %v", err)
			}
			if err == nil && len(got) > 0 && (head < 0 || !bytes.HasPrefix(plains[head][min(off, int64(len(plains[head]))):], got)) {
				t.Fatalf("GetRange %d+%d: bytes no key sealed there", off, n)
			}
		}
	})
}
