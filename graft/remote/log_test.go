package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/echostore/echostore/names"
)

// TestAppendInlineAndSegment: a small commit is exactly one conditional
// PUT; a large one uploads a segment, then the conditional PUT; pages read
// back byte for byte, a frame fault being one ranged GET.
func TestAppendInlineAndSegment(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		cs := NewCountingStore(s)
		l := mustLog(t, cs, "vol.a")
		small := draftOn(Entry{}, 16, 1024, "w") // 16 KiB: inline
		e1, err := l.Append(ctx, small)
		if err != nil {
			t.Fatal(err)
		}
		if c := cs.Counts(); c.PutIfAbsent != 1 || c.Total() != 1 {
			t.Fatalf("small commit cost %+v, want one conditional PUT", c)
		}
		if len(e1.Commit.Segments) != 0 || len(e1.Commit.Inline) != 16 {
			t.Fatalf("small commit not inline: %d segments", len(e1.Commit.Segments))
		}
		cs.Reset()
		big := draftOn(e1, 200, 4096, "w") // 800 KiB: 4 frames of 64 pages, 1 of 8
		e2, err := l.Append(ctx, big)
		if err != nil {
			t.Fatal(err)
		}
		if c := cs.Counts(); c.Put != 1 || c.PutIfAbsent != 1 || c.Total() != 2 {
			t.Fatalf("large commit cost %+v, want one segment PUT and one conditional PUT", c)
		}
		if n := len(e2.Commit.Segments); n != 1 || len(e2.Commit.Segments[0].Frames) != 4 {
			t.Fatalf("large commit: %d segments, frames %v", n, e2.Commit.Segments)
		}
		for _, f := range e2.Commit.Segments[0].Frames {
			if len(f.Pages) > FramePages || f.RawLength > FrameBytes {
				t.Fatalf("frame beyond bounds: %d pages, %d bytes", len(f.Pages), f.RawLength)
			}
		}
		got, err := l.Read(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got.Hash != e2.Hash || got.Commit.Prev != e1.Hash || got.Commit.LocalTo != big.LocalTo {
			t.Fatalf("read back %+v", got)
		}
		cs.Reset()
		want := map[uint64]uint64{}
		for _, p := range big.Pages {
			want[p.Index] = 2
		}
		verifyPages(t, l, got, func(uint64) int { return 4096 }, want)
		if c := cs.Counts(); c.GetRange != 200 || c.Total() != 200 {
			t.Fatalf("200 page faults cost %+v, want 200 ranged GETs", c)
		}
		e1r, _ := l.Read(ctx, 1)
		if string(e1r.Commit.Meta["writer"]) != "w" {
			t.Fatalf("metadata lost: %v", e1r.Commit.Meta)
		}
	})
}

// TestTwoWritersSameBase: two writers publish different commits from the
// same base at once, round after round. Exactly one wins each LSN; the
// other gets a *DivergedError naming it; the winner's retry is a success;
// the log's chain verifies end to end (invariant 6).
func TestTwoWritersSameBase(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		l := mustLog(t, s, "vol.b")
		var base Entry
		const rounds = 25
		for round := range rounds {
			var ps [2]Prepared
			for w := range 2 {
				d := draftOn(base, 2+w, 100+round, fmt.Sprint("writer ", w))
				if round%5 == 4 {
					d = draftOn(base, 20, 8192, fmt.Sprint("writer ", w)) // segments
				}
				var err error
				if ps[w], err = l.Prepare(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			var errs [2]error
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); <-start; errs[w] = l.Publish(ctx, ps[w]) }()
			}
			close(start)
			wg.Wait()
			win := -1
			for w, err := range errs {
				var de *DivergedError
				switch {
				case err == nil:
					if win >= 0 {
						t.Fatalf("round %d: both writers won lsn %d", round, base.LSN()+1)
					}
					win = w
				case errors.As(err, &de) && errors.Is(err, ErrDiverged):
					if de.LSN != base.LSN()+1 || de.Volume != "vol.b" {
						t.Fatalf("diverged error names %s@%d", de.Volume, de.LSN)
					}
				default:
					t.Fatalf("round %d writer %d: %v", round, w, err)
				}
			}
			if win < 0 {
				t.Fatalf("round %d: nobody won", round)
			}
			if err := l.Publish(ctx, ps[win]); err != nil {
				t.Fatalf("winner's retry: %v", err)
			}
			if err := l.Publish(ctx, ps[1-win]); !errors.Is(err, ErrDiverged) {
				t.Fatalf("loser's retry: %v", err)
			}
			base = Entry{Commit: ps[win].Commit, Hash: ps[win].Hash}
		}
		oldest, head, err := l.Check(ctx)
		if err != nil || oldest != 1 || head != rounds {
			t.Fatalf("Check = %d..%d, %v", oldest, head, err)
		}
	})
}

