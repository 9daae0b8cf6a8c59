package api

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/echostore/echostore/brand"
)

// The jobs of a queue as the API carries them: what an enqueue asks and
// acknowledges, a claimed job, a dead letter, a queue's status, the
// listings of jobs by state, and the answers of ack, fail, redrive and
// the delete of dead letters.

// Mode is the durability an enqueue asks for: ModeAsync or ModeSync.
type Mode uint8

// The modes of an enqueue.
const (
	// ModeAsync acknowledges once the intent is recorded in the outbox on
	// local disk: a crash loses at most the outbox's K acknowledged
	// records not yet checkpointed.
	ModeAsync Mode = iota + 1
	// ModeSync acknowledges only after the intent's batch is one Graft
	// commit on the queue's accept volume and that commit is pushed to the
	// remote.
	ModeSync
)

// String returns "async" or "sync".
func (m Mode) String() string {
	switch m {
	case ModeAsync:
		return "async"
	case ModeSync:
		return "sync"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// EnqueueOptions are the options of an enqueue.
type EnqueueOptions struct {
	// Mode is ModeAsync or ModeSync; the zero Mode is ModeAsync.
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

// BatchJob is one job of a batch enqueue (Node.EnqueueBatch): its
// payload, and as EnqueueOptions its id (zero mints one) and run-at.
type BatchJob struct {
	Payload []byte
	ID      brand.ID
	RunAt   time.Time
}

// BatchReceipt is one job's answer in a batch enqueue: its Receipt, or,
// when the job was not enqueued or its outcome is not known, Error
// ("code: message", the code one of the error body's: id_conflict,
// insufficient_storage, unavailable, timeout, or none) (the
// Receipt then carries the job's id where it has one, which a retry
// gives again, so that it is enqueued once).
type BatchReceipt struct {
	Receipt
	Error string `json:"error,omitempty"`
}

// BatchResult is a batch enqueue's answer: a receipt per job, in the
// batch's order, and how many of them carry an error:
// {"receipts":[…],"failed":n}.
type BatchResult struct {
	Receipts []BatchReceipt `json:"receipts"`
	Failed   int            `json:"failed"`
}

// Job is one claimed job:
// {"id":"JOB_…","entry":…,"attempt":…,"fields":{…}}.
type Job struct {
	ID      brand.ID // the job's id
	EntryID string   // the job stream entry: what Ack and Fail take
	Attempt int      // 1 for the first delivery
	Fields  []Field  // the job's fields
}

// DeadLetter is a job that used up its attempts.
type DeadLetter struct {
	EntryID  string   // its entry in the dead-letter stream
	ID       brand.ID // the job's id
	Attempts int      // attempts made
	Error    string   // why the last attempt failed
	Fields   []Field  // the job's fields
}

// QueueStatus describes a job queue.
type QueueStatus struct {
	Queue     string `json:"queue"`     // the queue's name
	Length    int64  `json:"length"`    // entries in the job stream
	Pending   int64  `json:"pending"`   // claimed, not yet acknowledged
	Lag       int64  `json:"lag"`       // not yet delivered to any consumer
	Delayed   int64  `json:"delayed"`   // waiting for their time
	Dead      int64  `json:"dead"`      // dead letters
	Consumers int64  `json:"consumers"` // consumers holding pending jobs
	// NextDue is when the next delayed job is due (RFC 3339), "" if none.
	NextDue string `json:"next_due"`
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

// FailOptions say which delivery of a job failed.
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
// Entries, or All (up to Limit, default the node's MaxBatch), not both.
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

// JobState is where a job of a queue is: what a listing of the queue's
// jobs selects. The zero value is no state.
type JobState int

// The states of a job.
const (
	// JobReady: in the job stream, not yet delivered to any consumer.
	JobReady JobState = iota + 1
	// JobPending: delivered to a consumer and not yet acknowledged.
	JobPending
	// JobDelayed: waiting in the delayed set for its time (RunAt, or a
	// retry's backoff).
	JobDelayed
	// JobDead: a dead letter (it used up its attempts).
	JobDead
)

// ErrJobState: a job state that is not one of ready, pending, delayed and
// dead.
var ErrJobState = errors.New("mq: unknown job state (want ready, pending, delayed or dead)")

// String returns the state's name: ready, pending, delayed or dead.
func (s JobState) String() string {
	switch s {
	case JobReady:
		return "ready"
	case JobPending:
		return "pending"
	case JobDelayed:
		return "delayed"
	case JobDead:
		return "dead"
	}
	return "JobState(" + strconv.Itoa(int(s)) + ")"
}

// ParseJobState parses a state's name.
func ParseJobState(s string) (JobState, error) {
	for _, st := range []JobState{JobReady, JobPending, JobDelayed, JobDead} {
		if s == st.String() {
			return st, nil
		}
	}
	return 0, fmt.Errorf("job state %q: %w", clip(s), ErrJobState)
}

// ListedJob is one job of a listing of a queue's jobs in one state.
type ListedJob struct {
	// State is the state the listing selected.
	State JobState
	// EntryID is the job's entry: in the job stream (ready, pending) or in
	// the dead letters (dead); "" for a delayed job, which has none yet.
	EntryID string
	// ID is the job's id.
	ID brand.ID
	// Attempt is the delivery the job is on (pending), will get next
	// (ready, delayed), or the attempts it made (dead).
	Attempt int
	// Consumer holds a pending job; Idle is how long since its delivery.
	Consumer string
	Idle     time.Duration
	// Due is when a delayed job becomes ready.
	Due time.Time
	// Error is why a dead letter's last attempt failed.
	Error string
	// Fields are the job's fields.
	Fields []Field
}

// MarshalJSON renders the job as
// {"state":…,"entry":…,"id":"JOB_…","attempt":n,"consumer":…,"idle_ms":n,"due":…,"error":…,"fields":{…}},
// with entry, consumer, idle_ms, due and error only where its state has
// them.
func (j ListedJob) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 96+2*FieldsSize(j.Fields)), `{"state":"`...)
	b = append(b, j.State.String()...)
	b = append(b, '"')
	if j.EntryID != "" {
		b = append(b, `,"entry":`...)
		b = appendString(b, j.EntryID)
	}
	b = append(b, `,"id":"`...)
	b = brand.JOB.AppendFormat(b, j.ID)
	b = append(b, `","attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	if j.State == JobPending {
		b = append(b, `,"consumer":`...)
		b = appendString(b, j.Consumer)
		b = append(b, `,"idle_ms":`...)
		b = strconv.AppendInt(b, j.Idle.Milliseconds(), 10)
	}
	if j.State == JobDelayed {
		b = append(b, `,"due":"`...)
		b = j.Due.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if j.State == JobDead {
		b = append(b, `,"error":`...)
		b = appendString(b, j.Error)
	}
	b = append(b, `,"fields":`...)
	b = AppendFieldsJSON(b, j.Fields)
	return append(b, '}'), nil
}

// JobList is a listing of jobs of one state, oldest first.
type JobList struct {
	Jobs []ListedJob `json:"jobs"`
}

// DeleteDeadResult is the answer of a delete of dead letters: how many
// were deleted.
type DeleteDeadResult struct {
	Deleted int64 `json:"deleted"`
}

// MaxListedQueues bounds a listing of the queues.
const MaxListedQueues = 1000
