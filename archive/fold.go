package archive

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Metadata keys of an archive volume, each set by every fold in the same
// commit as its pages (docs/ARCHIVE.md):
//
//	archive.w    W, the id of the newest folded record: 8 bytes, big-endian,
//	             the branded id, when W has one (as earlier releases wrote
//	             it); else 16 bytes, big-endian, its Redis id's
//	             milliseconds then sequence
//	archive.seq  8 bytes, big-endian: the number of record pages, which is
//	             the offset n of the next page (ArchiveBase + n)
//
// and, set only by retention (Retain) with graft's page drop:
//
//	archive.low  8 bytes, big-endian: the offset of the first retained page;
//	             pages below it are dropped (absent: 0, nothing dropped)
const (
	MetaW   = "archive.w"
	MetaSeq = "archive.seq"
	MetaLow = graft.MetaArchiveLow
	// MetaDropped is the id of the newest record retention dropped
	// (encoded as archive.w), set in each drop's commit beside archive.low.
	MetaDropped = "archive.dropped"
)

// ErrBadSlice: a slice given to Fold is not foldable (an invalid record,
// ids not strictly increasing, an id not above W). Nothing was written.
var ErrBadSlice = errors.New("archive: slice cannot be folded")

// SliceError says which record of a slice Fold refused, and why.
type SliceError struct {
	Index  int    // position in the slice
	ID     xid.ID // the record's id
	Reason string
	Err    error // a cause (an mq record error), or nil
}

// Error describes the refusal.
func (e *SliceError) Error() string {
	s := fmt.Sprintf("archive: record %d (%s) of the slice: %s", e.Index, formatID(e.ID), e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s + "; nothing was folded"
}

// Unwrap returns ErrBadSlice and the cause.
func (e *SliceError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadSlice, e.Err}
	}
	return []error{ErrBadSlice}
}

// State is api.ArchiveState: where an archive volume stands at one LSN
// (Pages, the watermark W, Low, LSN).
type State = api.ArchiveState

// formatID prints an id as records print it: EVT_… when it has a branded
// id, else its Redis id.
func formatID(id xid.ID) string { return mq.FormatID(id, mq.IDBranded) }

// encodeID is the encoding of archive.w and archive.dropped: the 8 bytes of
// the branded id when id has one, else 16 bytes, milliseconds then
// sequence (all big-endian).
func encodeID(id xid.ID) []byte {
	if b, err := brand.FromXID(id); err == nil {
		return binary.BigEndian.AppendUint64(nil, uint64(b))
	}
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), id.Ms), id.Seq)
}

// decodeID decodes encodeID's bytes; ok is false for any other length.
func decodeID(b []byte) (id xid.ID, ok bool) {
	switch len(b) {
	case 8:
		return brand.ID(binary.BigEndian.Uint64(b)).XID(), true
	case 16:
		return xid.ID{Ms: binary.BigEndian.Uint64(b), Seq: binary.BigEndian.Uint64(b[8:])}, true
	}
	return xid.ID{}, false
}

// Frontier reads the archive state of vol at its head: the truth about W.
func Frontier(ctx context.Context, vol *graft.Volume) (State, error) {
	snap, err := vol.Snapshot(ctx)
	if err != nil {
		return State{}, fmt.Errorf("archive frontier of %s: %w", vol.Name(), err)
	}
	defer snap.Close()
	return stateAt(ctx, snap)
}

// stateAt reads the archive state at a snapshot.
func stateAt(ctx context.Context, snap *graft.Snapshot) (State, error) {
	st := State{LSN: snap.LSN()}
	seq, err := snap.Meta(ctx, MetaSeq)
	if errors.Is(err, graft.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("archive state of %s at LSN %d: %w", snap.Volume().Name(), st.LSN, err)
	}
	w, err := snap.Meta(ctx, MetaW)
	if err != nil && !errors.Is(err, graft.ErrNotFound) {
		return State{}, fmt.Errorf("archive state of %s at LSN %d: %w", snap.Volume().Name(), st.LSN, err)
	}
	var okW bool
	st.W, okW = decodeID(w)
	if len(seq) != 8 || !okW {
		return State{}, fmt.Errorf("archive state of %s at LSN %d: %s is %d bytes and %s %d, want 8 and 8 or 16: %w",
			snap.Volume().Name(), st.LSN, MetaSeq, len(seq), MetaW, len(w), ErrCorrupt)
	}
	st.Pages = binary.BigEndian.Uint64(seq)
	if st.Pages == 0 || st.Pages > graft.MaxArchiveOffset {
		return State{}, fmt.Errorf("archive state of %s at LSN %d: %d pages: %w", snap.Volume().Name(), st.LSN, st.Pages, ErrCorrupt)
	}
	low, err := snap.Meta(ctx, MetaLow)
	switch {
	case errors.Is(err, graft.ErrNotFound):
	case err != nil:
		return State{}, fmt.Errorf("archive state of %s at LSN %d: %w", snap.Volume().Name(), st.LSN, err)
	case len(low) != 8:
		return State{}, fmt.Errorf("archive state of %s at LSN %d: %s is %d bytes, want 8: %w",
			snap.Volume().Name(), st.LSN, MetaLow, len(low), ErrCorrupt)
	default:
		st.Low = binary.BigEndian.Uint64(low)
	}
	if st.Low > st.Pages {
		return State{}, fmt.Errorf("archive state of %s at LSN %d: first retained page %d above the page count %d: %w",
			snap.Volume().Name(), st.LSN, st.Low, st.Pages, ErrCorrupt)
	}
	return st, nil
}

