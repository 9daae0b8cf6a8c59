package brand

import (
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// fakeClock is a clock tests step by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestMinterNodeRange(t *testing.T) {
	if _, err := NewMinter(-1); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	if _, err := NewMinter(MaxNode + 1); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
}

// Strictly increasing across goroutines, every id unique, node field kept.
func TestMinterConcurrent(t *testing.T) {
	m, _ := NewMinter(5)
	const workers, per = 8, 20000
	out := make([][]ID, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := ID(0)
			for range per {
				id, err := m.Mint()
				if err != nil {
					t.Error(err)
					return
				}
				if id <= prev {
					t.Errorf("goroutine %d: %d after %d", w, id, prev)
					return
				}
				prev = id
				out[w] = append(out[w], id)
			}
		}()
	}
	wg.Wait()
	var all []ID
	for _, o := range out {
		all = append(all, o...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := range all {
		if i > 0 && all[i] == all[i-1] {
			t.Fatalf("duplicate id %s", all[i].RedisID())
		}
		if all[i].Node() != 5 {
			t.Fatalf("id %s has node %d", all[i].RedisID(), all[i].Node())
		}
	}
}

// A frozen clock forces 4096 ids per millisecond and then borrowing.
func TestMinterSequenceOverflow(t *testing.T) {
	c := &fakeClock{t: Epoch().Add(time.Hour)}
	m, _ := NewMinter(3, WithClock(c.now))
	var prev ID
	for i := 0; i < 3*4096+7; i++ {
		id, err := m.Mint()
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && id <= prev {
			t.Fatalf("mint %d: %s after %s", i, id.RedisID(), prev.RedisID())
		}
		if id.Node() != 3 {
			t.Fatalf("node field overwritten: %s", id.RedisID())
		}
		prev = id
	}
	if want := int64(3600_000 + 3); prev.Millis() != want || prev.Seq() != 6 {
		t.Fatalf("last = ms %d seq %d, want ms %d seq 6", prev.Millis(), prev.Seq(), want)
	}
}

// The property: under any schedule of clock steps (forward and back),
// restarts with the previous last id as floor, Observe and MintAbove calls,
// every id is above every id minted or observed before.
func TestPropertyMinterMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := &fakeClock{t: Epoch().Add(time.Duration(rapid.Int64Range(0, 1e12).Draw(t, "start")) * time.Millisecond)}
		node := rapid.IntRange(0, MaxNode).Draw(t, "node")
		m, _ := NewMinter(node, WithClock(c.now))
		var high ID // highest id minted or observed so far
		ops := rapid.IntRange(1, 300).Draw(t, "ops")
		for i := 0; i < ops; i++ {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // clock steps back
				c.add(-time.Duration(rapid.Int64Range(0, 5000).Draw(t, "back")) * time.Millisecond)
			case 1: // clock steps forward
				c.add(time.Duration(rapid.Int64Range(0, 5000).Draw(t, "fwd")) * time.Millisecond)
			case 2: // restart: a new process, told the last id (e.g. the stream top)
				m, _ = NewMinter(node, WithClock(c.now), WithFloor(high))
			case 3: // another producer's id seen
				o := ID(rapid.Uint64Range(0, uint64(high)+1<<30).Draw(t, "obs"))
				m.Observe(o)
				high = max(high, o)
			case 4:
				floor := ID(rapid.Uint64Range(0, uint64(high)+1<<30).Draw(t, "floor"))
				id, err := m.MintAbove(floor)
				if err != nil {
					t.Fatal(err)
				}
				if id <= floor || id <= high {
					t.Fatalf("MintAbove(%s) = %s, high %s", floor.RedisID(), id.RedisID(), high.RedisID())
				}
				high = id
			default:
				id, err := m.Mint()
				if err != nil {
					t.Fatal(err)
				}
				if id <= high {
					t.Fatalf("Mint = %s, not above %s", id.RedisID(), high.RedisID())
				}
				if id.Node() != node {
					t.Fatalf("Mint = %s, node %d, want %d", id.RedisID(), id.Node(), node)
				}
				high = id
			}
		}
	})
}

func TestMinterExhausted(t *testing.T) {
	m, _ := NewMinter(1, WithFloor(Max))
	if _, err := m.Mint(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Mint at Max = %v", err)
	}
	if _, err := m.MintAbove(Max - 1); !errors.Is(err, ErrExhausted) {
		t.Fatalf("MintAbove near Max = %v", err)
	}
}

func BenchmarkMint(b *testing.B) {
	m, _ := NewMinter(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Mint(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMintParallel(b *testing.B) {
	m, _ := NewMinter(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Mint(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkFormat(b *testing.B) {
	id, _ := Make(123456789, 5, 6)
	buf := make([]byte, 0, 32)
	b.ReportAllocs()
	for b.Loop() {
		buf = EVT.AppendFormat(buf[:0], id)
	}
}

func BenchmarkParse(b *testing.B) {
	id, _ := Make(123456789, 5, 6)
	s := EVT.Format(id)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EVT.Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedisID(b *testing.B) {
	id, _ := Make(123456789, 5, 6)
	b.ReportAllocs()
	for b.Loop() {
		_ = id.RedisID()
	}
}

// BenchmarkClockNow is Mint's baseline: one read of the clock, which every
// Mint pays.
func BenchmarkClockNow(b *testing.B) {
	var sink int64
	for b.Loop() {
		sink += time.Now().UnixMilli()
	}
	_ = sink
}
