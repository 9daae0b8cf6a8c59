package remote

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestMeteredStore: every operation is counted by its result, the bodies
// by direction, a bad key not at all, and a List of more than a page as
// the requests its pages take.
func TestMeteredStore(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		m := NewMeteredStore(s)
		if err := m.PutIfAbsent(ctx, "k/a", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := m.PutIfAbsent(ctx, "k/a", []byte("again")); !errors.Is(err, ErrExists) {
			t.Fatalf("second PutIfAbsent: %v, want ErrExists", err)
		}
		if err := m.Put(ctx, "k/b", []byte("1234567")); err != nil {
			t.Fatal(err)
		}
		if b, err := m.Get(ctx, "k/a"); err != nil || string(b) != "hello" {
			t.Fatalf("Get: %q, %v", b, err)
		}
		if _, err := m.Get(ctx, "k/none"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a missing key: %v", err)
		}
		if b, err := m.GetRange(ctx, "k/b", 2, 3); err != nil || string(b) != "345" {
			t.Fatalf("GetRange: %q, %v", b, err)
		}
		if _, err := m.List(ctx, "k/", 0); err != nil {
			t.Fatal(err)
		}
		if err := m.Delete(ctx, "k/b"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Get(ctx, "../escape"); !errors.Is(err, ErrBadKey) {
			t.Fatalf("Get of a bad key: %v, want ErrBadKey", err)
		}
		got := m.Meter()
		want := map[[2]string]int64{
			{OpPutIfAbsent, ResultOK}: 1, {OpPutIfAbsent, ResultExists}: 1, {OpPut, ResultOK}: 1,
			{OpGet, ResultOK}: 1, {OpGet, ResultNotFound}: 1, {OpGetRange, ResultOK}: 1,
			{OpList, ResultOK}: 1, {OpDelete, ResultOK}: 1,
		}
		if len(got.Requests) != len(meteredOps)*len(meteredResults) {
			t.Fatalf("%d request counts, want every pair (%d)", len(got.Requests), len(meteredOps)*len(meteredResults))
		}
		for _, r := range got.Requests {
			if r.N != want[[2]string{r.Op, r.Result}] {
				t.Errorf("%s %s: %d requests, want %d", r.Op, r.Result, r.N, want[[2]string{r.Op, r.Result}])
			}
		}
		if got.Total() != 8 || got.Of(OpPutIfAbsent) != 2 {
			t.Errorf("total %d, put_if_absent %d; want 8 and 2", got.Total(), got.Of(OpPutIfAbsent))
		}
		// out: hello, again, 1234567; in: hello, 345.
		if got.BytesOut != 5+5+7 || got.BytesIn != 5+3 {
			t.Errorf("bytes out %d in %d, want 17 and 8", got.BytesOut, got.BytesIn)
		}
	})
}

// TestMeteredListPages: a List that returns more than ListPageSize objects
// counts one request per page.
func TestMeteredListPages(t *testing.T) {
	s, _ := memStore(t)
	ctx := context.Background()
	for i := range ListPageSize + 1 {
		if err := s.Put(ctx, fmt.Sprintf("p/%05d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	m := NewMeteredStore(s)
	objs, err := m.List(ctx, "p/", 0)
	if err != nil || len(objs) != ListPageSize+1 {
		t.Fatalf("List: %d objects, %v", len(objs), err)
	}
	if n := m.Meter().Of(OpList); n != 2 {
		t.Errorf("a List of %d objects counted %d requests, want 2", len(objs), n)
	}
}
