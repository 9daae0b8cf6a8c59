package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// cutPage is the page commit lsn writes (at index lsn % 64).
func cutPage(vol string, lsn uint64) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "%s commit %08d;", vol, lsn), 100)
}

// TestCutManifest builds a store through many memtable flushes, closes it,
// cuts its MANIFEST at positions across the file and opens it, read-write
// and read-only: Open fails, or every volume reads, at every LSN up to its
// head, exactly what was written (a cut MANIFEST made Pebble open the
// tables of an older state under a newer write-ahead log: without the check
// at Open, reads returned older versions of pages).
//
//echostore:fault
func TestCutManifest(t *testing.T) {
	for _, compactions := range []bool{false, true} {
		t.Run(fmt.Sprintf("compactions=%v", compactions), func(t *testing.T) {
			testCutManifest(t, compactions)
		})
	}
}

func testCutManifest(t *testing.T, compactions bool) {
	ctx := context.Background()
	if !compactions {
		tunePebble = func(o *pebble.Options) { o.DisableAutomaticCompactions, o.L0StopWritesThreshold = true, 1000 }
		defer func() { tunePebble = nil }()
	}
	const n = 300
	vols := []string{"disk", "other"}
	src := filepath.Join(t.TempDir(), "graft")
	st, err := Open(ctx, src, Options{MemTableSize: 64 << 10, Ballast: -1}) // no ballast: every cut copies the whole directory
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range vols {
		mustCreate(t, st, name)
	}
	for l := uint64(1); l <= n; l++ {
		for _, name := range vols {
			v, _ := st.Volume(ctx, volName(name))
			commitPages(t, v, map[uint64][]byte{l % 64: cutPage(name, l)}, nil)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	var manifest string
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if files[e.Name()], err = os.ReadFile(filepath.Join(src, e.Name())); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.Name(), "MANIFEST-") {
			manifest = e.Name()
		}
	}
	outcomes := map[string]int{}
	size := len(files[manifest])
	step := 3
	if raceEnabled {
		step = 11
	}
	for cut := 0; cut < size; cut += step {
		for _, ro := range []bool{false, true} {
			fs := vfs.NewMem()
			if err := fs.MkdirAll("/g", 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range files {
				if name == manifest {
					b = b[:cut]
				}
				f, err := fs.Create("/g/"+name, vfs.WriteCategoryUnspecified)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(b); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			s, err := Open(ctx, "/g", Options{FS: fs, ReadOnly: ro})
			if err != nil {
				var mc *MissingCommitsError
				switch {
				case errors.As(err, &mc):
					if !errors.Is(err, ErrCorrupt) || mc.From > mc.To || mc.To >= mc.Head || mc.Head > n ||
						!strings.Contains(err.Error(), "volume pull "+mc.Volume) {
						t.Fatalf("MANIFEST cut at %d: %+v: %v", cut, *mc, err)
					}
					outcomes["refused: commits missing below the head (MissingCommitsError)"]++
				case errors.Is(err, ErrCorrupt), pebble.IsCorruptionError(err):
					outcomes["refused: corrupt (ErrCorrupt or Pebble's corruption error)"]++
				case errors.Is(err, iofs.ErrNotExist):
					outcomes["refused by Pebble: a table the MANIFEST names does not exist"]++
				default:
					t.Fatalf("MANIFEST cut at %d, read-only %v: untyped error: %v", cut, ro, err)
				}
				continue
			}
			for _, name := range vols {
				v, err := s.Volume(ctx, volName(name))
				if errors.Is(err, ErrVolumeNotFound) {
					continue
				} else if err != nil {
					t.Fatal(err)
				}
				for l := max(v.Info().Horizon, 1); l <= v.Head(); l++ {
					snap, err := v.SnapshotAt(ctx, l)
					if err != nil {
						t.Fatal(err)
					}
					b, err := snap.Get(ctx, l%64)
					snap.Close()
					if err != nil || !bytes.Equal(b, cutPage(name, l)) {
						t.Fatalf("MANIFEST cut at %d of %d, read-only %v: volume %s, page %d at LSN %d: %.30q, %v: not what LSN %d wrote",
							cut, size, ro, name, l%64, l, b, err, l)
					}
				}
			}
			outcomes["opened, every read as written"]++
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d cuts of a %d-byte MANIFEST, each opened read-write and read-only: %v", (size+step-1)/step, size, outcomes)
	if !compactions && outcomes["refused: commits missing below the head (MissingCommitsError)"] == 0 {
		t.Fatal("no cut lost flushed tables under a newer log: the test no longer builds the case it is for")
	}
	if !compactions && outcomes["opened, every read as written"] == 0 {
		t.Fatal("no cut opened")
	}
}
