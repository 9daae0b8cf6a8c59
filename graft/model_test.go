package graft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"
)

// modelState is what the volume holds at one LSN.
type modelState struct {
	pages map[uint64][]byte
	meta  map[string][]byte
}

// graftMachine drives a volume and an in-memory model of it side by side:
// states[L] is the model at LSN L, floor the model's GC horizon.
type graftMachine struct {
	fs       vfs.FS
	s        *Store
	v        *Volume
	states   []modelState
	floor    uint64
	keepFrom uint64
	snaps    []*Snapshot

	low     uint64                 // the archive floor at the head (DropArchiveBelow)
	dropped map[uint64]droppedPage // dropped pages GC has not reclaimed yet
}

// droppedPage is a page dropped below the archive floor at LSN lsn, still
// stored (and counted in Info) until GC passes lsn.
type droppedPage struct {
	lsn uint64
	len int
}

// Small index domain so that commits overwrite each other often, with both
// edges of the archive boundary and the top of the index space.
var modelPages = []uint64{0, 1, 2, 3, 5, 8, 13, ArchiveBase - 1, ArchiveBase, ArchiveBase + 1, ^uint64(0)}

var modelMetaKeys = []string{"", "seq", "w", "x.y"}

func (m *graftMachine) head() uint64 { return uint64(len(m.states) - 1) }

func (m *graftMachine) commit(t *rapid.T) {
	ctx := context.Background()
	txn := m.v.Begin()
	if txn.Base() != m.head() {
		t.Fatalf("Begin base %d, model head %d", txn.Base(), m.head())
	}
	prev := m.states[m.head()]
	next := modelState{pages: maps.Clone(prev.pages), meta: maps.Clone(prev.meta)}
	idx := rapid.SliceOfDistinct(rapid.SampledFrom(modelPages), rapid.ID[uint64]).Draw(t, "pages")
	idx = slices.DeleteFunc(idx, m.belowFloor) // refused: see Drop
	for _, i := range idx {
		data := rapid.SliceOfN(rapid.Byte(), 0, 48).Draw(t, "data")
		var err error
		if i >= ArchiveBase {
			err = txn.PutArchive(i-ArchiveBase, data)
		} else {
			err = txn.Put(i, data)
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if rapid.Bool().Draw(t, "overwrite in txn") { // the last Put wins
			data = rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "data2")
			if i >= ArchiveBase {
				err = txn.PutArchive(i-ArchiveBase, data)
			} else {
				err = txn.Put(i, data)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		next.pages[i] = bytes.Clone(data)
	}
	for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom(modelMetaKeys), rapid.ID[string]).Draw(t, "meta") {
		val := rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, "value")
		if err := txn.SetMeta(k, val); err != nil {
			t.Fatal(err)
		}
		next.meta[k] = bytes.Clone(val)
	}
	d := rapid.SampledFrom([]Durability{Synced, Unsynced}).Draw(t, "durability")
	lsn, err := txn.Commit(ctx, d)
	if err != nil {
		if errors.Is(err, ErrEmptyCommit) && len(idx) == 0 && maps.EqualFunc(next.meta, prev.meta, bytes.Equal) {
			return
		}
		t.Fatalf("commit: %v", err)
	}
	if lsn != m.head()+1 {
		t.Fatalf("commit got LSN %d, want %d", lsn, m.head()+1)
	}
	m.states = append(m.states, next)
}

func (m *graftMachine) Conflict(t *rapid.T) {
	ctx := context.Background()
	a, b := m.v.Begin(), m.v.Begin()
	_ = a.SetMeta("seq", []byte("a"))
	_ = b.Put(modelPages[rapid.IntRange(0, len(modelPages)-1).Draw(t, "page")]%ArchiveBase, []byte("loser"))
	lsn, err := a.Commit(ctx, Unsynced)
	if err != nil {
		t.Fatal(err)
	}
	next := modelState{pages: maps.Clone(m.states[m.head()].pages), meta: maps.Clone(m.states[m.head()].meta)}
	next.meta["seq"] = []byte("a")
	m.states = append(m.states, next)
	if lsn != m.head() {
		t.Fatalf("LSN %d, want %d", lsn, m.head())
	}
	var ce *ConflictError
	if _, err := b.Commit(ctx, Synced); !errors.As(err, &ce) || ce.Base != lsn-1 || ce.Head != lsn {
		t.Fatalf("second commit from the same base: %v", err)
	}
}

func (m *graftMachine) Commit(t *rapid.T) { m.commit(t) }

