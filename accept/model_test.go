package accept

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"pgregory.net/rapid"
)

// TestModel drives random Record, MarkCommitted, Flush, Compact and reopen
// sequences, with small K and compaction thresholds, against a plain map.
func TestModel(t *testing.T) { testModel(t, false) }

// TestModelFold is TestModel with ids recorded out of order (committed
// ids recorded again, live ones refused), Get, and a whole comparison only
// now and then, so that the folder's own folds run between the steps
// instead of each step folding everything (Pending).
func TestModelFold(t *testing.T) { testModel(t, true) }

// testModel is TestModel; fold draws the steps of TestModelFold (the
// draws of TestModel are those of its stored failure).
func testModel(t *testing.T, fold bool) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		dir, err := os.MkdirTemp("", "accept-model-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		drawOpts := func() Options {
			k := rapid.IntRange(1, 8).Draw(t, "K")
			return Options{
				K:             k,
				BlockMax:      rapid.IntRange(1, k).Draw(t, "BlockMax"),
				FlushInterval: rapid.SampledFrom([]time.Duration{-1, time.Millisecond}).Draw(t, "T"),
				CompactRatio:  rapid.IntRange(1, 3).Draw(t, "ratio"),
				CompactMin:    rapid.IntRange(1, 8).Draw(t, "min"),
			}
		}
		opts := drawOpts()
		o, err := Open(ctx, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { o.Close(ctx) }()
		model := map[brand.ID]Intent{}
		next := brand.ID(1)
		// check compares the whole map (Pending folds what the folder has
		// not folded yet); the invariant after each step only counts, so
		// that the folder's own folds run between steps.
		check := func() {
			got, err := o.Pending(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.SortedFunc(maps.Values(model), func(a, b Intent) int { return int(a.ID) - int(b.ID) })
			if len(got) != len(want) {
				t.Fatalf("%d intents pending, model has %d", len(got), len(want))
			}
			for i := range got {
				if got[i].ID != want[i].ID || got[i].Queue != want[i].Queue || !bytes.Equal(got[i].Payload, want[i].Payload) {
					t.Fatalf("intent %d: got %+v, want %+v", i, got[i], want[i])
				}
			}
		}
		invariant := func() {
			if n := o.Len(); n != len(model) {
				t.Fatalf("Len = %d, model has %d", n, len(model))
			}
			o.mu.Lock()
			nd := o.inflight + len(o.pending)
			o.mu.Unlock()
			if nd > opts.K {
				t.Fatalf("%d records not durable, K = %d", nd, opts.K)
			}
		}
		steps := map[string]func(*rapid.T){
			"record": func(t *rapid.T) {
				id := next
				dup := len(model) > 0 && rapid.IntRange(0, 9).Draw(t, "dup") == 0
				if dup {
					id = rapid.SampledFrom(slices.Sorted(maps.Keys(model))).Draw(t, "dupID")
				} else if fold && next > 1 && rapid.IntRange(0, 4).Draw(t, "old") == 0 {
					// An id below the largest recorded: a committed one
					// recorded again, or a live one (a duplicate).
					id = brand.ID(rapid.IntRange(1, int(next)-1).Draw(t, "oldID"))
					_, dup = model[id]
				}
				in := Intent{
					ID:      id,
					Queue:   qn(rapid.SampledFrom([]string{"a", "jobs", "q.1"}).Draw(t, "queue")),
					Payload: rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "payload"),
				}
				err := o.Record(ctx, in)
				if dup {
					if !errors.Is(err, ErrDuplicate) {
						t.Fatalf("Record of a duplicate = %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				model[id] = in
				if id == next {
					next++
				}
			},
			"commit": func(t *rapid.T) {
				var ids []brand.ID
				want := 0
				for range rapid.IntRange(1, 4).Draw(t, "n") {
					id := brand.ID(rapid.IntRange(1, int(next)).Draw(t, "id"))
					if _, ok := model[id]; ok && !slices.Contains(ids, id) {
						want++
					}
					ids = append(ids, id)
				}
				n, err := o.MarkCommitted(ctx, ids...)
				if err != nil || n != want {
					t.Fatalf("MarkCommitted = %d, %v; want %d", n, err, want)
				}
				for _, id := range ids {
					delete(model, id)
				}
			},
			"flush": func(t *rapid.T) {
				if err := o.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if s := o.Stats(); s.Durable != s.Appended {
					t.Fatalf("after Flush: %+v", s)
				}
			},
			"compact": func(t *rapid.T) {
				if err := o.Compact(ctx); err != nil {
					t.Fatal(err)
				}
			},
			"reopen": func(t *rapid.T) {
				if err := o.Close(ctx); err != nil {
					t.Fatal(err)
				}
				opts = drawOpts()
				if o, err = Open(ctx, dir, opts); err != nil {
					t.Fatal(err)
				}
			},
			"": func(t *rapid.T) { check(); invariant() },
		}
		if fold {
			steps["get"] = func(t *rapid.T) {
				id := brand.ID(rapid.IntRange(1, int(next)).Draw(t, "id"))
				got, ok := o.Get(id)
				want, live := model[id]
				if ok != live || ok && (got.Queue != want.Queue || !bytes.Equal(got.Payload, want.Payload)) {
					t.Fatalf("Get(%d) = %+v, %v; model %+v, %v", id, got, ok, want, live)
				}
			}
			steps["pending"] = func(t *rapid.T) { check() }
			steps[""] = func(t *rapid.T) { invariant() }
		}
		t.Repeat(steps)
		check()
	})
}