// TestTwoWritersRace: two goroutine writers each loop head-read, append,
// until each has won its share; exactly one wins each LSN and the chain
// verifies.
func TestTwoWritersRace(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		const each = 15
		var mu sync.Mutex
		owner := map[uint64]int{}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := mustLog(t, s, "vol.c")
				lost, err := pushWins(ctx, l, each, fmt.Sprint("writer ", w), func(e Entry) {
					mu.Lock()
					defer mu.Unlock()
					if o, ok := owner[e.LSN()]; ok {
						errs <- fmt.Errorf("lsn %d won by %d and %d", e.LSN(), o, w)
					}
					owner[e.LSN()] = w
				})
				if err != nil {
					errs <- err
				}
				t.Logf("writer %d lost %d races", w, lost)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		_, head, err := mustLog(t, s, "vol.c").Check(ctx)
		if err != nil || head != 2*each || len(owner) != 2*each {
			t.Fatalf("head %d, %d owned, %v", head, len(owner), err)
		}
	})
}

// pushWins appends commits on top of the current head until it has won n,
// calling won for each; it returns how many races it lost.
func pushWins(ctx context.Context, l *Log, n int, who string, won func(Entry)) (lost int, err error) {
	for wins := 0; wins < n; {
		base, err := l.HeadCommit(ctx)
		if err != nil {
			return lost, err
		}
		e, err := l.Append(ctx, draftOn(base, 3, 200, who))
		if errors.Is(err, ErrDiverged) {
			lost++
			continue
		}
		if err != nil {
			return lost, err
		}
		wins++
		won(e)
	}
	return lost, nil
}

// TestHeadIsOneList counts requests: the head is one LIST, the head commit
// one LIST and one GET, the newest checkpoint one LIST and one GET.
func TestHeadIsOneList(t *testing.T) {
	for name, open := range map[string]func(testing.TB) (Store, string){"file": fileStore, "mem": memStore} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := open(t)
			cs := NewCountingStore(s)
			l := mustLog(t, cs, "vol.d")
			if lsn, err := l.Head(ctx); err != nil || lsn != 0 {
				t.Fatalf("empty head = %d, %v", lsn, err)
			}
			var base Entry
			for i := range 60 {
				d := draftOn(base, 1, 10, "")
				d.Checkpoint = i%20 == 5
				var err error
				if base, err = l.Append(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			cs.Reset()
			lsn, err := l.Head(ctx)
			if c := cs.Counts(); err != nil || lsn != 60 || c.List != 1 || c.Total() != 1 {
				t.Fatalf("Head = %d, %v with %+v; want 60 with one LIST", lsn, err, c)
			}
			cs.Reset()
			e, err := l.HeadCommit(ctx)
			if c := cs.Counts(); err != nil || e.Hash != base.Hash || c.List != 1 || c.Get != 1 || c.Total() != 2 {
				t.Fatalf("HeadCommit with %+v, %v", c, err)
			}
			cs.Reset()
			cp, err := l.LatestCheckpoint(ctx)
			if c := cs.Counts(); err != nil || cp.LSN() != 46 || c.List != 1 || c.Get != 1 || c.Total() != 2 {
				t.Fatalf("LatestCheckpoint = %d with %+v, %v", cp.LSN(), c, err)
			}
		})
	}
}

// TestSinceVerifiesChain: Since yields the commits above a sync point in
// order and detects a wrong base or a rewritten log.
func TestSinceVerifiesChain(t *testing.T) {
	ctx := context.Background()
	s, _ := fileStore(t)
	l := mustLog(t, s, "vol.e")
	var es []Entry
	base := Entry{}
	for range 10 {
		e, err := l.Append(ctx, draftOn(base, 2, 50, "w"))
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		base = e
	}
	var got []uint64
	for e, err := range l.Since(ctx, 3, es[2].Hash) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.LSN())
	}
	if fmt.Sprint(got) != "[4 5 6 7 8 9 10]" {
		t.Fatalf("Since(3) gave %v", got)
	}
	n := 0
	for _, err := range l.Since(ctx, 3, Hash{}) { // hash learned by reading lsn 3
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 7 {
		t.Fatalf("Since(3, zero) gave %d", n)
	}
	for _, err := range l.Since(ctx, 3, es[1].Hash) {
		if !errors.Is(err, ErrDiverged) {
			t.Fatalf("Since from a wrong base: %v", err)
		}
		break
	}
	// Rewrite lsn 6 behind the fence's back: readers must notice.
	if err := s.Delete(ctx, LogKey("vol.e", 6)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, draftOn(es[4], 1, 7, "forger")); err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range l.Since(ctx, 0, Hash{}) {
		last = err
	}
	var de *DivergedError
	if !errors.As(last, &de) || de.LSN != 7 {
		t.Fatalf("Since over a rewritten log: %v", last)
	}
	if _, _, err := l.Check(ctx); !errors.Is(err, ErrDiverged) {
		t.Fatalf("Check over a rewritten log: %v", err)
	}
}

