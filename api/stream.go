package api

import (
	"strconv"
	"time"

	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// The streams as the API carries them: what an append answers, a read's
// range and side, the form of a stream's ids, and what a delete answers.

// AppendResult is the answer of an append: the records' ids (EVT_…), in
// the order of the records.
type AppendResult struct {
	IDs []string `json:"ids"`
}

// StreamIDForm is how the ids of ref's stream print (FormatID): Redis
// ids "<ms>-<seq>" for a stream at a key, whose ids are the
// application's, and branded ids "EVT_…" (where they are branded) for a
// stream of a queue, whose ids echostore minted. It is the one place that
// chooses the form per stream.
func StreamIDForm(ref names.StreamRef) IDForm {
	if ref.IsKey() {
		return IDRedis
	}
	return IDBranded
}

// ReadSide says which side of the seam a read reads.
type ReadSide int

// The sides of a read.
const (
	// ReadMerged is the merge-read: the archive up to the watermark, then
	// the live stream above it.
	ReadMerged ReadSide = iota
	// ReadLiveOnly reads the live stream alone.
	ReadLiveOnly
	// ReadArchiveOnly reads the archive volume alone; it needs no Redis.
	ReadArchiveOnly
)

// ReadOptions are a read's range and side.
type ReadOptions struct {
	// From and To bound the ids (Redis ids), inclusive; xid.Min and
	// xid.Max (the zero To is xid.Max) leave an end open.
	From, To xid.ID
	// Limit is the most records to return (≤ 0: all).
	Limit int
	// Reverse reads newest first.
	Reverse bool
	// Side is the side of the seam to read (default ReadMerged).
	Side ReadSide
	// AsOf, if set, reads the archive as it stood then (an LSN of its
	// volume, or a time): the records it held, those retention dropped
	// since included, while the volume keeps that state (the node's
	// history; else the read fails as gone: CodeGone). An as-of read reads
	// the archive alone: Side must not be ReadLiveOnly.
	AsOf AsOf
}

// AsOf names a past state of a stream's archive for a read
// (ReadOptions.AsOf): a volume LSN (the LSN of an archive cycle's state,
// ArchiveStatus.LSN), or a time, which is the newest commit made by then.
// The zero AsOf is the present: the read is not an as-of read.
type AsOf struct {
	LSN  uint64
	Time time.Time
}

// IsZero reports whether a is the present.
func (a AsOf) IsZero() bool { return a.LSN == 0 && a.Time.IsZero() }

// String returns the LSN in decimal or the time in RFC 3339
// (echostore.ParseAsOf reads them back); "" for the zero AsOf.
func (a AsOf) String() string {
	switch {
	case !a.Time.IsZero():
		return a.Time.UTC().Format(time.RFC3339Nano)
	case a.LSN > 0:
		return strconv.FormatUint(a.LSN, 10)
	}
	return ""
}

// DeleteResult is the answer of a stream's delete (confirmed with
// DeleteConfirm).
type DeleteResult struct {
	// Deleted is always true in an answer.
	Deleted bool `json:"deleted"`
	// Volume is the archive volume; VolumeDropped is false when the data
	// dir had none.
	Volume        string `json:"volume"`
	VolumeDropped bool   `json:"volume_dropped"`
	// LiveEntries is how many entries the live stream held.
	LiveEntries int64 `json:"live_entries"`
	// RemoteKept: the volume's remote log was not deleted (no remote).
	RemoteKept bool `json:"remote_log_kept"`
	// RemoteObjects counts the remote objects deleted.
	RemoteObjects int `json:"remote_objects"`
}
