package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// State is a volume's remote state at one LSN, folded from the log: where
// every live page is, and the metadata. Commit metadata holds the keys the
// covered local commits set, at their newest value; a checkpoint holds
// every key.
type State struct {
	LSN     uint64
	Hash    Hash
	LocalTo uint64
	Pages   map[uint64]PageRef
	Meta    map[string][]byte
}

// Apply folds the next commit into the state: it must be at LSN+1 and name
// the state's hash as its predecessor (else a *DivergedError). A checkpoint
// replaces the pages and metadata; any other commit overlays them.
func (s *State) Apply(e Entry) error {
	c := e.Commit
	if c.LSN != s.LSN+1 || c.Prev != s.Hash {
		return &DivergedError{Volume: c.Volume, LSN: c.LSN, Want: s.Hash, Got: c.Prev,
			Reason: fmt.Sprintf("commit does not follow lsn %d", s.LSN)}
	}
	if c.Checkpoint || s.Pages == nil {
		s.Pages, s.Meta = map[uint64]PageRef{}, map[string][]byte{}
	}
	for _, r := range c.Pages() {
		s.Pages[r.Index] = r
	}
	maps.Copy(s.Meta, c.Meta)
	s.LSN, s.Hash, s.LocalTo = c.LSN, e.Hash, c.LocalTo
	return nil
}

// fromCheckpoint returns the state at checkpoint cp.
func fromCheckpoint(cp Entry) State {
	s := State{LSN: cp.LSN() - 1, Hash: cp.Commit.Prev}
	_ = s.Apply(cp) // cannot fail: cp follows by construction
	return s
}

// State folds the log into the state at its head, starting from the
// newest checkpoint (or LSN 1 if there is none): one LIST and one GET for
// the checkpoint, then one GET per newer commit.
func (l *Log) State(ctx context.Context) (State, error) {
	var s State
	cp, err := l.LatestCheckpoint(ctx)
	switch {
	case err == nil:
		s = fromCheckpoint(cp)
	case !errors.Is(err, ErrNoCheckpoint):
		return State{}, err
	}
	for e, err := range l.Since(ctx, s.LSN, s.Hash) {
		if err != nil {
			return State{}, err
		}
		if err := s.Apply(e); err != nil {
			return State{}, err
		}
	}
	return s, nil
}

// ArchiveBase is the first archive page index (graft.ArchiveBase): the
// archive floor (MetaArchiveLow) counts pages from it.
const ArchiveBase uint64 = 1 << 49

// MetaArchiveLow is the metadata key of a volume's archive floor
// (graft.MetaArchiveLow): 8 bytes, big-endian, n. The archive pages at
// ArchiveBase+0 … ArchiveBase+n-1 are dropped.
const MetaArchiveLow = "archive.low"

// ArchiveLow returns the archive floor the state's metadata records (0: none,
// or a value that is not 8 bytes, which drops nothing).
func (s State) ArchiveLow() uint64 {
	b, ok := s.Meta[MetaArchiveLow]
	if !ok || len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Dropped reports whether page index idx is an archive page below the
// state's archive floor: dropped by retention, never to be read again.
func (s State) Dropped(idx uint64) bool {
	low := s.ArchiveLow()
	if low == 0 || idx < ArchiveBase {
		return false
	}
	return idx-ArchiveBase < low
}

// CheckpointDraft returns the draft of a checkpoint commit on top of s: it
// references every live page of s, reusing the frames of existing segments
// (listing only their live pages) and carrying inline pages again, with
// all of s's metadata. Archive pages below the state's archive floor
// (MetaArchiveLow) are not live and are left out, so that the segments
// holding only dropped pages are referenced by no commit from the
// checkpoint on and remote GC can delete them. It covers no new local
// commit.
func CheckpointDraft(s State) Draft {
	d := Draft{LSN: s.LSN + 1, Prev: s.Hash, LocalFrom: s.LocalTo, LocalTo: s.LocalTo,
		Checkpoint: true, Meta: maps.Clone(s.Meta)}
	type frameKey struct {
		seg string
		off uint64
	}
	frames := map[frameKey]*FrameRef{}
	for _, idx := range slices.Sorted(maps.Keys(s.Pages)) {
		if s.Dropped(idx) {
			continue
		}
		r := s.Pages[idx]
		if r.Inline() {
			d.Pages = append(d.Pages, Page{Index: idx, Data: r.Data})
			continue
		}
		k := frameKey{r.Segment, r.Frame.Offset}
		f := frames[k]
		if f == nil {
			f = &FrameRef{Offset: r.Frame.Offset, Length: r.Frame.Length, RawLength: r.Frame.RawLength, CRC: r.Frame.CRC}
			frames[k] = f
		}
		f.Pages = append(f.Pages, r.Loc)
	}
	keys := slices.SortedFunc(maps.Keys(frames), func(a, b frameKey) int {
		if a.seg != b.seg {
			if a.seg < b.seg {
				return -1
			}
			return 1
		}
		return cmpUint(a.off, b.off)
	})
	for _, k := range keys {
		if n := len(d.Reuse); n == 0 || d.Reuse[n-1].Key != k.seg {
			d.Reuse = append(d.Reuse, SegmentRef{Key: k.seg})
		}
		d.Reuse[len(d.Reuse)-1].Frames = append(d.Reuse[len(d.Reuse)-1].Frames, *frames[k])
	}
	return d
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// WriteCheckpoint appends a checkpoint commit at the head, built from the
// log alone (State, then CheckpointDraft): no page is uploaded again except
// inline ones. Like any append it is fenced: if another writer appends
// first, it fails with ErrDiverged and may be retried.
func (l *Log) WriteCheckpoint(ctx context.Context) (Entry, error) {
	s, err := l.State(ctx)
	if err != nil {
		return Entry{}, err
	}
	if s.LSN == 0 {
		return Entry{}, invalid("volume %s: no commit to checkpoint", l.volume)
	}
	return l.Append(ctx, CheckpointDraft(s))
}