// belowFloor reports whether page i is an archive page below the floor.
func (m *graftMachine) belowFloor(i uint64) bool { return i >= ArchiveBase && i-ArchiveBase < m.low }

// Drop raises the archive floor (or tries to lower it, or to write below
// it, which must fail and write nothing).
func (m *graftMachine) Drop(t *rapid.T) {
	ctx := context.Background()
	n := rapid.SampledFrom([]uint64{0, 1, 2, MaxArchiveOffset, MaxArchiveOffset + 1}).Draw(t, "drop below")
	txn := m.v.Begin()
	defer txn.Discard()
	if err := txn.DropArchiveBelow(n); err != nil {
		t.Fatal(err)
	}
	writeBelow := n > 0 && rapid.Bool().Draw(t, "write below the new floor")
	if writeBelow {
		if err := txn.PutArchive(n-1, []byte("below")); err != nil {
			t.Fatal(err)
		}
	}
	if n < m.low || writeBelow {
		if _, err := txn.Commit(ctx, Synced); !errors.Is(err, ErrPageDropped) {
			t.Fatalf("drop below %d (floor %d, write below %v): %v, want ErrPageDropped", n, m.low, writeBelow, err)
		}
		return
	}
	lsn, err := txn.Commit(ctx, Synced)
	if err != nil || lsn != m.head()+1 {
		t.Fatalf("drop below %d: LSN %d, %v", n, lsn, err)
	}
	prev := m.states[m.head()]
	next := modelState{pages: maps.Clone(prev.pages), meta: maps.Clone(prev.meta)}
	m.low = n
	for i, p := range next.pages {
		if m.belowFloor(i) {
			m.dropped[i] = droppedPage{lsn: lsn, len: len(p)}
			delete(next.pages, i)
		}
	}
	next.meta[MetaArchiveLow] = binary.BigEndian.AppendUint64(nil, n)
	m.states = append(m.states, next)
}

