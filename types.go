package echostore

import (
	"github.com/echostore/echostore/api"
)

// The request and result types of Node's methods are package api's, the
// wire contract, so that a program that speaks serve's API (package client)
// names the same types without linking the engine. A result's field order
// is the key order of its JSON object, in every output: serve's HTTP
// answers and the CLI's lines alike (doc.go, "JSON").

// Record is api.Record: one record of a stream, its EVT id and its fields,
// in order. Its JSON is {"id":"EVT_…","fields":{…}}.
type Record = api.Record

// Field is api.Field: one name and value of a record.
type Field = api.Field

// Job is api.Job: one claimed job,
// {"id":"JOB_…","entry":…,"attempt":…,"fields":{…}}.
type Job = api.Job

// DeadLetter is api.DeadLetter: a job that used up its attempts.
type DeadLetter = api.DeadLetter

// QueueStatus is api.QueueStatus: a job queue's state (Node.QueueStatus).
type QueueStatus = api.QueueStatus

// Mode is api.Mode: how an enqueue is acknowledged, Async or Sync.
type Mode = api.Mode

// The modes of an enqueue.
const (
	// Async acknowledges once the job is in the outbox on local disk: a
	// crash loses at most the K records not yet checkpointed.
	Async = api.ModeAsync
	// Sync acknowledges once the job's batch is one commit of the queue's
	// accept volume pushed to the remote.
	Sync = api.ModeSync
)

// Window is api.Window: the live part of a stream a cycle leaves, the
// newest Keep records and, with MaxAge, those younger than it.
type Window = api.Window

// Retention is api.Retention: the archive's retention horizon, beyond
// which archived records (past the newest Count, or minted longer than
// MaxAge ago) are dropped.
type Retention = api.Retention

// TrimAfter is api.TrimAfter: what a cycle waits for before it trims, the
// fold durable locally (TrimAfterLocal) or pushed to the remote
// (TrimAfterRemote).
type TrimAfter = api.TrimAfter

// The TrimAfter settings.
const (
	TrimAfterLocal  = api.TrimAfterLocal
	TrimAfterRemote = api.TrimAfterRemote
)

// GCOptions is api.GCOptions: the options of a remote log's garbage
// collection (Node.GC).
type GCOptions = api.GCOptions

// AppendResult is api.AppendResult: the ids (EVT_…) an append minted.
type AppendResult = api.AppendResult

// ReadSide is api.ReadSide: which side of the seam a read reads.
type ReadSide = api.ReadSide

// The sides of a read.
const (
	// ReadMerged is the merge-read: the archive up to the watermark, then
	// the live stream above it.
	ReadMerged = api.ReadMerged
	// ReadLiveOnly reads the live stream alone.
	ReadLiveOnly = api.ReadLiveOnly
	// ReadArchiveOnly reads the archive volume alone; it needs no Redis.
	ReadArchiveOnly = api.ReadArchiveOnly
)

// ReadOptions is api.ReadOptions: a read's range, limit, order, side and
// as-of state.
type ReadOptions = api.ReadOptions

// CycleOptions is api.CycleOptions: the window, trim_after and retention
// of one archive cycle.
type CycleOptions = api.CycleOptions

// CycleResult is api.CycleResult: the answer of an archive cycle.
type CycleResult = api.CycleResult

// ArchiveStatus is api.ArchiveStatus: where the seam of a stream is
// (Node.Status).
type ArchiveStatus = api.ArchiveStatus

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

// DeleteResult is api.DeleteResult: the answer of a stream's delete
// (Node.Delete).
type DeleteResult = api.DeleteResult

// EnqueueOptions is api.EnqueueOptions: the mode, id and due time of an
// enqueue.
type EnqueueOptions = api.EnqueueOptions

// Receipt is api.Receipt: what an enqueue acknowledges.
type Receipt = api.Receipt

// ClaimOptions is api.ClaimOptions: the consumer, count and stalled
// takeover of a claim.
type ClaimOptions = api.ClaimOptions

// ClaimResult is api.ClaimResult: the jobs a claim took.
type ClaimResult = api.ClaimResult

// AckResult is api.AckResult: how many entries an ack acknowledged.
type AckResult = api.AckResult

// FailOptions is api.FailOptions: which delivery of a job failed
// (Node.Fail), and why.
type FailOptions = api.FailOptions

// MaxFailReason is the longest FailOptions.Reason, in bytes.
const MaxFailReason = api.MaxFailReason

// FailResult is api.FailResult: what became of a failed job.
type FailResult = api.FailResult

// DeadOptions is api.DeadOptions: a page of a queue's dead letters.
type DeadOptions = api.DeadOptions

// DeadResult is api.DeadResult: a page of dead letters.
type DeadResult = api.DeadResult

// RedriveOptions is api.RedriveOptions: which dead letters to put back on
// the job stream (Entries, or All up to Limit, default MaxBatch).
type RedriveOptions = api.RedriveOptions

// RedriveResult is api.RedriveResult: the new entries of the jobs a
// redrive put back.
type RedriveResult = api.RedriveResult

// VolumeList is api.VolumeList: the answer of Node.Volumes.
type VolumeList = api.VolumeList

// VolumeStatus is api.VolumeStatus: one volume of a VolumeList.
type VolumeStatus = api.VolumeStatus

// VolumeInfo is api.VolumeInfo: a volume's state (Node.VolumeInfo).
type VolumeInfo = api.VolumeInfo

// PushResult is api.PushResult: the answer of a push.
type PushResult = api.PushResult

// PullResult is api.PullResult: the answer of a pull.
type PullResult = api.PullResult

// HydrateResult is api.HydrateResult: the answer of a hydrate.
type HydrateResult = api.HydrateResult

// ResetResult is api.ResetResult: the answer of a reset to the remote.
type ResetResult = api.ResetResult

// CheckpointResult is api.CheckpointResult: the answer of a remote
// checkpoint.
type CheckpointResult = api.CheckpointResult

// GCResult is api.GCResult: the answer of a remote log's garbage
// collection.
type GCResult = api.GCResult

// ReplicationLag is api.ReplicationLag: how far a volume's remote log
// trails its local log (Node.ReplicationLag).
type ReplicationLag = api.ReplicationLag
