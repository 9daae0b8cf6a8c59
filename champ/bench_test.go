package champ

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/benbjohnson/immutable"
)

// The benchmarks use sequential uint64 keys, as branded ids are, and compare
// with Go's built-in map and github.com/benbjohnson/immutable's Map.

const benchN = 100_000

func BenchmarkInsert(b *testing.B) {
	b.Run("champ-persistent", func(b *testing.B) {
		for b.Loop() {
			m := New[uint64, uint64](Uint64[uint64])
			for i := uint64(0); i < benchN; i++ {
				m = m.Set(i, i)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/insert")
	})
	b.Run("champ-transient", func(b *testing.B) {
		for b.Loop() {
			t := New[uint64, uint64](Uint64[uint64]).Transient()
			for i := uint64(0); i < benchN; i++ {
				t.Set(i, i)
			}
			_ = t.Persistent()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/insert")
	})
	b.Run("champ-collect", func(b *testing.B) {
		for b.Loop() {
			_ = Collect(Uint64[uint64], benchN, func(yield func(uint64, uint64) bool) {
				for i := uint64(0); i < benchN; i++ {
					if !yield(i, i) {
						return
					}
				}
			})
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/insert")
	})
	b.Run("immutable-persistent", func(b *testing.B) {
		for b.Loop() {
			m := immutable.NewMap[uint64, uint64](nil)
			for i := uint64(0); i < benchN; i++ {
				m = m.Set(i, i)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/insert")
	})
	b.Run("immutable-builder", func(b *testing.B) {
		for b.Loop() {
			mb := immutable.NewMapBuilder[uint64, uint64](nil)
			for i := uint64(0); i < benchN; i++ {
				mb.Set(i, i)
			}
			_ = mb.Map()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/insert")
	})
	b.Run("gomap", func(b *testing.B) {
		for b.Loop() {
			m := map[uint64]uint64{}
			for i := uint64(0); i < benchN; i++ {
				m[i] = i
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/insert")
	})
}

func BenchmarkGet(b *testing.B) {
	t := New[uint64, uint64](Uint64[uint64]).Transient()
	mb := immutable.NewMapBuilder[uint64, uint64](nil)
	gm := map[uint64]uint64{}
	for i := uint64(0); i < benchN; i++ {
		t.Set(i, i)
		mb.Set(i, i)
		gm[i] = i
	}
	cm, im := t.Persistent(), mb.Map()
	// Look keys up in a random order, so that no structure gains from
	// sequential keys landing in neighbouring memory.
	order := rand.New(rand.NewPCG(1, 2)).Perm(benchN)
	var sink uint64
	b.Run("champ", func(b *testing.B) {
		i := 0
		for b.Loop() {
			v, _ := cm.Get(uint64(order[i%benchN]))
			sink += v
			i++
		}
	})
	b.Run("immutable", func(b *testing.B) {
		i := 0
		for b.Loop() {
			v, _ := im.Get(uint64(order[i%benchN]))
			sink += v
			i++
		}
	})
	b.Run("gomap", func(b *testing.B) {
		i := 0
		for b.Loop() {
			sink += gm[uint64(order[i%benchN])]
			i++
		}
	})
	_ = sink
}

func BenchmarkIterate(b *testing.B) {
	t := New[uint64, uint64](Uint64[uint64]).Transient()
	mb := immutable.NewMapBuilder[uint64, uint64](nil)
	gm := map[uint64]uint64{}
	for i := uint64(0); i < benchN; i++ {
		t.Set(i, i)
		mb.Set(i, i)
		gm[i] = i
	}
	cm, im := t.Persistent(), mb.Map()
	var sink uint64
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchN), "ns/entry")
	}
	b.Run("champ", func(b *testing.B) {
		for b.Loop() {
			for _, v := range cm.All() {
				sink += v
			}
		}
		report(b)
	})
	b.Run("immutable", func(b *testing.B) {
		for b.Loop() {
			it := im.Iterator()
			for !it.Done() {
				_, v, _ := it.Next()
				sink += v
			}
		}
		report(b)
	})
	b.Run("gomap", func(b *testing.B) {
		for b.Loop() {
			for _, v := range gm {
				sink += v
			}
		}
		report(b)
	})
	_ = sink
}

// BenchmarkBytesPerEntry builds 1M uint64→uint64 entries and reports the
// live heap they hold (runtime.MemStats.HeapAlloc after GC, before and
// after), divided by the entry count.
func BenchmarkBytesPerEntry(b *testing.B) {
	const n = 1_000_000
	measure := func(b *testing.B, build func() any) {
		var keep any
		var per float64
		for b.Loop() {
			keep = nil
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			keep = build()
			runtime.GC()
			runtime.ReadMemStats(&after)
			per = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		}
		runtime.KeepAlive(keep)
		b.ReportMetric(per, "bytes/entry")
	}
	b.Run("champ-persistent", func(b *testing.B) {
		measure(b, func() any {
			m := New[uint64, uint64](Uint64[uint64])
			for i := uint64(0); i < n; i++ {
				m = m.Set(i, i)
			}
			return m
		})
	})
	b.Run("champ-transient", func(b *testing.B) {
		measure(b, func() any {
			t := New[uint64, uint64](Uint64[uint64]).Transient()
			for i := uint64(0); i < n; i++ {
				t.Set(i, i)
			}
			return t.Persistent()
		})
	})
	b.Run("champ-collect", func(b *testing.B) {
		measure(b, func() any {
			return Collect(Uint64[uint64], n, func(yield func(uint64, uint64) bool) {
				for i := uint64(0); i < n; i++ {
					if !yield(i, i) {
						return
					}
				}
			})
		})
	})
	b.Run("immutable", func(b *testing.B) {
		measure(b, func() any {
			m := immutable.NewMap[uint64, uint64](nil)
			for i := uint64(0); i < n; i++ {
				m = m.Set(i, i)
			}
			return m
		})
	})
	b.Run("gomap", func(b *testing.B) {
		measure(b, func() any {
			m := map[uint64]uint64{}
			for i := uint64(0); i < n; i++ {
				m[i] = i
			}
			return m
		})
	})
}

// BenchmarkBuild is Build as accept's recovery calls it: 50,000 entries,
// keys read from a slice of records the size of an accept.Intent (56
// bytes), values pointers into it:
//
//	go test -run='^$' -bench='^BenchmarkBuild$' -benchmem ./champ/
func BenchmarkBuild(b *testing.B) {
	type record struct {
		id      uint64
		queue   string
		payload []byte
		runAt   int64
	}
	const n = 50_000
	recs := make([]record, n)
	for i := range recs {
		recs[i].id = uint64(i + 1)
	}
	c0 := processCPU()
	for b.Loop() {
		m := Build(Uint64[uint64], n, func(i int) (uint64, *record) { return recs[i].id, &recs[i] })
		if m.Len() != n {
			b.Fatalf("built %d entries, want %d", m.Len(), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	// The process's CPU time (the collector's included), which a machine
	// shared with other work moves less than the wall-clock time.
	b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N*n), "cpu-ns/entry")
}