// checkSlice checks what can be checked of a slice without the volume:
// records of at least one field (any bytes, any names, any number of
// them) with strictly increasing ids, and, unless tooLarge is set, none
// above MaxRecordBytes (a *SliceError wrapping a *TooLargeError).
func checkSlice(slice []mq.Record, tooLarge bool) error {
	for i, r := range slice {
		if len(r.Fields) == 0 {
			return &SliceError{Index: i, ID: r.ID, Reason: "invalid record", Err: &mq.RecordError{Err: mq.ErrEmptyRecord}}
		}
		if err := checkRecordSize(r, MaxRecordBytes); err != nil && !tooLarge {
			return &SliceError{Index: i, ID: r.ID, Reason: "invalid record", Err: err}
		}
		if i > 0 && !slice[i-1].ID.Less(r.ID) {
			return &SliceError{Index: i, ID: r.ID, Reason: fmt.Sprintf("id not above the one before it (%s)", formatID(slice[i-1].ID))}
		}
	}
	return nil
}

// Fold appends slice, records in strictly increasing id order all above W,
// to the archive in vol: one page per record at ArchiveBase+seq (a record
// larger than PageLimit takes a head and its continuations, span.go), and
// the new page count and W, in ONE synced commit (one LSN). It returns the new
// state. An empty slice is a no-op that returns the current state.
//
// The slice is checked before anything is written: a bad one fails with a
// *SliceError (ErrBadSlice); so does one holding a record above
// MaxRecordBytes (the error also wraps its *TooLargeError). A commit that fails returns graft's error
// wrapped (errors.Is finds graft.ErrConflict and the others); then nothing
// was folded, and the caller must not trim.
//
// Fold knows only the volume: it neither checks nor records the volume's
// owner (MetaOwner). The Archiver's cycles fold through foldAs, which does.
func Fold(ctx context.Context, vol *graft.Volume, slice []mq.Record) (State, error) {
	if err := checkSlice(slice, false); err != nil {
		return State{}, err
	}
	st, _, err := foldAs(ctx, vol, slice, nil, MaxRecordBytes)
	return st, err
}

// foldAs is Fold on behalf of owner (nil: anyone), holding records of at
// most maxRecord bytes (≤ 0: MaxRecordBytes). At the commit's base it
// refuses a volume that records another owner (*OwnerError, nothing
// written), and it records owner in the commit when the volume has none
// yet: the first fold, or the first after an upgrade.
//
// A record above MaxRecordBytes ends the fold: the records before it are
// written and W stops below it; it is returned as a *TooLargeError, so
// that the cycle holds its trim below it (nothing is trimmed that was not
// folded). When it is the slice's first record nothing is committed.
func foldAs(ctx context.Context, vol *graft.Volume, slice []mq.Record, owner *names.StreamRef, maxRecord int) (State, []*TooLargeError, error) {
	if err := checkSlice(slice, true); err != nil {
		return State{}, nil, err
	}
	txn := vol.Begin()
	defer txn.Discard()
	snap, err := vol.SnapshotAt(ctx, txn.Base())
	if err != nil {
		return State{}, nil, fmt.Errorf("fold into %s: %w", vol.Name(), err)
	}
	st, err := stateAt(ctx, snap)
	adopt := false
	if err == nil && owner != nil {
		var o names.StreamRef
		var has bool
		if o, has, err = ownerAt(ctx, snap); err == nil && has && o != *owner {
			err = newOwnerError(*owner, vol.Name().String(), o)
		}
		adopt = !has
	}
	snap.Close()
	if err != nil {
		return State{}, nil, fmt.Errorf("fold into %s: %w", vol.Name(), err)
	}
	if len(slice) == 0 {
		return st, nil, nil
	}
	if st.Covers(slice[0].ID) {
		return State{}, nil, &SliceError{Index: 0, ID: slice[0].ID,
			Reason: fmt.Sprintf("id not above the watermark %s", formatID(st.W))}
	}
	if uint64(len(slice)) > graft.MaxArchiveOffset-st.Pages {
		return State{}, nil, &SliceError{Index: 0, ID: slice[0].ID, Reason: "the archive's page range is full"}
	}
	var buf []byte
	var big []*TooLargeError
	pages := st.Pages
	for i, r := range slice {
		if err := checkRecordSize(r, maxRecord); err != nil {
			big = append(big, err.(*TooLargeError))
			slice = slice[:i]
			break
		}
		var err error
		if buf, _, err = appendRecordPages(buf, r, PageLimit, func(page []byte) error {
			if pages >= graft.MaxArchiveOffset {
				return &SliceError{Index: 0, ID: slice[0].ID, Reason: "the archive's page range is full"}
			}
			pages++
			return txn.PutArchive(pages-1, page)
		}); err != nil {
			return State{}, nil, fmt.Errorf("fold %s into %s: %w", formatID(r.ID), vol.Name(), err)
		}
	}
	if len(slice) == 0 {
		return st, big, nil // the first record is too large: nothing to commit
	}
	next := State{Pages: pages, W: slice[len(slice)-1].ID, Low: st.Low}
	if err := txn.SetMeta(MetaSeq, binary.BigEndian.AppendUint64(nil, next.Pages)); err != nil {
		return State{}, nil, fmt.Errorf("fold into %s: %w", vol.Name(), err)
	}
	if err := txn.SetMeta(MetaW, encodeID(next.W)); err != nil {
		return State{}, nil, fmt.Errorf("fold into %s: %w", vol.Name(), err)
	}
	if adopt {
		if err := txn.SetMeta(MetaOwner, encodeOwner(*owner)); err != nil {
			return State{}, nil, fmt.Errorf("fold into %s: %w", vol.Name(), err)
		}
	}
	lsn, err := txn.Commit(ctx, graft.Synced)
	if err != nil {
		return State{}, nil, fmt.Errorf("fold %d records into %s: %w", len(slice), vol.Name(), err)
	}
	next.LSN = lsn
	return next, big, nil
}
