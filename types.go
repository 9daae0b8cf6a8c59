package echostore

import (
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// The request and result types of Node's methods. A result's field order is
// the key order of its JSON object, in every output: serve's HTTP answers
// and the CLI's lines alike (doc.go, "JSON").

// Record is one record of a stream: its EVT id and its fields, in order. Its
// JSON is {"id":"EVT_…","fields":{…}}.
type Record = mq.Record

// Field is one name and value of a record.
type Field = mq.Field

// Job is one claimed job: {"id":"JOB_…","entry":…,"attempt":…,"fields":{…}}.
type Job = mq.Delivery

// DeadLetter is a job that used up its attempts.
type DeadLetter = mq.DeadLetter

// QueueStatus describes a job queue (Node.QueueStatus).
type QueueStatus = mq.QueueStatus

// Mode is how an enqueue is acknowledged: Async or Sync.
type Mode = accept.Mode

// The modes of an enqueue.
const (
	// Async acknowledges once the job is in the outbox on local disk: a
	// crash loses at most the K records not yet checkpointed.
	Async = accept.Async
	// Sync acknowledges once the job's batch is one commit of the queue's
	// accept volume pushed to the remote.
	Sync = accept.Sync
)

// Window is the live part of a stream a cycle leaves: the newest Keep
// records and, with MaxAge, those younger than it.
type Window = archive.Window

// Retention is the archive's retention horizon: archived records beyond
// the newest Count, or minted longer than MaxAge ago, are dropped.
type Retention = archive.Retention

// TrimAfter is what a cycle waits for before it trims: the fold durable
// locally (TrimAfterLocal) or pushed to the remote (TrimAfterRemote).
type TrimAfter = archive.TrimAfter

// The TrimAfter settings.
const (
	TrimAfterLocal  = archive.TrimAfterLocal
	TrimAfterRemote = archive.TrimAfterRemote
)

// GCOptions are the options of a remote log's garbage collection
// (Node.GC).
type GCOptions = remote.GCOptions

// AppendResult is the answer of an append: the records' ids (EVT_…), in
// the order of the records.
type AppendResult struct {
	IDs []string `json:"ids"`
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
	// since included, while the volume keeps that state (Config.History;
	// else wrapping archive.ErrAsOfGone). An as-of read reads the archive
	// alone: Side must not be ReadLiveOnly.
	AsOf AsOf
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
	StalledGroups []archive.StalledGroup `json:"stalled_groups,omitempty"`
	// AppTrimmed is there when the cycle found entries above the
	// watermark removed by another client before they were folded
	// (archive.AppTrim: the application trims the stream itself).
	AppTrimmed *archive.AppTrim `json:"app_trimmed,omitempty"`
	// TooLarge, left out when none, names the entry the cycle could not
	// archive because it is larger than archive.MaxRecordBytes (1 GiB,
	// more than a Redis of default settings accepts): the watermark
	// stopped below it and the trim held there, so it and the entries
	// after it stay live until it is removed from the stream.
	TooLarge []*archive.TooLargeError `json:"too_large,omitempty"`
	// State is the archive after the cycle, for a caller in the same
	// process (serve's events); it is not part of the JSON.
	State archive.State `json:"-"`
}

// ArchiveStatus is where the seam of a stream is (Node.Status): the
// watermark (null before the first fold), the records ever archived, the
// entries of the live stream, the archive volume and its LSN. Low and
// Retained are there once archive retention dropped records: the sequence
// number of the first archived record kept and how many are still
// readable.
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
	StalledGroups []archive.StalledGroup `json:"stalled_groups,omitempty"`
	StalledAt     *time.Time             `json:"stalled_at,omitempty"`
	// AppTrimmed is there once entries above the watermark were found
	// removed by another client before they were folded (archive.AppTrim).
	AppTrimmed *archive.AppTrim `json:"app_trimmed,omitempty"`
}

// The confirmation words of the commands that drop what exists nowhere
// else: the HTTP API's confirm parameter and the CLI's flag (--WORD) are
// these, everywhere (package api).
const (
	// DeleteConfirm confirms the delete of a stream and its archived
	// history (DELETE /v1/streams/{q}/{s}, archive delete).
	DeleteConfirm = api.DeleteConfirm
	// DeleteDeadConfirm confirms the delete of dead letters (DELETE
	// /v1/queues/{q}/dead, queue delete-dead).
	DeleteDeadConfirm = api.DeleteDeadConfirm
)

// DeleteResult is the answer of a stream's delete (Node.Delete).
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

// EnqueueOptions are the options of an enqueue.
type EnqueueOptions struct {
	// Mode is Async or Sync; the zero Mode is Async.
	Mode Mode
	// ID retries an earlier enqueue under its id (not zero, and not ahead
	// of the node's minter); zero mints one.
	ID brand.ID
	// RunAt makes the job due no earlier than then; zero is at once.
	RunAt time.Time
}

// Receipt is what an enqueue acknowledges: the job's id (JOB_…), its mode,
// the remote LSN that made it durable (sync; null for async) and the
// queue's accept volume.
type Receipt struct {
	ID     string  `json:"id"`
	Mode   string  `json:"mode"`
	LSN    *uint64 `json:"lsn"`
	Volume string  `json:"volume"`
}

// ClaimOptions are the options of a claim.
type ClaimOptions struct {
	// Consumer names the claimer (default "http").
	Consumer string
	// Count is the most jobs to claim (default 1).
	Count int
	// Stalled, if positive, first takes over jobs that another consumer
	// claimed and has not acknowledged for this long.
	Stalled time.Duration
}

