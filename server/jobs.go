package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// consumerParam checks the ?consumer= of a claim or a fail: "http" when
// none is given.
func consumerParam(r *http.Request) (string, error) {
	consumer := r.URL.Query().Get("consumer")
	if consumer == "" {
		consumer = "http"
	}
	if err := mq.CheckConsumer(consumer); err != nil {
		return "", badRequest("consumer: %w", err)
	}
	return consumer, nil
}

// queuePath checks the {q} of the path.
func queuePath(r *http.Request) (names.Queue, error) {
	return names.ParseQueue(r.PathValue("q"))
}

func (s *Server) handleQueueStatus(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	st, err := s.node.QueueStatus(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	count, err := intParam(r, "count", 1, 1)
	if err != nil {
		return err
	}
	consumer, err := consumerParam(r)
	if err != nil {
		return err
	}
	var stalled time.Duration
	if v := r.URL.Query().Get("stalled"); v != "" {
		if stalled, err = time.ParseDuration(v); err != nil || stalled < 0 {
			return badRequest("stalled %q: want a duration such as 5m", v)
		}
	}
	res, err := s.node.Claim(r.Context(), q, echostore.ClaimOptions{Consumer: consumer, Count: count, Stalled: stalled})
	if err != nil {
		return err
	}
	s.m.jobs.claimedJobs(q, res)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// jobBody is the body of an enqueue.
type jobBody struct {
	// Payload is the job, any JSON value.
	Payload jsontext.Value `json:"payload"`
	// ID is the job's id (JOB_…) to retry an enqueue idempotently; "" mints.
	ID string `json:"id"`
	// RunAt (RFC 3339) makes the job due no earlier; "" is at once.
	RunAt string `json:"run_at"`
}

// handleEnqueue is the two-tier enqueue: mode=async (the default) answers
// once the job is in the outbox (a crash loses at most K), mode=sync once its
// batch is one commit of the accept volume pushed to the remote.
func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	mode, err := enqueueMode(r)
	if err != nil {
		return err
	}
	var b jobBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	j, err := b.job()
	if err != nil {
		return err
	}
	start := time.Now()
	rc, err := s.node.Enqueue(r.Context(), q, j.Payload, echostore.EnqueueOptions{Mode: mode, ID: j.ID, RunAt: j.RunAt})
	if err != nil {
		return err
	}
	s.m.jobs.enqueuedOne(q, mode.String(), time.Since(start))
	writeJSON(w, http.StatusOK, rc)
	return nil
}

// batchBody is the body of a batch enqueue: {"jobs":[jobBody,…]}.
type batchBody struct {
	Jobs []jobBody `json:"jobs"`
}

// job parses b as the job an enqueue takes, or the caller's mistake.
func (b jobBody) job() (echostore.BatchJob, error) {
	if len(b.Payload) == 0 {
		return echostore.BatchJob{}, badRequest(`give the job: {"payload":<any JSON value>}`)
	}
	j := echostore.BatchJob{Payload: b.Payload}
	if b.ID != "" {
		bid, err := brand.Parse(b.ID)
		if err != nil || bid.Brand != brand.JOB || bid.ID == 0 || brand.JOB.Format(bid.ID) != b.ID {
			return j, badRequest("id %q: want a JOB id (JOB_…) that is not zero, as an earlier enqueue answered it, or no id to mint one", b.ID)
		}
		j.ID = bid.ID
	}
	if b.RunAt != "" {
		var err error
		if j.RunAt, err = time.Parse(time.RFC3339Nano, b.RunAt); err != nil || j.RunAt.UnixMilli() <= 0 {
			return j, badRequest("run_at %q: want an RFC 3339 time after 1970, such as 2030-01-02T03:04:05Z", b.RunAt)
		}
	}
	return j, nil
}

// enqueueMode is the mode query parameter of an enqueue (default async).
func enqueueMode(r *http.Request) (accept.Mode, error) {
	v := r.URL.Query().Get("mode")
	if v == "" {
		return accept.Async, nil
	}
	mode, err := accept.ParseMode(v)
	if err != nil {
		return 0, badRequest("mode %q: want async or sync", v)
	}
	return mode, nil
}

// handleEnqueueBatch enqueues up to MaxBatch jobs in one request, all in
// the request's mode, with one receipt each (Node.EnqueueBatch): a sync
// batch answers once the group commits holding its jobs are pushed. A job
// the API or the node refuses for what it is refuses the batch (400,
// naming it), before anything is enqueued; a job's conflict or unknown
// outcome is its receipt's error, and the request answers 200.
func (s *Server) handleEnqueueBatch(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	mode, err := enqueueMode(r)
	if err != nil {
		return err
	}
	var b batchBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if len(b.Jobs) == 0 || len(b.Jobs) > MaxBatch {
		return badRequest(`give 1 to %d jobs: {"jobs":[{"payload":<any JSON value>},…]}; this body has %d`, MaxBatch, len(b.Jobs))
	}
	jobs := make([]echostore.BatchJob, len(b.Jobs))
	for i, jb := range b.Jobs {
		if jobs[i], err = jb.job(); err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
	}
	start := time.Now()
	res, err := s.node.EnqueueBatch(r.Context(), q, jobs, mode)
	if err != nil {
		return err
	}
	d := time.Since(start)
	for _, rc := range res.Receipts {
		if rc.Error == "" {
			s.m.jobs.enqueuedOne(q, mode.String(), d)
		}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// entriesBody is the body of ack and redrive.
type entriesBody struct {
	Entries []string `json:"entries"`
	All     bool     `json:"all"`
	Limit   int      `json:"limit"`
}

func (s *Server) handleAck(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	var b entriesBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if len(b.Entries) == 0 {
		return badRequest(`give the entries to acknowledge: {"entries":["<entry id>",…]}`)
	}
	res, err := s.node.Ack(r.Context(), q, b.Entries)
	if err != nil {
		return err
	}
	s.m.jobs.ackedJobs(q, b.Entries, res.Acked, time.Now())
	writeJSON(w, http.StatusOK, res)
	return nil
}

// FailBody is the body of POST /v1/queues/{q}/fail: the entry of the job
// whose delivery failed, the attempt that failed (its Job.Attempt) and why.
type FailBody struct {
	Entry   string `json:"entry"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// handleFail reports a failed delivery (Node.Fail) of the claim's
// consumer (?consumer=, "http" by default, as for a claim).
func (s *Server) handleFail(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	consumer, err := consumerParam(r)
	if err != nil {
		return err
	}
	var b FailBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	switch {
	case b.Entry == "":
		return badRequest(`give the entry of the failed job and its attempt: {"entry":"<entry id>","attempt":1,"reason":"…"}`)
	case b.Attempt < 1:
		return badRequest("attempt %d: give the attempt that failed (the claim's attempt, 1 or more)", b.Attempt)
	case len(b.Reason) > echostore.MaxFailReason:
		return badRequest("a reason of %d bytes, at most %d", len(b.Reason), echostore.MaxFailReason)
	}
	if err := mq.CheckEntryID(b.Entry); err != nil {
		return badRequest("entry: %w", err)
	}
	res, err := s.node.Fail(r.Context(), q, echostore.FailOptions{Consumer: consumer, Entry: b.Entry, Attempt: b.Attempt, Reason: b.Reason})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) handleDead(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 100, 1)
	if err != nil {
		return err
	}
	res, err := s.node.Dead(r.Context(), q, echostore.DeadOptions{After: r.URL.Query().Get("after"), Limit: limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) handleRedrive(w http.ResponseWriter, r *http.Request) error {
	q, err := queuePath(r)
	if err != nil {
		return err
	}
	var b entriesBody
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	if b.All == (len(b.Entries) > 0) {
		return badRequest(`give the dead-letter entries to redrive {"entries":[…]} or {"all":true,"limit":N} (not both)`)
	}
	if b.Limit < 0 || b.Limit > MaxBatch || b.Limit != 0 && !b.All {
		return badRequest(`limit %d: give {"all":true,"limit":N} with N from 1 to %d (0 or none: %d)`, b.Limit, MaxBatch, MaxBatch)
	}
	res, err := s.node.Redrive(r.Context(), q, echostore.RedriveOptions{Entries: b.Entries, All: b.All, Limit: b.Limit})
	if err != nil {
		return err
	}
	s.m.jobs.redrivenJobs(q, res.Redriven)
	writeJSON(w, http.StatusOK, res)
	return nil
}
