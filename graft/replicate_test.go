package graft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

var bucketSeq atomic.Int64

// remotes returns the remotes replication is tested against: file:// and,
// when its binary is present, a fresh bucket of the package's MinIO.
func remotes(t *testing.T) map[string]func(t *testing.T) (remote.Store, string) {
	return map[string]func(t *testing.T) (remote.Store, string){
		"file": func(t *testing.T) (remote.Store, string) {
			u := "file://" + t.TempDir()
			return openRemote(t, u), u
		},
		"minio": func(t *testing.T) (remote.Store, string) {
			m := servers.MinIO(t)
			for _, kv := range m.Env() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
			name = fmt.Sprintf("%.40s-%d", strings.Trim(name, "-"), bucketSeq.Add(1))
			if err := m.CreateBucket(context.Background(), name); err != nil {
				t.Fatal(err)
			}
			u := m.URL(name)
			return openRemote(t, u), u
		},
	}
}

func openRemote(t testing.TB, u string) remote.Store {
	t.Helper()
	rs, err := remote.Open(context.Background(), u, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return rs
}

// replPages returns the pages commit n of the test schedule writes: a few
// small pages every time, and every third commit a run of 4 KiB pages
// large enough to go to a segment (several frames).
func replPages(seed, n uint64) map[uint64][]byte {
	rng := rand.New(rand.NewPCG(seed, n))
	out := map[uint64][]byte{}
	for k := 0; k < 3; k++ {
		b := make([]byte, 10+rng.IntN(100))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[uint64(rng.IntN(500))] = b
	}
	if n%3 == 0 {
		base := uint64(rng.IntN(200))
		for i := uint64(0); i < 100; i++ {
			b := bytes.Repeat([]byte{byte(n), byte(i)}, 2048)
			b[0] = byte(rng.Uint32())
			out[base+i] = b
		}
	}
	out[ArchiveBase+n] = []byte(fmt.Sprintf("archive %d", n))
	return out
}

// readVolume returns every page and the metadata key "n" of v at lsn.
func readVolume(t testing.TB, v *Volume, lsn uint64) (map[uint64][]byte, string) {
	t.Helper()
	ctx := context.Background()
	snap, err := v.SnapshotAt(ctx, lsn)
	if err != nil {
		t.Fatalf("volume %s: snapshot at %d: %v", v.Name(), lsn, err)
	}
	defer snap.Close()
	pages := map[uint64][]byte{}
	it := snap.Scan(ctx, 0, ^uint64(0))
	for it.Next() {
		pages[it.Index()] = bytes.Clone(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatalf("volume %s: scan at %d: %v", v.Name(), lsn, err)
	}
	for i, p := range pages { // Get agrees with Scan
		if g := mustGet(t, snap, i); !bytes.Equal(g, p) {
			t.Fatalf("volume %s at %d: Get(%d) differs from Scan", v.Name(), lsn, i)
		}
	}
	m, err := snap.Meta(ctx, "n")
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	return pages, string(m)
}

func samePages(t testing.TB, what string, a, b map[uint64][]byte) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d pages, want %d", what, len(a), len(b))
	}
	for i, p := range b {
		if !bytes.Equal(a[i], p) {
			t.Fatalf("%s: page %d differs", what, i)
		}
	}
}

