package sealed_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/names"
)

// appendCommits appends n commits of incompressible pages to the log of
// vol over s and records their pages in pages.
func appendCommits(t *testing.T, s remote.Store, vol names.Volume, n int, pages map[uint64][]byte) {
	t.Helper()
	ctx := context.Background()
	l, err := remote.NewLog(s, vol)
	if err != nil {
		t.Fatal(err)
	}
	head, err := l.HeadCommit(ctx)
	if err != nil && !errors.Is(err, remote.ErrNotFound) {
		t.Fatal(err)
	}
	for range n {
		lsn := head.LSN() + 1
		var ps []remote.Page
		for i := range 20 {
			idx := uint64(i)*7 + lsn
			pages[idx] = randBytes(t, 9000)
			ps = append(ps, remote.Page{Index: idx, Data: pages[idx]})
		}
		if head, err = l.Append(ctx, remote.Draft{LSN: lsn, Prev: head.Hash, LocalFrom: lsn, LocalTo: lsn, Pages: ps}); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads every page of vol's remote state over s and compares it
// with pages.
func readAll(t *testing.T, s remote.Store, vol names.Volume, pages map[uint64][]byte) error {
	t.Helper()
	ctx := context.Background()
	l, err := remote.NewLog(s, vol)
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.State(ctx)
	if err != nil {
		return err
	}
	if len(st.Pages) != len(pages) {
		t.Fatalf("%d pages in the remote state, %d written", len(st.Pages), len(pages))
	}
	for _, r := range st.Pages {
		got, err := l.FetchPage(ctx, r)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, pages[r.Index]) {
			t.Fatalf("page %d: other bytes than written", r.Index)
		}
	}
	return nil
}

// TestRotation: write with key A; rotate to B with A kept for reading;
// read everything, write more; Survey counts the objects of each key;
// Reseal seals A's objects with B; then A leaves the keyring and B alone
// reads everything.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	inner := memStore(t)
	a, _ := newKey(t)
	b, _ := newKey(t)
	vol, _ := names.ParseVolume("rot")
	pages := map[uint64][]byte{}

	appendCommits(t, sealed.New(inner, ring(t, a)), vol, 3, pages)

	rotated := sealed.New(inner, ring(t, b, a))
	if err := readAll(t, rotated, vol, pages); err != nil {
		t.Fatalf("B with A kept for reading: %v", err)
	}
	appendCommits(t, rotated, vol, 2, pages)
	if err := readAll(t, rotated, vol, pages); err != nil {
		t.Fatal(err)
	}
	// B alone cannot read what A sealed: a typed error.
	if err := readAll(t, sealed.New(inner, ring(t, b)), vol, pages); !errors.Is(err, sealed.ErrUnknownKey) {
		t.Fatalf("B alone before reseal: %v, want ErrUnknownKey", err)
	}
	c, err := sealed.Survey(ctx, inner, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.ByKey[a.ID()] == 0 || c.ByKey[b.ID()] == 0 || c.NotSealed != 0 || c.ByKey[a.ID()]+c.ByKey[b.ID()] != c.Objects {
		t.Fatalf("survey before reseal: %+v", c)
	}
	res, err := sealed.Reseal(ctx, rotated, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Resealed != c.ByKey[a.ID()] || res.Checked != c.Objects {
		t.Fatalf("reseal: %+v, survey said %+v", res, c)
	}
	c, err = sealed.Survey(ctx, inner, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.ByKey[a.ID()] != 0 || c.ByKey[b.ID()] != c.Objects {
		t.Fatalf("survey after reseal: %+v", c)
	}
	// A can go: B alone reads everything and writes on.
	alone := sealed.New(inner, ring(t, b))
	if err := readAll(t, alone, vol, pages); err != nil {
		t.Fatalf("B alone after reseal: %v", err)
	}
	appendCommits(t, alone, vol, 1, pages)
	if err := readAll(t, alone, vol, pages); err != nil {
		t.Fatal(err)
	}
	if res, err := sealed.Reseal(ctx, alone, ""); err != nil || res.Resealed != 0 {
		t.Fatalf("a second reseal: %+v, %v", res, err)
	}
}
