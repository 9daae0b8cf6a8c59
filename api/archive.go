package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/echostore/echostore/xid"
)

// The archive of a stream as the API carries it: a cycle's window,
// trim_after and retention, what a cycle and the archive's status answer,
// and a stream's consumer groups (packages mq and archive name these
// types too).

// Window declares how much of a stream stays live: the live part a cycle
// leaves, or what trim-only retention keeps. Both limits apply: an entry
// stays while it is among the newest Keep and younger than MaxAge. A zero
// limit does not apply; a zero Window keeps everything.
type Window struct {
	Keep   int64         // keep the newest Keep entries (0: no count limit)
	MaxAge time.Duration // keep entries younger than MaxAge (0: no age limit)
	// Groups bounds what a consumer group may hold back beyond the window
	// before it counts as stalled, and what an archive cycle then does
	// (package archive, groups.go). Trim-only retention (mq.Retention)
	// never trims past a group and ignores it.
	Groups GroupLimits
}

// errNegativeWindow is wrapped by Window.Validate.
var errNegativeWindow = errors.New("negative window limit")

// Validate reports whether w's limits are usable (neither is negative, and
// its stalled-group policy is one there is).
func (w Window) Validate() error {
	if w.Keep < 0 || w.MaxAge < 0 {
		return errNegativeWindow
	}
	return w.Groups.validate()
}

// StalledPolicy is what an archive cycle does about a stalled consumer
// group: one that holds back the trim beyond GroupLimits.
type StalledPolicy int

const (
	// StalledHold (the default) keeps the trim capped at the group's
	// oldest pending or undelivered entry: the live stream over-retains,
	// and the cycle raises the alarm.
	StalledHold StalledPolicy = iota
	// StalledArchive trims past the stalled group's entries anyway, up to
	// the archive's watermark (never an unarchived record): the archive
	// serves them. The group's pending entries list keeps the ids of
	// trimmed entries.
	StalledArchive
)

// String returns "hold" or "archive".
func (p StalledPolicy) String() string {
	if p == StalledArchive {
		return "archive"
	}
	return "hold"
}

// ErrStalledPolicy is wrapped by the error of a stalled_groups that is
// neither hold nor archive (mq.ParseStalledPolicy, Window.Validate).
var ErrStalledPolicy = errors.New("stalled_groups: want hold or archive")

// Defaults of GroupLimits.
const (
	// DefaultMaxLiveFactor: MaxLive 0 means DefaultMaxLiveFactor × Keep.
	DefaultMaxLiveFactor = 10
	// DefaultMaxHoldMargin: MaxHold 0 means MaxAge + DefaultMaxHoldMargin.
	DefaultMaxHoldMargin = time.Hour
)

// GroupLimits bound what one consumer group may hold back beyond a
// stream's window. A group holds back the trim when its oldest pending
// entry, or its first undelivered one, is below the cut the cycle asks
// for; it is stalled when it holds more than MaxLive records beyond that
// cut, or when the oldest entry it holds is older than MaxHold.
//
// The zero value is the default: MaxLive 10 × Keep (no record limit for a
// window without Keep), MaxHold MaxAge + 1h, Stalled hold. A negative limit
// turns it off.
type GroupLimits struct {
	// MaxLive is the most records beyond the cut a group may hold back
	// (0: DefaultMaxLiveFactor × the window's Keep; < 0: no limit).
	MaxLive int64
	// MaxHold is the greatest age of the oldest entry a group holds back
	// (0: the window's MaxAge + DefaultMaxHoldMargin; < 0: no limit).
	MaxHold time.Duration
	// Stalled is what an archive cycle does about a stalled group.
	Stalled StalledPolicy
}

// Limits returns the limits g sets for a stream of window w, its defaults
// filled: 0 means no limit.
func (g GroupLimits) Limits(w Window) (maxLive int64, maxHold time.Duration) {
	switch {
	case g.MaxLive > 0:
		maxLive = g.MaxLive
	case g.MaxLive == 0 && w.Keep > 0:
		maxLive = DefaultMaxLiveFactor * w.Keep
	}
	switch {
	case g.MaxHold > 0:
		maxHold = g.MaxHold
	case g.MaxHold == 0:
		maxHold = w.MaxAge + DefaultMaxHoldMargin
	}
	return maxLive, maxHold
}

// validate reports whether g's policy is one there is.
func (g GroupLimits) validate() error {
	if g.Stalled != StalledHold && g.Stalled != StalledArchive {
		return fmt.Errorf("stalled policy %d: %w", g.Stalled, ErrStalledPolicy)
	}
	return nil
}

// TrimAfter says what a cycle waits for before it trims what it folded.
type TrimAfter int

const (
	// TrimAfterLocal trims once the fold is durable in the local volume.
	TrimAfterLocal TrimAfter = iota
	// TrimAfterRemote trims only what a push to the remote covers: with
	// more than one node this is what keeps failover lossless.
	TrimAfterRemote
)