// TestReplicateFollow: a writer commits and pushes (several local commits
// per push), a follower in another store pulls after each push and serves
// byte-identical reads (Scan and Get) at every LSN it has; a fresh follower
// after a checkpoint starts there and reads the head. Against file:// and
// MinIO.
func TestReplicateFollow(t *testing.T) {
	for name, mk := range remotes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rs, _ := mk(t)
			w := openMem(t, nil, Options{Remote: rs})
			f := openMem(t, nil, Options{Remote: rs})
			wv := mustCreate(t, w, "repl")
			fv := mustCreate(t, f, "repl")
			type point struct{ writer, follower uint64 }
			var points []point
			n := uint64(0)
			for push := 0; push < 8; push++ {
				for k := 0; k <= push%3; k++ {
					n++
					commitPages(t, wv, replPages(1, n), map[string]string{"n": fmt.Sprint(n)})
				}
				sp, err := wv.Push(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if sp.Local != wv.Head() || wv.Info().RemoteLSN != sp.Remote || sp.Remote != uint64(push+1) {
					t.Fatalf("push %d: sync point %+v, info %+v", push, sp, wv.Info())
				}
				fsp, err := fv.Pull(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if fsp.Remote != sp.Remote || fsp.Hash != sp.Hash || fsp.Local != fv.Head() {
					t.Fatalf("follower at %+v, writer at %+v", fsp, sp)
				}
				points = append(points, point{sp.Local, fv.Head()})
			}
			for _, p := range points { // every LSN the follower has
				wp, wm := readVolume(t, wv, p.writer)
				fp, fm := readVolume(t, fv, p.follower)
				samePages(t, fmt.Sprintf("follower LSN %d vs writer LSN %d", p.follower, p.writer), fp, wp)
				if wm != fm {
					t.Fatalf("metadata %q, want %q", fm, wm)
				}
			}
			if _, _, err := mustLog(t, rs, "repl").Check(ctx); err != nil {
				t.Fatal(err)
			}
			// A fresh follower after a checkpoint starts at the checkpoint.
			l, _ := remote.NewLog(rs, volName("repl"))
			if _, err := l.WriteCheckpoint(ctx); err != nil {
				t.Fatal(err)
			}
			cs := remote.NewCountingStore(rs)
			f2 := openMem(t, nil, Options{Remote: cs})
			fv2 := mustCreate(t, f2, "repl")
			if _, err := fv2.Pull(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if fv2.Head() != 1 {
				t.Fatalf("fresh follower applied %d commits, want 1 (the checkpoint)", fv2.Head())
			}
			wp, _ := readVolume(t, wv, wv.Head())
			fp, fm := readVolume(t, fv2, 1)
			samePages(t, "fresh follower from a checkpoint", fp, wp)
			if fm != fmt.Sprint(n) {
				t.Fatalf("metadata %q, want %d", fm, n)
			}
			if _, err := fv.Pull(ctx, nil); err != nil { // the old follower applies the checkpoint
				t.Fatal(err)
			}
			fp, _ = readVolume(t, fv, fv.Head())
			samePages(t, "follower after the checkpoint", fp, wp)
			if i := fv.Info(); i.Pages != uint64(len(wp)) || i.Pages != wv.Info().Pages || i.Bytes != wv.Info().Bytes {
				t.Fatalf("follower info %+v, writer %+v", i, wv.Info())
			}
		})
	}
}

// bigVolume commits pages 0..n-1 of 4 KiB (half random) in one commit.
func bigVolume(t testing.TB, v *Volume, n int, seed uint64) map[uint64][]byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	pages := map[uint64][]byte{}
	for i := 0; i < n; i++ {
		b := make([]byte, 4096)
		for j := 0; j < 2048; j++ {
			b[j] = byte(rng.Uint32())
		}
		pages[uint64(i)] = b
	}
	commitPages(t, v, pages, nil)
	return pages
}

// TestLazyFaults: a follower's first read of a page is one ranged GET of
// its frame, and every other page of that frame is then served with no
// request; Scan fetches each frame once; Hydrate fetches the rest and a
// second pass costs nothing. Without a remote, an unfetched page fails
// typed, naming the volume and the page.
func TestLazyFaults(t *testing.T) {
	ctx := context.Background()
	rs := openRemote(t, "file://"+t.TempDir())
	w := openMem(t, nil, Options{Remote: rs})
	wv := mustCreate(t, w, "lazy")
	want := bigVolume(t, wv, 256, 1) // 4 frames of 64 pages
	if _, err := wv.Push(ctx); err != nil {
		t.Fatal(err)
	}
	cs := remote.NewCountingStore(rs)
	fs := vfs.NewMem()
	f := openMem(t, fs, Options{})
	fv := mustCreate(t, f, "lazy")
	f.AttachRemote(cs)
	if _, err := fv.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := fv.Unfetched(ctx); n != 4 {
		t.Fatalf("%d unfetched frames, want 4", n)
	}
	snap, err := fv.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs.Reset()
	if !bytes.Equal(mustGet(t, snap, 5), want[5]) {
		t.Fatal("page 5 differs")
	}
	if c := cs.Counts(); c.GetRange != 1 || c.Total() != 1 {
		t.Fatalf("first read of a frame: %+v, want one ranged GET", c)
	}
	for i := uint64(0); i < 64; i++ {
		if !bytes.Equal(mustGet(t, snap, i), want[i]) {
			t.Fatalf("page %d differs", i)
		}
	}
	if c := cs.Counts(); c.Total() != 1 {
		t.Fatalf("reads of the rest of the frame: %+v, want no more requests", c)
	}
	got, _ := readVolume(t, fv, snap.LSN()) // Scan: the three other frames, once each
	samePages(t, "follower", got, want)
	if c := cs.Counts(); c.GetRange != 4 || c.Total() != 4 {
		t.Fatalf("scan: %+v, want 4 ranged GETs in all", c)
	}
	readVolume(t, fv, snap.LSN())
	if err := fv.Hydrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if c := cs.Counts(); c.Total() != 4 {
		t.Fatalf("second pass and hydrate: %+v, want no more requests", c)
	}
	snap.Close()

	// Another follower hydrates fully, then reads with no request.
	cs2 := remote.NewCountingStore(rs)
	f2 := openMem(t, nil, Options{Remote: cs2})
	fv2 := mustCreate(t, f2, "lazy")
	if _, err := fv2.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var calls int
	if err := fv2.Hydrate(ctx, func(done, total int) { calls++ }); err != nil {
		t.Fatal(err)
	}
	if calls != 4 || cs2.Counts().GetRange != 4 {
		t.Fatalf("hydrate: %d progress calls, %+v", calls, cs2.Counts())
	}
	cs2.Reset()
	got, _ = readVolume(t, fv2, fv2.Head())
	samePages(t, "hydrated follower", got, want)
	if c := cs2.Counts(); c.Total() != 0 {
		t.Fatalf("reads after hydrate: %+v", c)
	}

	// Without a remote: a typed error naming volume and page.
	f3 := openMem(t, nil, Options{})
	fv3 := mustCreate(t, f3, "lazy")
	f3.AttachRemote(rs)
	if _, err := fv3.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f3.remote.Store(nil)
	snap3, err := fv3.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap3.Close()
	_, err = snap3.Get(ctx, 70)
	var ue *UnfetchedError
	if !errors.As(err, &ue) || !errors.Is(err, ErrNoRemote) || ue.Page != 70 || !strings.Contains(err.Error(), `"lazy"`) {
		t.Fatalf("read without a remote: %v", err)
	}
}