// ClaimResult is the answer of a claim: the jobs claimed (none is an empty
// list).
type ClaimResult struct {
	Jobs []Job `json:"jobs"`
	// Dead is how many stalled jobs the claim's recovery (ClaimOptions.Stalled)
	// found with their attempts used up and moved to the dead letters.
	Dead int64 `json:"dead,omitempty"`
}

// AckResult is the answer of an ack: how many entries were acknowledged.
type AckResult struct {
	Acked int64 `json:"acked"`
}

// FailOptions say which delivery of a job failed (Node.Fail).
type FailOptions struct {
	// Consumer is the consumer that claimed the job (ClaimOptions.Consumer).
	Consumer string
	// Entry is the job's entry on the job stream (Job.EntryID).
	Entry string
	// Attempt is the attempt that failed (Job.Attempt, 1 for the first):
	// the backoff before the next one grows with it.
	Attempt int
	// Reason says why (at most MaxFailReason bytes); a dead letter keeps it.
	Reason string
}

// MaxFailReason is the longest FailOptions.Reason, in bytes.
const MaxFailReason = 4096

// FailResult says what became of a failed job: Failed is false when the
// job was pending no more (acknowledged, failed or buried already: a fail
// repeated is harmless, as an ack is); else it went to the delayed set for
// its next attempt at RetryAt, or, Dead, to the dead letters.
type FailResult struct {
	Failed   bool       `json:"failed"`
	Dead     bool       `json:"dead"`
	Attempts int        `json:"attempts"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
}

// DeadOptions page through a queue's dead letters.
type DeadOptions struct {
	// After is the dead-letter entry to list after ("": from the oldest).
	After string
	// Limit is the most to list (default 100).
	Limit int
}

// DeadResult is a page of dead letters (none is an empty list).
type DeadResult struct {
	Dead []DeadLetter `json:"dead"`
}

// RedriveOptions say which dead letters to put back on the job stream:
// Entries, or All (up to Limit, default MaxBatch), not both.
type RedriveOptions struct {
	Entries []string
	All     bool
	Limit   int
}

// RedriveResult is the answer of a redrive: the new job stream entries of
// the jobs redriven, and how many.
type RedriveResult struct {
	Entries  []string `json:"entries"`
	Redriven int      `json:"redriven"`
}

// VolumeList is the answer of Node.Volumes: every volume of the data dir,
// by name (none is an empty list).
type VolumeList struct {
	Volumes []VolumeStatus `json:"volumes"`
}

// VolumeStatus is one volume of a VolumeList: graft.Info's fields (volume,
// local_lsn, remote_lsn, sync_lsn, pages, bytes, gc_horizon, created) and
// its replication lag.
type VolumeStatus struct {
	graft.Info
	Lag ReplicationLag `json:"replication_lag"`
}

// VolumeInfo is a volume's state: graft.Info's fields (volume, local_lsn,
// remote_lsn, sync_lsn, pages, bytes, gc_horizon, created), the frames
// not yet fetched from the remote and its replication lag.
type VolumeInfo struct {
	graft.Info
	UnfetchedFrames int            `json:"unfetched_frames"`
	Lag             ReplicationLag `json:"replication_lag"`
}

// PushResult is the answer of a push: the volume after it and the hash of
// its sync point.
type PushResult struct {
	VolumeInfo
	Hash string `json:"hash"`
}

// PullResult is the answer of a pull: the volume after it and the hash of
// its sync point.
type PullResult struct {
	VolumeInfo
	Hash string `json:"hash"`
}

// HydrateResult is the answer of a hydrate: the volume after it and the
// frames it fetched.
type HydrateResult struct {
	VolumeInfo
	FramesFetched int `json:"frames_fetched"`
}

// ResetResult is the answer of a reset to the remote: the volume after it,
// the local commits dropped, the acknowledged records discarded (the count
// the caller confirmed), and, for an archive volume, whether the seam cache
// was lowered to the volume (left out when not).
type ResetResult struct {
	VolumeInfo
	Dropped     uint64 `json:"dropped"`
	Discarded   uint64 `json:"discarded"`
	SeamLowered bool   `json:"seam_lowered,omitempty"`
}

// CheckpointResult is the answer of a remote checkpoint: the volume and
// the LSN of its new checkpoint commit.
type CheckpointResult struct {
	Volume        string `json:"volume"`
	CheckpointLSN uint64 `json:"checkpoint_lsn"`
}

// GCResult is the answer of a remote log's garbage collection: the
// horizon (the oldest retained checkpoint's LSN; 0: none, nothing
// collected) and what was kept and removed, in objects and bytes by kind:
// segments deleted, commit objects replaced by tombstones (LogBytes: their
// size less the tombstones'), checkpoint markers deleted; ObjectsRemoved
// and BytesRemoved are the totals.
type GCResult struct {
	Volume          string `json:"volume"`
	Horizon         uint64 `json:"horizon"`
	SegmentsKept    int    `json:"segments_kept"`
	SegmentsDeleted int    `json:"segments_deleted"`
	LogTrimmed      int    `json:"log_trimmed"`
	MarkersDeleted  int    `json:"markers_deleted"`
	SegmentBytes    int64  `json:"segment_bytes"`
	LogBytes        int64  `json:"log_bytes"`
	MarkerBytes     int64  `json:"marker_bytes"`
	ObjectsRemoved  int    `json:"objects_removed"`
	BytesRemoved    int64  `json:"bytes_removed"`
}