// String returns "local" or "remote".
func (t TrimAfter) String() string {
	if t == TrimAfterRemote {
		return "remote"
	}
	return "local"
}

// Retention is the archive's retention horizon: below it, archived pages
// are dropped, oldest first. Both limits apply (a record is kept while it
// is among the newest Count archived records and minted within MaxAge);
// zero means that limit does not apply, and the zero Retention keeps
// everything. W does not move: a dropped record is gone, not live again.
type Retention struct {
	// MaxAge drops archived records minted more than MaxAge before now.
	MaxAge time.Duration
	// Count keeps at most the newest Count archived records.
	Count uint64
}

// IsZero reports whether r keeps everything.
func (r Retention) IsZero() bool { return r.MaxAge <= 0 && r.Count == 0 }

// Validate refuses a negative age.
func (r Retention) Validate() error {
	if r.MaxAge < 0 {
		return fmt.Errorf("archive retention: negative age %v", r.MaxAge)
	}
	return nil
}

// CycleOptions are the settings of one archive cycle.
type CycleOptions struct {
	// Window is the live part to leave (Keep, MaxAge, or both; one is
	// needed).
	Window Window
	// TrimAfter is what the trim waits for (default TrimAfterLocal).
	TrimAfter TrimAfter
	// Retain is the archive's retention horizon for this cycle (zero:
	// none).
	Retain Retention
}

// ArchiveState is where an archive volume stands at one LSN.
type ArchiveState struct {
	// Pages is the number of record pages; they are at ArchiveBase+0 up to
	// ArchiveBase+Pages-1, in id order. Zero: nothing was ever folded.
	Pages uint64
	// W is the watermark: the id of the newest folded record (meaningless
	// while Pages is zero). Every record with id ≤ W is in the archive.
	W xid.ID
	// Low is the offset of the first retained page: retention dropped the
	// pages below it (in id order, so the oldest records). Low ≤ Pages; W
	// does not move when pages are dropped.
	Low uint64
	// LSN is the volume LSN this state was read at.
	LSN uint64
}

// Retained returns the number of record pages still readable, Pages − Low.
func (s ArchiveState) Retained() uint64 { return s.Pages - s.Low }

// Empty reports whether nothing was ever folded.
func (s ArchiveState) Empty() bool { return s.Pages == 0 }

// Covers reports whether id is at or below W, i.e. belongs to the archive.
func (s ArchiveState) Covers(id xid.ID) bool { return s.Pages > 0 && !s.W.Less(id) }

// StalledGroup is one consumer group that holds back a stream's trim past
// its limits, as a cycle found it.
type StalledGroup struct {
	// Group is the consumer group's name.
	Group string `json:"group"`
	// Pending is the number of entries delivered to its consumers and not
	// acknowledged (XPENDING).
	Pending int64 `json:"pending"`
	// LastDelivered is the id of the last entry delivered to the group.
	LastDelivered string `json:"last_delivered"`
	// Lag is the number of entries not yet delivered to the group (XINFO
	// GROUPS; nil when Redis cannot tell, after deletions).
	Lag *int64 `json:"lag"`
	// Hold is the lowest id the group holds: its oldest pending entry, or
	// the successor of LastDelivered.
	Hold string `json:"hold"`
	// Oldest is the id of the oldest live entry the group holds ("" when
	// it holds none: entries it holds were trimmed, see archive's
	// ReasonPassed).
	Oldest string `json:"oldest"`
	// Held is the number of live records the group holds beyond the cut,
	// counted up to the larger of MaxLive + 1 and 10,000; HeldMore says
	// there are more.
	Held     int64 `json:"held"`
	HeldMore bool  `json:"held_more,omitempty"`
	// Age is how old the oldest entry the group holds was at the cycle,
	// from its id's milliseconds (Hold's when entries it holds were
	// trimmed).
	Age        time.Duration `json:"-"`
	AgeSeconds float64       `json:"age_seconds"`
	// Reason is archive's ReasonMaxLive, ReasonMaxHold or both,
	// comma-separated, or ReasonPassed.
	Reason string `json:"reason"`
	// Passed: the cycle trimmed past the group's entries (StalledArchive);
	// its pending entries list may name ids no longer in the stream.
	Passed bool `json:"passed"`
}

// AppTrim reports entries of an archived stream removed by someone else
// (the application's MAXLEN, XTRIM or XDEL) before they were folded.
type AppTrim struct {
	// Kind is "xdel" (max-deleted-entry-id above W) or "trim" (the oldest
	// unfolded entry the last cycle left is gone); "" when none was seen.
	Kind string `json:"kind"`
	// From is the lowest id known removed unfolded (Redis id form): for
	// "xdel" the max-deleted-entry-id, for "trim" the entry the last cycle
	// left first. Entries from W's successor up to the stream's first
	// entry may be missing from the archive.
	From string `json:"from"`
}