// TestDivergedAndReset: two engines follow one volume and commit from the
// same base; both push at once: exactly one wins each remote LSN, the other
// gets a *DivergedError (remote.ErrDiverged) that names the way out, cannot
// pull either, and after Reset serves the winner's state and pushes again.
// The remote chain verifies after every round.
func TestDivergedAndReset(t *testing.T) {
	ctx := context.Background()
	rs := openRemote(t, "file://"+t.TempDir())
	a := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "fork")
	b := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "fork")
	commitPages(t, a, map[uint64][]byte{1: []byte("base")}, nil)
	if _, err := a.Push(ctx); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 10; round++ {
		for _, v := range []*Volume{a, b} {
			if _, err := v.Pull(ctx, nil); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		commitPages(t, a, map[uint64][]byte{2: []byte(fmt.Sprint("a", round))}, map[string]string{"n": "a"})
		large := map[uint64][]byte{}
		if round%2 == 1 { // a segment too
			for i := uint64(0); i < 40; i++ {
				large[100+i] = bytes.Repeat([]byte{byte(round)}, 4096)
			}
		}
		large[2] = []byte(fmt.Sprint("b", round))
		commitPages(t, b, large, map[string]string{"n": "b"})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k, v := range []*Volume{a, b} {
			wg.Go(func() { _, errs[k] = v.Push(ctx) })
		}
		wg.Wait()
		won := 0
		var loser *Volume
		for k, err := range errs {
			var de *DivergedError
			switch {
			case err == nil:
				won++
			case errors.As(err, &de) && errors.Is(err, remote.ErrDiverged) && strings.Contains(err.Error(), "echostore volume reset fork --to-remote"):
				loser = []*Volume{a, b}[k]
			default:
				t.Fatalf("round %d: push: %v", round, err)
			}
		}
		if won != 1 || loser == nil {
			t.Fatalf("round %d: %d winners (%v)", round, won, errs)
		}
		winner := a
		if loser == a {
			winner = b
		}
		if _, err := loser.Pull(ctx, nil); !errors.Is(err, remote.ErrDiverged) {
			t.Fatalf("round %d: pull of the loser: %v", round, err)
		}
		dropped, err := loser.Reset(ctx, true)
		if err != nil || dropped != 1 {
			t.Fatalf("round %d: reset dropped %d: %v", round, dropped, err)
		}
		wp, wm := readVolume(t, winner, winner.Head())
		lp, lm := readVolume(t, loser, loser.Head())
		samePages(t, "loser after reset", lp, wp)
		if wm != lm || loser.Info().Pages != winner.Info().Pages || loser.Info().Bytes != winner.Info().Bytes {
			t.Fatalf("round %d: loser %+v %q, winner %+v %q", round, loser.Info(), lm, winner.Info(), wm)
		}
		if p, _ := loser.Pending(ctx); p != nil {
			t.Fatal("pending commit survived the reset")
		}
		if _, head, err := mustLog(t, rs, "fork").Check(ctx); err != nil || head != uint64(round+2) {
			t.Fatalf("round %d: remote log head %d: %v", round, head, err)
		}
	}
}

