package echostore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/names"
)

// archiveHistory is the graft.Options.History of a node whose archive
// volumes keep d of their past states (Config.History); the other volumes
// keep none.
func archiveHistory(d time.Duration) func(names.Volume) time.Duration {
	if d <= 0 {
		return nil
	}
	return func(v names.Volume) time.Duration {
		if names.IsArchiveVolume(v) {
			return d
		}
		return 0
	}
}

// readAsOf is Read with opts.AsOf: the archive of ref as it stood at that
// LSN, or at the newest commit made by that time (archive.ReadAsOf), with
// the records retention has dropped since while the volume keeps that
// state (Config.History). A volume the data dir lacks is pulled first, as a
// merge-read pulls it.
func (n *Node) readAsOf(ctx context.Context, ref names.StreamRef, rg archive.Range, at AsOf) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		vol, err := n.archiveVolume(ctx, ref)
		if err == nil && vol == nil {
			if n.rs == nil {
				err = fmt.Errorf("no archive of %s in this data dir (volume %s), and no remote to pull it from: %w", ref, ref.Volume(), graft.ErrVolumeNotFound)
			} else {
				vol, err = n.pullArchive(ctx, ref)
			}
		}
		if err != nil {
			yield(Record{}, err)
			return
		}
		lsn := at.LSN
		if !at.Time.IsZero() {
			if lsn, err = archive.LSNAt(ctx, vol, at.Time); err != nil {
				yield(Record{}, err)
				return
			}
		}
		left := rg.Limit
		for r, err := range archive.ReadAsOf(ctx, vol, lsn, rg.From, rg.To, rg.Reverse) {
			if !yield(r, err) || err != nil {
				return
			}
			if left--; left == 0 {
				return
			}
		}
	}
}

// AsOf is api.AsOf: a past state of a stream's archive for a read, a
// volume LSN or a time (ReadOptions.AsOf).
type AsOf = api.AsOf

// ParseAsOf reads an AsOf: a volume LSN (decimal, 1 or more) or a time in
// RFC 3339 (2026-03-01T12:00:00Z, with fractions of a second or an
// offset). Anything else fails wrapping ErrInvalid.
func ParseAsOf(s string) (AsOf, error) {
	if s == "" {
		return AsOf{}, fmt.Errorf("as of: empty: want a volume LSN or an RFC 3339 time: %w", ErrInvalid)
	}
	if s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T") {
		lsn, err := strconv.ParseUint(s, 10, 64)
		if err != nil || lsn == 0 {
			return AsOf{}, fmt.Errorf("as of %q: want a volume LSN of 1 or more, or an RFC 3339 time: %w", s, ErrInvalid)
		}
		return AsOf{LSN: lsn}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil && t.IsZero() {
		err = errors.New("the zero time")
	}
	if err != nil {
		return AsOf{}, fmt.Errorf("as of %q: want a volume LSN, or an RFC 3339 time such as 2026-03-01T12:00:00Z: %w", s, ErrInvalid)
	}
	return AsOf{Time: t}, nil
}