func (m *graftMachine) OpenSnapshot(t *rapid.T) {
	lsn := rapid.Uint64Range(0, m.head()).Draw(t, "lsn")
	snap, err := m.v.SnapshotAt(context.Background(), lsn)
	if lsn < m.floor {
		if !errors.Is(err, ErrSnapshotGone) {
			t.Fatalf("SnapshotAt(%d) below horizon %d: %v", lsn, m.floor, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("SnapshotAt(%d): %v", lsn, err)
	}
	m.snaps = append(m.snaps, snap)
}

func (m *graftMachine) CloseSnapshot(t *rapid.T) {
	if len(m.snaps) == 0 {
		t.Skip("no snapshot open")
	}
	k := rapid.IntRange(0, len(m.snaps)-1).Draw(t, "snapshot")
	_ = m.snaps[k].Close()
	if _, err := m.snaps[k].Get(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	m.snaps = slices.Delete(m.snaps, k, k+1)
}

func (m *graftMachine) SetKeepFrom(t *rapid.T) {
	var lsn uint64
	if rapid.Bool().Draw(t, "unpin") {
		lsn = Unpinned
	} else {
		lsn = rapid.Uint64Range(0, m.head()+2).Draw(t, "keep-from")
	}
	err := m.v.SetKeepFrom(context.Background(), lsn)
	if lsn < m.floor {
		if !errors.Is(err, ErrSnapshotGone) {
			t.Fatalf("SetKeepFrom(%d) below horizon %d: %v", lsn, m.floor, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	m.keepFrom = lsn
}

func (m *graftMachine) GC(t *rapid.T) {
	want := min(m.head(), m.keepFrom)
	for _, s := range m.snaps {
		want = min(want, s.LSN())
	}
	want = max(want, m.floor)
	st, err := m.v.GC(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Horizon != want {
		t.Fatalf("GC horizon %d, want %d", st.Horizon, want)
	}
	m.floor = want
	reclaimed := 0
	for i, d := range m.dropped {
		if d.lsn <= want {
			delete(m.dropped, i)
			reclaimed++
		}
	}
	if st.DroppedPages != reclaimed {
		t.Fatalf("GC reclaimed %d dropped pages, want %d", st.DroppedPages, reclaimed)
	}
}

func (m *graftMachine) Reopen(t *rapid.T) {
	for _, s := range m.snaps {
		_ = s.Close()
	}
	m.snaps = nil
	if err := m.s.Close(); err != nil {
		t.Fatal(err)
	}
	var err error
	if m.s, err = Open(context.Background(), "graft", Options{FS: m.fs}); err != nil {
		t.Fatal(err)
	}
	if m.v, err = m.s.Volume(context.Background(), volName("model")); err != nil {
		t.Fatal(err)
	}
}

// Check is the invariant: every LSN from the horizon to the head reads what
// the model says, by Get, Scan both ways and Meta; every LSN below fails
// typed; open snapshots still read their LSN; Info and the commit log agree.
func (m *graftMachine) Check(t *rapid.T) {
	ctx := context.Background()
	head := m.head()
	if got := m.v.Head(); got != head {
		t.Fatalf("head %d, model %d", got, head)
	}
	info := m.v.Info()
	var bytesAt uint64
	for _, p := range m.states[head].pages {
		bytesAt += uint64(len(p))
	}
	for _, d := range m.dropped { // stored until GC reclaims them
		bytesAt += uint64(d.len)
	}
	if stored := uint64(len(m.states[head].pages) + len(m.dropped)); info.Pages != stored || info.Bytes != bytesAt || info.Horizon != m.floor {
		t.Fatalf("Info %+v, model pages %d bytes %d horizon %d", info, stored, bytesAt, m.floor)
	}
	for _, s := range m.snaps {
		checkSnapshot(t, s, m.states[s.LSN()])
	}
	// Every step checks the head, the horizon and one LSN drawn from the
	// whole history (below the horizon too); checkAll covers every LSN.
	m.checkLSNs(t, m.head(), m.floor, rapid.Uint64Range(0, head).Draw(t, "check lsn"))
	from := max(m.floor, 1)
	cs, err := m.v.Commits(ctx, from, head)
	if err != nil {
		t.Fatalf("Commits(%d, %d): %v", from, head, err)
	}
	if from <= head && (len(cs) != int(head-from+1) || cs[0].LSN != from) {
		t.Fatalf("Commits(%d, %d) returned %d records", from, head, len(cs))
	}
	if m.floor > 1 {
		if _, err := m.v.Commits(ctx, m.floor-1, head); !errors.Is(err, ErrSnapshotGone) {
			t.Fatalf("Commits below horizon: %v", err)
		}
	}
}

// flagSet reports whether the named flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkAll checks every LSN of the history.
func (m *graftMachine) checkAll(t *rapid.T) {
	for lsn := uint64(0); lsn <= m.head(); lsn++ {
		m.checkLSNs(t, lsn)
	}
}

// checkLSNs opens a snapshot at each LSN and compares it with the model;
// below the horizon the open must fail typed.
func (m *graftMachine) checkLSNs(t *rapid.T, lsns ...uint64) {
	ctx := context.Background()
	for _, lsn := range lsns {
		snap, err := m.v.SnapshotAt(ctx, lsn)
		if lsn < m.floor {
			if !errors.Is(err, ErrSnapshotGone) {
				t.Fatalf("SnapshotAt(%d) below horizon %d: %v", lsn, m.floor, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("SnapshotAt(%d): %v", lsn, err)
		}
		checkSnapshot(t, snap, m.states[lsn])
		_ = snap.Close()
	}
}

// checkRead compares one read with the model: want if ok, else ErrNotFound.
func checkRead(t *rapid.T, what string, got []byte, err error, want []byte, ok bool) {
	switch {
	case !ok && !errors.Is(err, ErrNotFound):
		t.Fatalf("%s = %q, %v; want not found", what, got, err)
	case ok && (err != nil || !bytes.Equal(got, want)):
		t.Fatalf("%s = %q, %v; want %q", what, got, err, want)
	}
}

func checkSnapshot(t *rapid.T, snap *Snapshot, want modelState) {
	ctx := context.Background()
	for _, i := range modelPages {
		got, err := snap.Get(ctx, i)
		w, ok := want.pages[i]
		checkRead(t, fmt.Sprintf("Get(%d) at %d", i, snap.LSN()), got, err, w, ok)
	}
	for _, k := range append([]string{MetaArchiveLow}, modelMetaKeys...) {
		got, err := snap.Meta(ctx, k)
		w, ok := want.meta[k]
		checkRead(t, fmt.Sprintf("Meta(%q) at %d", k, snap.LSN()), got, err, w, ok)
	}
	lo := modelPages[rapid.IntRange(0, len(modelPages)-1).Draw(t, "lo")]
	hi := modelPages[rapid.IntRange(0, len(modelPages)-1).Draw(t, "hi")]
	for _, rng := range [][2]uint64{{0, ^uint64(0)}, {lo, hi}} {
		var exp []uint64
		for _, i := range slices.Sorted(maps.Keys(want.pages)) {
			if i >= rng[0] && i <= rng[1] {
				exp = append(exp, i)
			}
		}
		for _, reverse := range []bool{false, true} {
			var it *PageIter
			if reverse {
				it = snap.ScanReverse(ctx, rng[0], rng[1])
				slices.Reverse(exp)
			} else {
				it = snap.Scan(ctx, rng[0], rng[1])
			}
			var got []uint64
			for it.Next() {
				if w := want.pages[it.Index()]; !bytes.Equal(it.Value(), w) {
					t.Fatalf("scan [%d,%d] reverse=%v at %d: page %d = %q, want %q", rng[0], rng[1], reverse, snap.LSN(), it.Index(), it.Value(), w)
				}
				got = append(got, it.Index())
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(exp) && !(len(got) == 0 && len(exp) == 0) {
				t.Fatalf("scan [%d,%d] reverse=%v at %d: pages %v, want %v", rng[0], rng[1], reverse, snap.LSN(), got, exp)
			}
		}
	}
}

// TestModel checks invariant 7 (a read at LSN L returns the same bytes until
// GC removes L, and then fails typed) and the GC rule against a model, over
// random sequences of commits, conflicts, archive page drops, snapshots,
// keep-from settings, GC and reopening.
func TestModel(t *testing.T) {
	if raceEnabled && !flagSet("rapid.checks") {
		// The model test is sequential: the race detector adds nothing but
		// time. A plain `go test` runs rapid's default 100 cases.
		_ = flag.Set("rapid.checks", "25")
	}
	rapid.Check(t, func(t *rapid.T) {
		fs := vfs.NewMem()
		s, err := Open(context.Background(), "graft", Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.CreateVolume(context.Background(), volName("model"))
		if err != nil {
			t.Fatal(err)
		}
		m := &graftMachine{fs: fs, s: s, v: v, keepFrom: Unpinned, dropped: map[uint64]droppedPage{},
			states: []modelState{{pages: map[uint64][]byte{}, meta: map[string][]byte{}}}}
		defer func() {
			for _, s := range m.snaps {
				_ = s.Close()
			}
			_ = m.s.Close()
		}()
		t.Repeat(rapid.StateMachineActions(m))
		m.checkAll(t)
	})
}

// TestDisjointRanges is invariant 4 as a property: over random indexes, Put
// accepts exactly the indexes below ArchiveBase, PutArchive exactly the
// offsets that land at or above it without wrapping, and what each accepts
// is read back at the index it names.
func TestDisjointRanges(t *testing.T) {
	s := openMem(t, nil, Options{})
	defer s.Close()
	v := mustCreate(t, s, "ranges")
	ctx := context.Background()
	near := func(c uint64) *rapid.Generator[uint64] { // values around an edge
		return rapid.Custom(func(t *rapid.T) uint64 { return c + uint64(rapid.IntRange(-3, 3).Draw(t, "delta")) })
	}
	idx := rapid.OneOf(rapid.Uint64(), near(ArchiveBase), near(MaxArchiveOffset), near(0), near(^uint64(0)-2))
	rapid.Check(t, func(t *rapid.T) {
		i := idx.Draw(t, "i")
		txn := v.Begin()
		defer txn.Discard()
		err := txn.Put(i, []byte("b"))
		if (err == nil) != (i < ArchiveBase) || (err != nil && !errors.Is(err, ErrPageRange)) {
			t.Fatalf("Put(%d): %v", i, err)
		}
		aerr := txn.PutArchive(i, []byte("a"))
		if (aerr == nil) != (i <= MaxArchiveOffset) || (aerr != nil && !errors.Is(aerr, ErrPageRange)) {
			t.Fatalf("PutArchive(%d): %v", i, aerr)
		}
		if err != nil && aerr != nil {
			return
		}
		lsn, cerr := txn.Commit(ctx, Unsynced)
		if cerr != nil {
			t.Fatal(cerr)
		}
		snap, serr := v.SnapshotAt(ctx, lsn)
		if serr != nil {
			t.Fatal(serr)
		}
		defer snap.Close()
		if err == nil {
			if got, gerr := snap.Get(ctx, i); gerr != nil || string(got) != "b" {
				t.Fatalf("business page %d = %q, %v", i, got, gerr)
			}
		}
		if aerr == nil {
			if got, gerr := snap.Get(ctx, ArchiveBase+i); gerr != nil || string(got) != "a" || ArchiveBase+i < ArchiveBase {
				t.Fatalf("archive page %d (offset %d) = %q, %v", ArchiveBase+i, i, got, gerr)
			}
		}
	})
}