// subset returns the frames of ref restricted to pages keep accepts.
func subset(ref SegmentRef, keep func(uint64) bool) SegmentRef {
	out := SegmentRef{Key: ref.Key}
	for _, f := range ref.Frames {
		g := f
		g.Pages = nil
		for _, p := range f.Pages {
			if keep(p.Index) {
				g.Pages = append(g.Pages, p)
			}
		}
		if len(g.Pages) > 0 {
			out.Frames = append(out.Frames, g)
		}
	}
	return out
}

// TestCheckpointAndGC: checkpoints reuse frames of older segments; GC
// deletes a segment only commits below the horizon reference and keeps one
// the checkpoint references; after trimming, a follower below the horizon
// gets ErrTrimmed and one from the checkpoint reads every page.
func TestCheckpointAndGC(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		l := mustLog(t, s, "vol.f")
		const size = 24 << 10
		all := func(uint64) bool { return true }
		app := func(base Entry, d Draft) Entry {
			d.LSN, d.Prev = base.LSN()+1, base.Hash
			e, err := l.Append(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		e1 := app(Entry{}, Draft{Pages: pagesAt(1, 0, 1, 16, size)}) // S1: pages 0..15
		e2 := app(e1, Draft{Pages: pagesAt(2, 0, 1, 8, size)})       // S2: 0..7
		s1, s2 := e1.Commit.Segments[0], e2.Commit.Segments[0]
		e3 := app(e2, Draft{Checkpoint: true, Reuse: []SegmentRef{
			subset(s2, all), subset(s1, func(i uint64) bool { return i >= 8 })}})
		e4 := app(e3, Draft{Pages: pagesAt(4, 100, 1, 8, size)}) // S3: 100..107
		e5 := app(e4, Draft{Pages: pagesAt(5, 0, 1, 8, size)})   // S4: 0..7
		s3, s4 := e4.Commit.Segments[0], e5.Commit.Segments[0]
		e6 := app(e5, Draft{Checkpoint: true, Meta: map[string][]byte{"w": []byte("9")},
			Pages: []Page{{Index: 200, Data: []byte("inline in a checkpoint")}},
			Reuse: []SegmentRef{subset(s4, all), subset(s1, func(i uint64) bool { return i >= 8 }), subset(s3, all)}})
		// An orphan: uploaded by a prepare never published.
		orphan, err := l.Prepare(ctx, Draft{LSN: 7, Prev: e6.Hash, Pages: pagesAt(7, 0, 1, 8, size)})
		if err != nil {
			t.Fatal(err)
		}
		exists := func(key string) bool {
			_, err := s.GetRange(ctx, key, 0, 1)
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			return err == nil
		}
		// Keeping two checkpoints, the horizon is lsn 3, which references
		// S2: only the unreferenced orphan goes.
		res, err := l.GC(ctx, GCOptions{KeepCheckpoints: 2})
		if err != nil || res.Horizon != 3 || res.SegmentsDeleted != 1 || exists(orphan.Commit.Segments[0].Key) || !exists(s2.Key) {
			t.Fatalf("GC keeping 2 checkpoints: %+v, %v", res, err)
		}
		orphan2, err := l.Prepare(ctx, Draft{LSN: 7, Prev: e6.Hash, Pages: pagesAt(8, 0, 1, 8, size)})
		if err != nil {
			t.Fatal(err)
		}
		// Horizon 6 with a grace of an hour: S2 is unreferenced now, but
		// young segments are spared; the log below 6 is trimmed.
		res, err = l.GC(ctx, GCOptions{KeepCheckpoints: 1, MinAge: time.Hour, TrimLog: true})
		if err != nil || res.Horizon != 6 || res.SegmentsDeleted != 0 || res.LogTrimmed != 5 || res.MarkersDeleted != 1 {
			t.Fatalf("GC with a grace period: %+v, %v", res, err)
		}
		res, err = l.GC(ctx, GCOptions{KeepCheckpoints: 1})
		if err != nil || res.Horizon != 6 || res.SegmentsDeleted != 2 {
			t.Fatalf("GC: %+v, %v", res, err)
		}
		if exists(s2.Key) || exists(orphan2.Commit.Segments[0].Key) {
			t.Fatalf("segment only below the horizon survived GC")
		}
		for _, k := range []string{s1.Key, s3.Key, s4.Key} {
			if !exists(k) {
				t.Fatalf("segment %s deleted but referenced by the checkpoint", k)
			}
		}
		// A fresh follower starts at the checkpoint and reads every page.
		cp, err := l.LatestCheckpoint(ctx)
		if err != nil || cp.Hash != e6.Hash {
			t.Fatalf("LatestCheckpoint: %v", err)
		}
		want := map[uint64]uint64{}
		for i := uint64(0); i < 8; i++ {
			want[i] = 5
		}
		for i := uint64(8); i < 16; i++ {
			want[i] = 1
		}
		for i := uint64(100); i < 108; i++ {
			want[i] = 4
		}
		refs := cp.Commit.Pages()
		if len(refs) != 25 || string(refs[24].Data) != "inline in a checkpoint" {
			t.Fatalf("checkpoint references %d pages", len(refs))
		}
		delete(want, 200)
		cp.Commit.Inline = nil
		verifyPages(t, l, cp, func(uint64) int { return size }, want)
		for _, err := range l.Since(ctx, 2, e2.Hash) {
			if !errors.Is(err, ErrTrimmed) {
				t.Fatalf("Since below the horizon: %v", err)
			}
			break
		}
		if _, err := l.Read(ctx, 3); !errors.Is(err, ErrTrimmed) {
			t.Fatalf("Read below the horizon: %v", err)
		}
		if oldest, head, err := l.Check(ctx); err != nil || oldest != 6 || head != 6 {
			t.Fatalf("Check after trim: %d..%d %v", oldest, head, err)
		}
		// The trimmed LSNs stay fenced: a stale writer cannot create them.
		if _, err := mustLog(t, s, "vol.f").Append(ctx, draftOn(Entry{}, 1, 10, "stale")); !errors.Is(err, ErrDiverged) {
			t.Fatalf("stale writer at lsn 1 after trim: %v", err)
		}
		if res, err := l.GC(ctx, GCOptions{TrimLog: true}); err != nil || res.LogTrimmed != 0 {
			t.Fatalf("second trim: %+v, %v", res, err)
		}
		e7, err := l.Append(ctx, draftOn(e6, 1, 10, "after gc"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for e, err := range l.Since(ctx, 6, e6.Hash) {
			if err != nil || e.Hash != e7.Hash {
				t.Fatalf("Since from the checkpoint: %v", err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("Since from the checkpoint gave %d", n)
		}
	})
}

// TestPrepareRejectsInvalid: invalid drafts fail with ErrInvalid before
// any request.
func TestPrepareRejectsInvalid(t *testing.T) {
	ctx := context.Background()
	s, _ := memStore(t)
	cs := NewCountingStore(s)
	l := mustLog(t, cs, "vol.g")
	big := pagesAt(1, 0, 1, 40, 4096)
	cases := map[string]Draft{
		"lsn 0":           {LSN: 0},
		"lsn 1 with prev": {LSN: 1, Prev: Hash{1}},
		"unsorted":        {LSN: 1, Pages: []Page{{Index: 2}, {Index: 1}}},
		"duplicate":       {LSN: 1, Pages: []Page{{Index: 2}, {Index: 2}}},
		"oversized":       {LSN: 1, Pages: []Page{{Index: 2, Data: make([]byte, MaxPageSize+1)}}},
		"reversed local":  {LSN: 1, LocalFrom: 5, LocalTo: 4},
		"bad meta":        {LSN: 1, Meta: map[string][]byte{"": nil}},
		"foreign segment": {LSN: 1, Reuse: []SegmentRef{{Key: "segments/other/0123456789abcdef0123456789abcdef", Frames: []FrameRef{{Length: 1, Pages: []PageLoc{{}}}}}}},
		"reuse overlaps":  {LSN: 1, Pages: big, Reuse: []SegmentRef{{Key: SegmentKey("vol.g", "0123456789abcdef0123456789abcdef"), Frames: []FrameRef{{Length: 1, RawLength: 1, Pages: []PageLoc{{Index: 3}}}}}}},
	}
	for name, d := range cases {
		if _, err := l.Append(ctx, d); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if c := cs.Counts(); c.Total() != 0 {
		t.Fatalf("invalid drafts made requests: %+v", c)
	}
	if _, err := NewLog(s, names.Volume{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewLog with no volume: %v", err)
	}
}

// TestCorruptObjectsInStore: corrupt or truncated objects in the store
// surface as ErrCorrupt from every read path.
//
//echostore:fault
func TestCorruptObjectsInStore(t *testing.T) {
	ctx := context.Background()
	s, _ := fileStore(t)
	l := mustLog(t, s, "vol.h")
	e1, err := l.Append(ctx, draftOn(Entry{}, 100, 4096, "w"))
	if err != nil {
		t.Fatal(err)
	}
	e2, err := l.Append(ctx, Draft{LSN: 2, Prev: e1.Hash, Checkpoint: true, Reuse: e1.Commit.Segments})
	if err != nil {
		t.Fatal(err)
	}
	seg := e1.Commit.Segments[0]
	segBytes, _ := s.Get(ctx, seg.Key)
	// Truncate the segment: the last frame's fault fails as corrupt.
	last := seg.Frames[len(seg.Frames)-1]
	if err := s.Put(ctx, seg.Key, segBytes[:last.Offset+last.Length-10]); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FetchFrame(ctx, seg.Key, last); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated segment: %v", err)
	}
	// Flip a byte inside the first frame.
	bad := append([]byte(nil), segBytes...)
	bad[seg.Frames[0].Offset+10] ^= 0x40
	if err := s.Put(ctx, seg.Key, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FetchFrame(ctx, seg.Key, seg.Frames[0]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped segment: %v", err)
	}
	// A commit object flipped, truncated, or moved to another LSN's key.
	b1, _ := s.Get(ctx, LogKey("vol.h", 1))
	for name, b := range map[string][]byte{"flipped": flip(b1, 40), "truncated": b1[:len(b1)/2], "empty": {}} {
		if err := s.Delete(ctx, LogKey("vol.h", 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIfAbsent(ctx, LogKey("vol.h", 1), b); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Read(ctx, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s commit: %v", name, err)
		}
	}
	b2, _ := s.Get(ctx, LogKey("vol.h", 2))
	if err := s.PutIfAbsent(ctx, LogKey("vol.h", 3), b2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(ctx, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("commit under another lsn's key: %v", err)
	}
	// A marker that names another hash.
	if err := s.Put(ctx, CheckpointKey("vol.h", 3, e2.Hash), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.LatestCheckpoint(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("marker for a corrupt commit: %v", err)
	}
	// Garbage in the log folder under a key that is no LSN.
	if err := s.Put(ctx, LogPrefix("vol.h")+"0zzz", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Head(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("head over a foreign key: %v", err)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i%len(c)] ^= 0x01
	return c
}

// TestPublishRefusesUnknownBase: a writer cannot fork the chain by
// building on a base the remote does not hold: its own commit that lost
// the race, a forged hash, or an LSN beyond the head. Nothing is created.
func TestPublishRefusesUnknownBase(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		a, b := mustLog(t, s, "vol.i"), mustLog(t, s, "vol.i")
		e1, err := a.Append(ctx, draftOn(Entry{}, 1, 10, "a"))
		if err != nil {
			t.Fatal(err)
		}
		pa, _ := a.Prepare(ctx, draftOn(e1, 1, 10, "a"))
		pb, _ := b.Prepare(ctx, draftOn(e1, 1, 10, "b"))
		if err := a.Publish(ctx, pa); err != nil {
			t.Fatal(err)
		}
		if err := b.Publish(ctx, pb); !errors.Is(err, ErrDiverged) {
			t.Fatalf("loser: %v", err)
		}
		lostBase := Entry{Commit: pb.Commit, Hash: pb.Hash}
		for name, d := range map[string]Draft{
			"on the loser's own commit": draftOn(lostBase, 1, 10, "b"),
			"on a forged hash":          {LSN: 3, Prev: Hash{7}},
			"beyond the head":           {LSN: 9, Prev: pa.Hash},
		} {
			fresh := mustLog(t, s, "vol.i")
			for _, l := range []*Log{b, fresh} {
				if _, err := l.Append(ctx, d); !errors.Is(err, ErrDiverged) {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
		if _, head, err := a.Check(ctx); err != nil || head != 2 {
			t.Fatalf("log after refused forks: head %d, %v", head, err)
		}
	})
}