// Detected reports whether t reports a removal.
func (t AppTrim) Detected() bool { return t.Kind != "" }

// ErrTooLarge: a record is larger than the archive holds (archive's
// MaxRecordBytes).
var ErrTooLarge = errors.New("archive: record larger than the archive holds")

// TooLargeError says which record was too large for the archive, and by
// how much.
type TooLargeError struct {
	ID    xid.ID `json:"-"`     // the record's id
	XID   string `json:"id"`    // the same, as a Redis id
	Bytes int    `json:"bytes"` // its body's length
	Max   int    `json:"max"`   // archive's MaxRecordBytes
}

// Error describes the record.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("archive: record %s is %d bytes, at most %d are archived", e.XID, e.Bytes, e.Max)
}

// Unwrap returns ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// CycleResult is the answer of an archive cycle. Watermark is the newest
// archived id (EVT_…), null before the first fold; Dropped, left out when
// 0, counts the archived records retention dropped.
type CycleResult struct {
	Folded    int64   `json:"folded"`
	Trimmed   int64   `json:"trimmed"`
	Watermark *string `json:"watermark"`
	Dropped   int64   `json:"dropped,omitempty"`
	// StalledGroups, left out when none, are the consumer groups that held
	// the trim back past the window's limits (Window.Groups), passed by the
	// trim under stalled_groups: archive.
	StalledGroups []StalledGroup `json:"stalled_groups,omitempty"`
	// AppTrimmed is there when the cycle found entries above the
	// watermark removed by another client before they were folded
	// (AppTrim: the application trims the stream itself).
	AppTrimmed *AppTrim `json:"app_trimmed,omitempty"`
	// TooLarge, left out when none, names the entry the cycle could not
	// archive because it is larger than archive.MaxRecordBytes (1 GiB,
	// more than a Redis of default settings accepts): the watermark
	// stopped below it and the trim held there, so it and the entries
	// after it stay live until it is removed from the stream.
	TooLarge []*TooLargeError `json:"too_large,omitempty"`
	// State is the archive after the cycle, for a caller in the same
	// process (serve's events); it is not part of the JSON.
	State ArchiveState `json:"-"`
}

// ArchiveStatus is where the seam of a stream is: the watermark (null
// before the first fold), the records ever archived, the entries of the
// live stream, the archive volume and its LSN. Low and Retained are there
// once archive retention dropped records: the sequence number of the
// first archived record kept and how many are still readable.
type ArchiveStatus struct {
	Watermark *string `json:"watermark"`
	Archived  uint64  `json:"archived"`
	Live      int64   `json:"live"`
	Volume    string  `json:"volume"`
	LSN       uint64  `json:"lsn"`
	Low       *uint64 `json:"low,omitempty"`
	Retained  *uint64 `json:"retained,omitempty"`
	// StalledGroups, left out when none, are the consumer groups the
	// stream's last trimming cycle found stalled (archive.StalledGroups),
	// as of StalledAt.
	StalledGroups []StalledGroup `json:"stalled_groups,omitempty"`
	StalledAt     *time.Time     `json:"stalled_at,omitempty"`
	// AppTrimmed is there once entries above the watermark were found
	// removed by another client before they were folded (AppTrim).
	AppTrimmed *AppTrim `json:"app_trimmed,omitempty"`
}

// GroupInfo is one consumer group of a stream (XINFO GROUPS).
type GroupInfo struct {
	// Name is the group's name.
	Name string `json:"group"`
	// Consumers are the group's consumers; Pending the entries delivered
	// to them and not acknowledged.
	Consumers int64 `json:"consumers"`
	Pending   int64 `json:"pending"`
	// LastDelivered is the id of the last entry delivered to the group.
	LastDelivered string `json:"last_delivered"`
	// Lag is the entries not yet delivered to the group (nil when Redis
	// cannot tell, after deletions, or before Redis 7).
	Lag *int64 `json:"lag"`
}

// StreamGroup is one consumer group of a stream: XINFO GROUPS, whether it
// holds entries back from trimming, and the last archive cycle's verdict on
// it.
type StreamGroup struct {
	GroupInfo
	// HoldsTrim: the group has entries pending or not yet delivered, which
	// no trim passes (unless stalled_groups: archive and it is stalled).
	HoldsTrim bool `json:"holds_trim"`
	// Stalled is the last archive cycle's reason for finding the group
	// stalled (max_live, max_hold, passed), "" if it did not.
	Stalled string `json:"stalled"`
}

// GroupList is a stream's consumer groups.
type GroupList struct {
	Groups []StreamGroup `json:"groups"`
	// CheckedAt is when the last archive cycle judged the groups (RFC
	// 3339; "" before any).
	CheckedAt string `json:"checked_at"`
}