// lossyStore loses the reply of the next conditional create: the object
// lands, the caller sees an error.
type lossyStore struct {
	remote.Store
	lose atomic.Bool
}

func (s *lossyStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, key, data)
	if err == nil && key != IdentityKey && s.lose.CompareAndSwap(true, false) {
		return errors.New("connection reset by peer")
	}
	return err
}

// TestPushRetryAfterLostReply: a push whose reply is lost is retried from
// the recorded pending commit; the retry finds its own commit and succeeds,
// and the remote holds it once.
func TestPushRetryAfterLostReply(t *testing.T) {
	ctx := context.Background()
	ls := &lossyStore{Store: openRemote(t, "file://"+t.TempDir())}
	v := mustCreate(t, openMem(t, nil, Options{Remote: ls}), "retry")
	for round := 0; round < 3; round++ {
		pages := map[uint64][]byte{1: []byte(fmt.Sprint(round))}
		if round == 1 {
			for i := uint64(10); i < 40; i++ {
				pages[i] = bytes.Repeat([]byte{byte(i)}, 4096)
			}
		}
		commitPages(t, v, pages, nil)
		ls.lose.Store(true)
		if _, err := v.Push(ctx); err == nil {
			t.Fatal("push with a lost reply succeeded")
		}
		if p, _ := v.Pending(ctx); p == nil {
			t.Fatal("no pending commit recorded")
		}
		sp, err := v.Push(ctx)
		if err != nil || sp.Remote != uint64(round+1) || sp.Local != v.Head() {
			t.Fatalf("retry: %+v, %v", sp, err)
		}
		if p, _ := v.Pending(ctx); p != nil {
			t.Fatal("pending commit not cleared")
		}
	}
	if _, head, err := mustLog(t, ls, "retry").Check(ctx); err != nil || head != 3 {
		t.Fatalf("remote head %d: %v", head, err)
	}
}

// TestCorruptRemoteRefused: a follower refuses a corrupted segment frame on
// page fault and a corrupted commit object on pull, with an error that
// names the checksum, and changes nothing.
//
//echostore:fault
func TestCorruptRemoteRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rs := openRemote(t, "file://"+dir)
	wv := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "bad")
	want := bigVolume(t, wv, 128, 2)
	if _, err := wv.Push(ctx); err != nil {
		t.Fatal(err)
	}
	fv := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "bad")
	if _, err := fv.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "segments", "bad", "*"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v: %v", segs, err)
	}
	flip(t, segs[0], 100)
	snap, _ := fv.Snapshot(ctx)
	_, err = snap.Get(ctx, 3)
	if !errors.Is(err, remote.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("corrupt frame: %v", err)
	}
	flip(t, segs[0], 100)
	if got := mustGet(t, snap, 3); !bytes.Equal(got, want[3]) {
		t.Fatal("page differs after the repair")
	}
	snap.Close()

	commitPages(t, wv, map[uint64][]byte{1: []byte("x")}, nil)
	if _, err := wv.Push(ctx); err != nil {
		t.Fatal(err)
	}
	flip(t, filepath.Join(dir, filepath.FromSlash(remote.LogKey("bad", 2))), 30)
	head := fv.Head()
	if _, err := fv.Pull(ctx, nil); !errors.Is(err, remote.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("corrupt commit: %v", err)
	}
	if fv.Head() != head || fv.Info().RemoteLSN != 1 {
		t.Fatalf("a refused commit changed the follower: %+v", fv.Info())
	}
}

