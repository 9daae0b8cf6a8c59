package server

import (
	"cmp"
	"context"
	"net/http"
	"slices"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// DeleteDeadConfirm is the value of the confirm parameter that DELETE
// /v1/queues/{q}/dead insists on: a deleted dead letter exists nowhere
// else.
const DeleteDeadConfirm = echostore.DeleteDeadConfirm

// maxListedQueues bounds GET /v1/queues.
const maxListedQueues = echostore.MaxListedQueues

// QueueList is the answer of GET /v1/queues: every queue with a job stream
// in Redis or handled by this serve (at most 1000, by name), each with its
// status, and the accept tier's outbox.
type QueueList struct {
	Queues []QueueRow   `json:"queues"`
	Accept AcceptStatus `json:"accept"`
}

// QueueRow is one queue of GET /v1/queues: its job stream's state and,
// for a queue whose jobs this serve's accept tier has taken, the tier's
// side of it.
type QueueRow struct {
	echostore.QueueStatus
	// Retried counts the queue's deliveries after the first (claims of a
	// job whose earlier claim was not acknowledged in time) that this
	// serve handed out since it started.
	Retried int64 `json:"retried"`
	// Accept is nil for a queue the tier has not met since serve started.
	Accept *QueueAccept `json:"accept,omitempty"`
}

// QueueAccept is the accept tier's side of one queue: the jobs accepted
// and not yet committed (against the outbox's K, in QueueList.Accept), the
// sizes of its latest group commits, and the latency of its latest sync
// enqueues.
type QueueAccept struct {
	// Pending are the jobs accepted and not yet taken by the queue's
	// committer; Sync of them have a sync caller waiting.
	Pending int `json:"pending"`
	Sync    int `json:"sync"`
	// Batches are the job counts of the latest commits (at most 16), oldest
	// first; Commits counts every commit since serve started.
	Batches []int  `json:"batches"`
	Commits uint64 `json:"commits"`
	// LastPushMs is how long the last commit's push took, in milliseconds.
	LastPushMs float64 `json:"last_push_ms"`
	// SyncP50Ms and SyncP99Ms are the quantiles of the latest SyncN sync
	// enqueues' latency (at most 256; 0 when there were none).
	SyncP50Ms float64 `json:"sync_p50_ms"`
	SyncP99Ms float64 `json:"sync_p99_ms"`
	SyncN     int     `json:"sync_n"`
}

// AcceptStatus is the accept tier's outbox as a console shows it.
type AcceptStatus struct {
	// Pending are the jobs accepted and not yet committed to their queue's
	// accept volume (every queue).
	Pending int `json:"pending"`
	// Undurable are the outbox records acknowledged and not yet durable on
	// local disk; K is the most a crash can lose.
	Undurable uint64 `json:"undurable"`
	K         int    `json:"k"`
}

// JobList is the answer of GET /v1/queues/{q}/jobs (Node.Jobs).
type JobList = echostore.JobList

// DeleteDeadResult is the answer of DELETE /v1/queues/{q}/dead
// (Node.DeleteDead).
type DeleteDeadResult = echostore.DeleteDeadResult

func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) error {
	out, err := s.queueList(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// queueList lists every queue with a job stream in Redis, handled by this
// serve or declared in its configuration (at most maxListedQueues, by
// name), with its status, and the outbox.
func (s *Server) queueList(ctx context.Context) (QueueList, error) {
	seen := map[names.Queue]bool{}
	known, err := s.node.Queues(ctx)
	if err != nil {
		return QueueList{}, err
	}
	for _, q := range known {
		seen[q] = true
	}
	s.m.jobs.mu.Lock()
	for q := range s.m.jobs.queues {
		seen[q] = true
	}
	s.m.jobs.mu.Unlock()
	for _, qc := range s.cfg.Queues {
		if q, err := names.ParseQueue(qc.Name); err == nil {
			seen[q] = true
		}
	}
	qs := make([]names.Queue, 0, len(seen))
	for q := range seen {
		qs = append(qs, q)
	}
	slices.SortFunc(qs, func(a, b names.Queue) int { return cmp.Compare(a.String(), b.String()) })
	if len(qs) > maxListedQueues {
		qs = qs[:maxListedQueues]
	}
	tier := map[names.Queue]accept.QueueStats{}
	for _, st := range s.node.AcceptQueues() {
		tier[st.Queue] = st
	}
	out := QueueList{Queues: make([]QueueRow, 0, len(qs))}
	for _, q := range qs {
		st, err := s.node.QueueStatus(ctx, q)
		if err != nil {
			return QueueList{}, err
		}
		row := QueueRow{QueueStatus: st, Retried: s.m.jobs.retriedJobs(q)}
		if ts, ok := tier[q]; ok {
			p50, p99, n := s.m.jobs.syncQuantiles(q)
			row.Accept = &QueueAccept{Pending: ts.Pending, Sync: ts.Sync, Batches: ts.Batches, Commits: ts.Commits,
				LastPushMs: float64(ts.LastPush.Microseconds()) / 1000, SyncP50Ms: p50, SyncP99Ms: p99, SyncN: n}
		}
		out.Queues = append(out.Queues, row)
	}
	if st, ok := s.node.OutboxStats(); ok {
		out.Accept = AcceptStatus{Pending: st.Live, Undurable: st.Appended - st.Durable, K: s.node.OutboxK()}
	}
	return out, nil
}

func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	v := r.URL.Query().Get("state")
	if v == "" {
		return badRequest("give the state: ?state=ready, pending, delayed or dead")
	}
	st, err := mq.ParseJobState(v)
	if err != nil {
		return badRequest("%w", err)
	}
	limit, err := intParam(r, "limit", 50, 1)
	if err != nil {
		return err
	}
	if limit > MaxBatch {
		return badRequest("limit %d: want 1 to %d", limit, MaxBatch)
	}
	list, err := s.node.Jobs(r.Context(), q, st, limit)
	if err != nil && len(list.Jobs) == 0 {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) handleDeleteDead(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	if c := r.URL.Query().Get("confirm"); c != DeleteDeadConfirm {
		return badRequest("a deleted dead letter exists nowhere else: confirm with ?confirm=%s", DeleteDeadConfirm)
	}
	var b entriesBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if len(b.Entries) == 0 || b.All || b.Limit != 0 {
		return badRequest(`give the dead-letter entries to delete: {"entries":["<entry id>",…]}`)
	}
	if len(b.Entries) > MaxBatch {
		return badRequest("%d entries: at most %d at a time", len(b.Entries), MaxBatch)
	}
	if err := checkEntries(b.Entries); err != nil {
		return err
	}
	res, err := s.node.DeleteDead(r.Context(), q, b.Entries)
	if err != nil {
		return err
	}
	s.m.jobs.seen(q)
	s.log.Info("serve: dead letters deleted", "queue", q.String(), "deleted", res.Deleted)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// checkEntries refuses a malformed entry id before anything is touched.
func checkEntries(entries []string) error {
	for _, e := range entries {
		if err := mq.CheckEntryID(e); err != nil {
			return badRequest("entry %q: %w", e, err)
		}
	}
	return nil
}

// StreamGroup is one consumer group of a stream (echostore.StreamGroup).
type StreamGroup = echostore.StreamGroup

// GroupList is the answer of GET /v1/streams/{q}/{s}/groups (Node.Groups).
type GroupList = echostore.GroupList

func (s *Server) handleGroups(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	out, err := s.node.Groups(r.Context(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
