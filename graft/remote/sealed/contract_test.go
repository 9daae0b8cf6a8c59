package sealed_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/graft/remote/remotetest"
	"github.com/echostore/echostore/graft/remote/sealed"
)

// The contract tests of graft/remote's stores (graft/remote/remotetest), run
// over a sealed store on the mem:// and file:// stores: the wrapper keeps
// every promise of remote.Store.

// eachStore runs f over a sealed store on each wrapped store.
func eachStore(t *testing.T, f func(t *testing.T, s remote.Store)) {
	k, _ := newKey(t)
	r := ring(t, k)
	t.Run("mem", func(t *testing.T) { f(t, sealed.New(memStore(t), r)) })
	t.Run("file", func(t *testing.T) {
		fs, err := remote.Open(context.Background(), "file://"+filepath.Join(t.TempDir(), "remote"), file.Driver{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fs.Close() })
		f(t, sealed.New(fs, r))
	})
}

func TestStoreContract(t *testing.T) {
	eachStore(t, func(t *testing.T, s remote.Store) { remotetest.Contract(t, s) })
}

// TestConcurrentCreates: exactly one racing create of each key wins,
// through the wrapper too.
func TestConcurrentCreates(t *testing.T) {
	eachStore(t, func(t *testing.T, s remote.Store) { remotetest.ConcurrentCreates(t, s) })
}

// TestConcurrentRanges: goroutines read ranges of objects (sharing the
// store's header cache) while another replaces them; every read is either
// the old or the new object's bytes, never an error or other bytes.
func TestConcurrentRanges(t *testing.T) {
	ctx := context.Background()
	k, _ := newKey(t)
	s := sealed.New(memStore(t), ring(t, k))
	const objs = 4
	versions := [2][objs][]byte{}
	for v := range versions {
		for i := range objs {
			versions[v][i] = randBytes(t, 3*C+100)
		}
	}
	for i := range objs {
		if err := s.Put(ctx, fmt.Sprint("o/", i), versions[0][i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 60 {
				i := (r + n) % objs
				off := int64((n * 7919) % (3*C + 100))
				got, err := s.GetRange(ctx, fmt.Sprint("o/", i), off, 5000)
				if err != nil {
					errs <- err
					return
				}
				end := min(int(off)+5000, 3*C+100)
				if !bytes.Equal(got, versions[0][i][off:end]) && !bytes.Equal(got, versions[1][i][off:end]) {
					errs <- fmt.Errorf("o/%d at %d: other bytes", i, off)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range objs {
			if err := s.Put(ctx, fmt.Sprint("o/", i), versions[1][i]); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