func flip(t testing.TB, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustLog(t testing.TB, rs remote.Store, volume string) *remote.Log {
	t.Helper()
	l, err := remote.NewLog(rs, volName(volume))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLazyConcurrentReads: readers on a cold follower, forward and reverse
// scans and point reads at once, all get the writer's bytes, and each frame
// is fetched once (faults of a volume are serialised and re-check the
// cache).
func TestLazyConcurrentReads(t *testing.T) {
	ctx := context.Background()
	rs := openRemote(t, "file://"+t.TempDir())
	wv := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "conc")
	want := bigVolume(t, wv, 512, 3) // 8 frames
	if _, err := wv.Push(ctx); err != nil {
		t.Fatal(err)
	}
	cs := remote.NewCountingStore(rs)
	fv := mustCreate(t, openMem(t, nil, Options{Remote: cs}), "conc")
	if _, err := fv.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cs.Reset()
	snap, err := fv.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			switch g % 3 {
			case 0:
				it := snap.ScanReverse(ctx, 0, 1<<20)
				n := 511
				for it.Next() {
					if it.Index() != uint64(n) || !bytes.Equal(it.Value(), want[it.Index()]) {
						errs <- fmt.Errorf("reverse scan: page %d (want %d) differs", it.Index(), n)
						break
					}
					n--
				}
				if err := it.Close(); err != nil || n != -1 {
					errs <- fmt.Errorf("reverse scan ended at %d: %v", n, err)
				}
			case 1:
				got := map[uint64][]byte{}
				it := snap.Scan(ctx, 0, 1<<20)
				for it.Next() {
					got[it.Index()] = bytes.Clone(it.Value())
				}
				if err := it.Close(); err != nil || len(got) != len(want) {
					errs <- fmt.Errorf("scan: %d pages: %v", len(got), err)
				}
				for i, p := range got {
					if !bytes.Equal(p, want[i]) {
						errs <- fmt.Errorf("scan: page %d differs", i)
					}
				}
			default:
				rng := rand.New(rand.NewPCG(uint64(g), 0))
				for k := 0; k < 200; k++ {
					i := uint64(rng.IntN(512))
					if b, err := snap.Get(ctx, i); err != nil || !bytes.Equal(b, want[i]) {
						errs <- fmt.Errorf("Get(%d): %v", i, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := cs.Counts(); c.GetRange != 8 || c.Total() != 8 {
		t.Fatalf("%+v, want each of the 8 frames fetched once", c)
	}
}

// TestPushAfterGC: a volume whose commit records GC collected before its
// first push (keep-from unpinned) pushes every page and metadata key present
// at its head instead, and a follower reads the same; after the push,
// keep-from holds GC at the sync point.
func TestPushAfterGC(t *testing.T) {
	ctx := context.Background()
	rs := openRemote(t, "file://"+t.TempDir())
	wv := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "gc")
	for n := uint64(1); n <= 6; n++ {
		commitPages(t, wv, replPages(9, n), map[string]string{"n": fmt.Sprint(n), fmt.Sprint("k", n): "v"})
	}
	if st, err := wv.GC(ctx); err != nil || st.Horizon != wv.Head() {
		t.Fatalf("GC: %+v, %v", st, err)
	}
	if _, err := wv.Commits(ctx, 1, wv.Head()); !errors.Is(err, ErrSnapshotGone) {
		t.Fatalf("commit records still there: %v", err)
	}
	if _, err := wv.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if wv.Info().KeepFrom != wv.Head() {
		t.Fatalf("keep-from %d after a push at %d", wv.Info().KeepFrom, wv.Head())
	}
	fv := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "gc")
	if _, err := fv.Pull(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wp, wm := readVolume(t, wv, wv.Head())
	fp, fm := readVolume(t, fv, fv.Head())
	samePages(t, "follower", fp, wp)
	snap, _ := fv.Snapshot(ctx)
	defer snap.Close()
	if k1, err := snap.Meta(ctx, "k1"); wm != fm || err != nil || string(k1) != "v" {
		t.Fatalf("metadata %q %q, k1 %q %v", fm, wm, k1, err)
	}
}

// TestResetNeverPushed: a volume that never pushed, whose history GC
// collected, loses the race for remote LSN 1; Reset drops all of it and
// follows the remote.
func TestResetNeverPushed(t *testing.T) {
	ctx := context.Background()
	rs := openRemote(t, "file://"+t.TempDir())
	a := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "first")
	b := mustCreate(t, openMem(t, nil, Options{Remote: rs}), "first")
	commitPages(t, a, map[uint64][]byte{1: []byte("a")}, nil)
	for n := 0; n < 3; n++ {
		commitPages(t, b, map[uint64][]byte{uint64(n): []byte("b")}, nil)
	}
	if _, err := b.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Push(ctx); err != nil {
		t.Fatal(err)
	}
	var de *DivergedError
	if _, err := b.Push(ctx); !errors.As(err, &de) {
		t.Fatalf("push from a stale base: %v", err)
	}
	if n, err := b.Reset(ctx, true); err != nil || n != 3 {
		t.Fatalf("reset dropped %d: %v", n, err)
	}
	got, _ := readVolume(t, b, b.Head())
	if i := b.Info(); len(got) != 1 || string(got[1]) != "a" || i.Pages != 1 || i.Bytes != 1 || i.RemoteLSN != 1 {
		t.Fatalf("after reset: %v, %+v", got, i)
	}
}

// volName returns volume name s checked; it panics if s is not a valid
// volume name (test names are made valid).
func volName(s string) names.Volume {
	v, err := names.ParseVolume(s)
	if err != nil {
		panic(err)
	}
	return v
}
