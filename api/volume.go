package api

import (
	"time"

	"github.com/echostore/echostore/names"
)

// The volumes of a data dir as the API carries them: a volume's state and
// replication lag, and what push, pull, hydrate, reset, checkpoint and
// remote GC answer (packages graft and graft/remote name GraftInfo and
// GCOptions too).

// GraftInfo describes a volume as graft keeps it. JSON field names are
// those of `echostore volume info`.
type GraftInfo struct {
	Volume    names.Volume `json:"volume"`
	LocalLSN  uint64       `json:"local_lsn"`  // head: the newest local commit
	RemoteLSN uint64       `json:"remote_lsn"` // newest remote LSN pushed or applied; 0 before the first
	SyncLSN   uint64       `json:"sync_lsn"`   // the local LSN that remote commit covers (the sync point)
	Pages     uint64       `json:"pages"`      // pages present at the head
	Bytes     uint64       `json:"bytes"`      // sum of their lengths
	Horizon   uint64       `json:"gc_horizon"` // lowest readable LSN
	KeepFrom  uint64       `json:"-"`          // GC never passes it; graft.Unpinned if unset
	Created   time.Time    `json:"created"`
}

// ReplicationLag is how far a volume's remote log trails its local log: the
// local commits not yet pushed, the records on them where the volume's kind
// says what a record is, and the age of the oldest of them.
type ReplicationLag struct {
	// Commits is local LSN − sync LSN: the local commits no remote commit
	// covers yet.
	Commits uint64 `json:"commits"`
	// Records counts the records those commits wrote: for an archive
	// volume (archive.Q.S, or a key stream's) the archived records, for an
	// accept volume (accept.Q.N) the jobs. nil where it is not known (any
	// other volume, more than echostore.MaxLagScan commits behind, or
	// commit records collected by GC).
	Records *uint64 `json:"records,omitempty"`
	// Seconds is the age of the oldest commit not yet pushed (0: none, or
	// not known: GC collected its commit record, which happens only to a
	// volume never pushed).
	Seconds float64 `json:"seconds"`
}

// VolumeList is every volume of the data dir, by name (none is an empty
// list).
type VolumeList struct {
	Volumes []VolumeStatus `json:"volumes"`
}

// VolumeStatus is one volume of a VolumeList: GraftInfo's fields (volume,
// local_lsn, remote_lsn, sync_lsn, pages, bytes, gc_horizon, created) and
// its replication lag.
type VolumeStatus struct {
	GraftInfo
	Lag ReplicationLag `json:"replication_lag"`
}

// VolumeInfo is a volume's state: GraftInfo's fields (volume, local_lsn,
// remote_lsn, sync_lsn, pages, bytes, gc_horizon, created), the frames
// not yet fetched from the remote and its replication lag.
type VolumeInfo struct {
	GraftInfo
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

// GCOptions configures a remote log's garbage collection.
type GCOptions struct {
	// KeepCheckpoints is how many of the newest checkpoints to retain
	// (values below 1 mean 1). The oldest retained one is the GC horizon.
	KeepCheckpoints int
	// MinAge protects unreferenced segments younger than this: a writer
	// uploads a commit's segments before it publishes the commit, so a
	// young unreferenced segment may belong to a commit in flight. It must
	// exceed the longest time a prepared commit waits before it is
	// published; a writer whose pending commit is older prepares it again.
	MinAge time.Duration
	// Grace holds the horizon back to a checkpoint whose marker is at
	// least Grace old: the horizon is the older of the KeepCheckpoints-th
	// newest checkpoint and the newest checkpoint written at or before
	// now − Grace (no such checkpoint: nothing is collected). A reader that
	// pulled less than Grace ago holds a state at or above such a
	// checkpoint's LSN only if it pulled after it was written; one that
	// pulled before it may need segments only older commits reference, and
	// those are kept until the next checkpoint after its pull is Grace old.
	// So a follower or lazy reader faults no page on a deleted object for
	// Grace after its last pull (docs/REMOTE.md, "Remote GC"). Zero: no
	// age is required (the KeepCheckpoints-th newest is the horizon).
	Grace time.Duration
	// TrimLog also replaces the commit objects below the horizon with
	// tombstones and deletes the checkpoint markers older than it. A
	// tombstone keeps the LSN's key taken (the fence): were the key
	// deleted, a stale writer could create that LSN again.
	TrimLog bool
	// Now returns the current time (time.Now if nil).
	Now func() time.Time
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
