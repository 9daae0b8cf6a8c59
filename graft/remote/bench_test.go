package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func benchStore(b *testing.B, kind string) Store {
	var s Store
	switch kind {
	case "file":
		s, _ = fileStore(b)
	case "mem":
		s, _ = memStore(b)
	case "s3":
		s, _ = minioStore(b)
	}
	return s
}

// benchLog writes a log of commits commits; b must be the parent of the
// sub-benchmarks that use it, so that the store outlives them.
func benchLog(b *testing.B, kind string, commits int) (*CountingStore, *Log) {
	b.Helper()
	cs := NewCountingStore(benchStore(b, kind))
	l := mustLog(b, cs, "bench")
	ctx := context.Background()
	base := Entry{}
	for range commits {
		var err error
		if base, err = l.Append(ctx, draftOn(base, 1, 64, "")); err != nil {
			b.Fatal(err)
		}
	}
	return cs, l
}

// BenchmarkHeadLookup compares requests per head lookup on a 1000-commit
// log: one LIST (newest-first keys) against GETting LSN+1, +2, … until a
// miss, from a fresh follower (LSN 0) and from one 10 commits behind.
func BenchmarkHeadLookup(b *testing.B) {
	for _, kind := range []string{"mem", "file", "s3"} {
		cs, l := benchLog(b, kind, 1000)
		b.Run(kind+"/list", func(b *testing.B) {
			ctx := context.Background()
			cs.Reset()
			b.ResetTimer()
			for b.Loop() {
				if lsn, err := l.Head(ctx); err != nil || lsn != 1000 {
					b.Fatal(lsn, err)
				}
			}
			b.ReportMetric(float64(cs.Counts().Total())/float64(b.N), "requests/op")
		})
		for _, from := range []uint64{0, 990} {
			b.Run(fmt.Sprintf("%s/naive-from-%d", kind, from), func(b *testing.B) {
				ctx := context.Background()
				cs.Reset()
				b.ResetTimer()
				for b.Loop() {
					lsn := from
					for {
						if _, err := cs.Get(ctx, LogKey("bench", lsn+1)); errors.Is(err, ErrNotFound) {
							break
						} else if err != nil {
							b.Fatal(err)
						}
						lsn++
					}
					if lsn != 1000 {
						b.Fatal(lsn)
					}
				}
				b.ReportMetric(float64(cs.Counts().Total())/float64(b.N), "requests/op")
			})
		}
	}
}

// BenchmarkPutIfAbsent: one conditional create of a 1 KiB object (the size
// of a small commit) at a fresh key.
func BenchmarkPutIfAbsent(b *testing.B) {
	for _, kind := range []string{"mem", "file", "s3"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStore(b, kind)
			data := make([]byte, 1024)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if err := s.PutIfAbsent(ctx, fmt.Sprintf("p/%08d", i), data); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkFetchFrame: a page fault, one ranged GET of one frame of 64
// pages of 4 KiB (half random bytes), verified and decompressed.
func BenchmarkFetchFrame(b *testing.B) {
	for _, kind := range []string{"mem", "file", "s3"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStore(b, kind)
			ctx := context.Background()
			l := mustLog(b, s, "bench")
			rng := rand.New(rand.NewPCG(1, 2))
			pages := make([]Page, 4*FramePages)
			for i := range pages {
				d := make([]byte, 4096)
				for j := range d[:2048] {
					d[j] = byte(rng.Uint32())
				}
				pages[i] = Page{Index: uint64(i), Data: d}
			}
			e, err := l.Append(ctx, Draft{LSN: 1, Pages: pages})
			if err != nil {
				b.Fatal(err)
			}
			seg := e.Commit.Segments[0]
			f := seg.Frames[1]
			b.SetBytes(int64(f.RawLength))
			for b.Loop() {
				if ps, err := l.FetchFrame(ctx, seg.Key, f); err != nil || len(ps) != FramePages {
					b.Fatal(err)
				}
			}
		})
	}
}
