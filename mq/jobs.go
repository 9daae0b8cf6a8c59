package mq

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
	"github.com/redis/rueidis"
)

// JobOptions configure the job queues of a Client. A zero field means its
// default.
type JobOptions struct {
	// Group is the consumer group of every job stream (default "workers").
	Group string
	// ClaimBatch is how many jobs Claim takes when asked for none in
	// particular (default 64).
	ClaimBatch int
	// MaxAttempts is how many deliveries a job gets before it goes to the
	// dead letters (default 5).
	MaxAttempts int
	// MinIdle is how long a claim may go unacknowledged before Recover
	// takes it over (default 1m).
	MinIdle time.Duration
	// Backoff is the pause before attempt+1 after attempt failed (default:
	// 1s doubling per attempt, at most 1h).
	Backoff func(attempt int) time.Duration
	// DedupWindow is how long an enqueued job id is remembered, so that
	// enqueueing it again is a no-op (default 24h). Each remembered id costs
	// a sorted-set member until then.
	DedupWindow time.Duration
	// Clock gives the time of due dates, backoffs and the dedup window
	// (default time.Now).
	Clock func() time.Time
	// Outcomes, when not zero, keeps the end of every delivery: each ack
	// (done), failure (retry or dead) and stall's burial (dead) is appended,
	// in the script that moves the job on, to the stream Outcomes of the
	// job's queue (OutcomeRef), with the job's id, attempt, consumer, error
	// and own fields (the scripts' header, jobs_lua.go). Zero: outcomes are
	// not kept, and an acknowledged job leaves no trace.
	Outcomes names.Stream
}

// OutcomeRef returns the stream of q that the outcomes of its jobs are
// appended to (JobOptions.Outcomes), and false when outcomes are not kept.
func (o JobOptions) OutcomeRef(q names.Queue) (names.StreamRef, bool) {
	if o.Outcomes.IsZero() {
		return names.StreamRef{}, false
	}
	ref, err := names.NewStreamRef(q, o.Outcomes)
	return ref, err == nil
}

// outcomeKeys appends to keys the outcome stream of q and its change feed,
// when outcomes are kept (the job scripts' optional last keys).
func (c *Client) outcomeKeys(q names.Queue, keys []string) []string {
	ref, ok := c.opts.Jobs.OutcomeRef(q)
	if !ok {
		return keys
	}
	return append(keys, StreamKey(ref), DirtyOf(ref))
}

func (o JobOptions) withDefaults() JobOptions {
	if o.Group == "" {
		o.Group = "workers"
	}
	if o.ClaimBatch <= 0 {
		o.ClaimBatch = 64
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.MinIdle <= 0 {
		o.MinIdle = time.Minute
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.DedupWindow <= 0 {
		o.DedupWindow = 24 * time.Hour
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// DefaultBackoff waits 1s after the first failed attempt and doubles the
// wait after each further one, up to an hour.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 13 {
		return time.Hour
	}
	return min(time.Second<<(attempt-1), time.Hour)
}

// IsReservedJobField reports whether a job may not use name for a field of
// its own: the queue keeps "job", "attempt" and "error" for itself.
func IsReservedJobField(name string) bool {
	return name == "job" || name == "attempt" || name == "error"
}

// Job is a unit of work. Its id is a JOB-branded id: the same job (id and
// fields) enqueued twice within JobOptions.DedupWindow is enqueued once; the
// id with other fields is a Conflict and not enqueued.
type Job struct {
	// ID is the job's id; zero means mint one.
	ID brand.ID
	// Fields are the job's data, in order; they may be empty.
	Fields []Field
	// RunAt delays the job until then; zero or past means at once.
	RunAt time.Time
}

// EnqueueResult says what Enqueue (or EnqueueBatch, for one job) did.
type EnqueueResult struct {
	ID brand.ID // the job's id (minted if the job had none)
	// EntryID is the job's entry in the job stream ("" unless queued now).
	EntryID string
	// Delayed: the job waits in the delayed set until RunAt.
	Delayed bool
	// Duplicate: the id was enqueued before, within the dedup window
	// (perhaps by this very call, by an attempt whose reply was lost, or
	// earlier in its batch), with the same fields; nothing more was done.
	Duplicate bool
	// Conflict: the id was enqueued before, within the dedup window, with
	// other fields; nothing was done (the job under that id is the earlier
	// one). CheckJobID tells it before an enqueue.
	Conflict bool
}

// EnqueueError reports an EnqueueBatch that did not complete. Done holds
// the results of the jobs of the batch that were sent and answered (a
// prefix of the batch, in order); Unknown the ids of the chunk whose
// outcome is not known (with ErrOutcomeUnknown): those jobs are enqueued
// under exactly these ids, or not at all, and enqueueing them again under
// these ids is safe (one that had landed comes back Duplicate). The jobs
// after them were not sent.
type EnqueueError struct {
	Queue   string          // the queue
	Done    []EnqueueResult // results of the jobs that were enqueued
	Unknown []brand.ID      // ids of the chunk whose outcome is unknown
	Err     error           // the cause
}

func (e *EnqueueError) Error() string {
	msg := fmt.Sprintf("enqueue on %s: %v", e.Queue, e.Err)
	if len(e.Done) > 0 {
		msg += fmt.Sprintf(" (%d jobs of the batch were enqueued before)", len(e.Done))
	}
	if len(e.Unknown) > 0 {
		msg += fmt.Sprintf(" (enqueue %s… again to be sure)", brand.JOB.Format(e.Unknown[0]))
	}
	return msg
}

func (e *EnqueueError) Unwrap() error { return e.Err }

// Delivery is api.Job: a claimed job.
type Delivery = api.Job

// DeadLetter is api.DeadLetter: a job that used up its attempts.
type DeadLetter = api.DeadLetter

// QueueStatus is api.QueueStatus: what describes a job queue.
type QueueStatus = api.QueueStatus

func (c *Client) now() time.Time { return c.opts.Jobs.Clock() }

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func checkJob(lim Limits, fields []Field) error {
	for _, f := range fields {
		if IsReservedJobField(f.Name) {
			return &RecordError{Field: f.Name, Err: ErrReservedField}
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return lim.Check(fields)
}

// CheckJob reports whether Enqueue would refuse job for its fields
// (reserved names, the client's Limits) without sending anything: a
// *RecordError, or nil. A caller that acknowledges a job before it
// enqueues it (the accept tier) checks it first, so that a job it has
// acknowledged cannot be refused later.
func (c *Client) CheckJob(job Job) error {
	return checkJob(c.opts.Limits, job.Fields)
}

// Enqueue adds a job to queue q, at once or, with job.RunAt in the future,
// to the delayed set. A job id already enqueued within the dedup window is
// a no-op (Duplicate), so a producer may retry an enqueue safely. It is
// EnqueueBatch of one job: see there for what happens to a lost reply.
func (c *Client) Enqueue(ctx context.Context, q names.Queue, job Job) (EnqueueResult, error) {
	res, err := c.EnqueueBatch(ctx, q, []Job{job})
	if err != nil {
		return EnqueueResult{}, err
	}
	return res[0], nil
}

// EnqueueBatch enqueues jobs on queue q in one round trip per chunk and
// returns their results in input order. Each job fares exactly as it would
// through Enqueue, in the order given: a job whose id was enqueued within
// JobOptions.DedupWindow (also earlier in the same batch) is Duplicate, or
// Conflict if its fields differ from that job's, and nothing is done for
// it; a job whose RunAt is after now is Delayed; any
// other is queued at once under its EntryID. A job with ID 0 gets a minted
// id.
//
// Every job is checked (reserved field names, Limits) and every missing id
// minted before anything is sent: one invalid job fails the batch with a
// *RecordError whose Index is the job's position, and nothing is enqueued.
// The batch goes in chunks bounded by Options.ChunkRecords jobs and
// Options.ChunkBytes bytes of field names and values (defaults 256 jobs,
// 1 MiB; a job larger than ChunkBytes goes alone), each chunk one
// server-side script call. A chunk whose reply was lost is sent again with
// the same ids (Options.AppendRetries, RetryBackoff): the jobs of it that
// had landed then come back Duplicate, which a caller may take for success,
// and none is enqueued twice. If a chunk fails, the error is an
// *EnqueueError: the results of the chunks before it are returned (and are
// in its Done), and if the chunk's outcome is unknown (ErrOutcomeUnknown),
// its Unknown lists the ids under which its jobs are enqueued or not at
// all: enqueueing them again under those ids is safe.
func (c *Client) EnqueueBatch(ctx context.Context, q names.Queue, jobs []Job) ([]EnqueueResult, error) {
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	for i, job := range jobs {
		if err := checkJob(c.opts.Limits, job.Fields); err != nil {
			var re *RecordError
			if errors.As(err, &re) {
				re.Index = i
			}
			return nil, fmt.Errorf("enqueue on %s: %w", q, err)
		}
	}
	ids := make([]brand.ID, len(jobs))
	for i, job := range jobs {
		ids[i] = job.ID
		if ids[i] == 0 {
			var err error
			if ids[i], err = c.minter.Mint(); err != nil {
				return nil, fmt.Errorf("enqueue on %s: mint: %w", q, err)
			}
		}
	}
	keys := []string{JobsKey(q), DelayedKey(q), JobIDsKey(q), JobDigestsKey(q)}
	out := make([]EnqueueResult, len(jobs))
	for start := 0; start < len(jobs); {
		end := c.chunkEnd(len(jobs), start, func(i int) []Field { return jobs[i].Fields })
		if err := c.enqueueChunk(ctx, keys, jobs[start:end], ids[start:end], out[start:end]); err != nil {
			ee := &EnqueueError{Queue: q.String(), Done: out[:start], Err: err}
			var unknown *unknownOutcome
			if errors.As(err, &unknown) {
				ee.Unknown = unknown.ids
			}
			return ee.Done, ee
		}
		start = end
	}
	return out, nil
}

// enqueueChunk enqueues one chunk of jobs under ids through scriptEnqueue
// and puts their results in out.
func (c *Client) enqueueChunk(ctx context.Context, keys []string, jobs []Job, ids []brand.ID, out []EnqueueResult) error {
	now := c.now()
	n := 4
	for _, job := range jobs {
		n += 4 + 2*len(job.Fields)
	}
	args := make([]string, 0, n)
	args = append(args, ms(now), strconv.FormatInt(c.opts.Jobs.DedupWindow.Milliseconds(), 10),
		c.opts.Jobs.Group, strconv.Itoa(len(jobs)))
	for i, job := range jobs {
		due := "0"
		if job.RunAt.After(now) {
			due = ms(job.RunAt)
		}
		args = append(args, brand.JOB.Format(ids[i]), due, jobDigest(job.Fields), strconv.Itoa(len(job.Fields)))
		for _, f := range job.Fields {
			args = append(args, f.Name, f.Value)
		}
	}
	reply, err := c.execChunk(ctx, "enqueue", keys[0], ids, false, func(bool) ([]string, error) {
		return c.lua.enqueue.Exec(ctx, c.rdb, keys, args).AsStrSlice()
	})
	if err != nil {
		return err
	}
	if err := errShape(len(reply), len(jobs)); err != nil {
		return fmt.Errorf("enqueue script: %w", err)
	}
	for i, r := range reply {
		out[i] = EnqueueResult{ID: ids[i]}
		switch r {
		case "DUP":
			out[i].Duplicate = true
		case "CONFLICT":
			out[i].Conflict = true
		case "DELAYED":
			out[i].Delayed = true
		default:
			out[i].EntryID = r
		}
	}
	return nil
}

// jobDigest is the digest of a job's fields that the dedup window keeps
// beside its id: the hex of the first 16 bytes of the SHA-256 of the
// length-prefixed names and values, in order.
func jobDigest(fields []Field) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range fields {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Name)))
		h.Write(n[:])
		h.Write([]byte(f.Name))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Value)))
		h.Write(n[:])
		h.Write([]byte(f.Value))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// CheckJobID reports what Enqueue would make of job's id on queue q without
// changing anything: known is true if the id was enqueued within the dedup
// window with the same fields (enqueueing it again is a no-op Duplicate);
// an error wrapping ErrIDConflict if with other fields. A job with id 0 is
// new. An id remembered without a digest (enqueued by an older version) is
// known, whatever its fields.
func (c *Client) CheckJobID(ctx context.Context, q names.Queue, job Job) (known bool, err error) {
	if err := checkQueue(q); err != nil {
		return false, err
	}
	if job.ID == 0 {
		return false, nil
	}
	id := brand.JOB.Format(job.ID)
	b := c.rdb.B()
	res := c.rdb.DoMulti(ctx,
		b.Zscore().Key(JobIDsKey(q)).Member(id).Build(),
		b.Hget().Key(JobDigestsKey(q)).Field(id).Build())
	expiry, err := res[0].AsFloat64()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check job id %s on %s: %w", id, q, err)
	}
	if int64(expiry) <= c.now().UnixMilli() {
		return false, nil // expired: the next enqueue forgets it
	}
	digest, err := res[1].ToString()
	if rueidis.IsRedisNil(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("check job id %s on %s: %w", id, q, err)
	}
	if digest != jobDigest(job.Fields) {
		return false, fmt.Errorf("job id %s on %s: %w: give the job another id, or retry it with its own payload", id, q, ErrIDConflict)
	}
	return true, nil
}

// Claim promotes due delayed jobs and then claims up to n jobs of queue q
// that no consumer has had yet (n ≤ 0: JobOptions.ClaimBatch) for consumer.
// It does not wait: no job, no delivery; a queue with no job stream gets
// none and nothing is created for it. consumer must pass CheckConsumer
// (ErrInvalidConsumer). A claimed job stays pending until
// Ack or Fail; Recover takes it over if it stays idle too long. An entry of
// the job stream that is not a job is reported in the error (an
// *EntryError) beside the deliveries of the others; it stays pending, and
// Recover buries it once its attempts are used up.
func (c *Client) Claim(ctx context.Context, q names.Queue, consumer string, n int) ([]Delivery, error) {
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	if err := CheckConsumer(consumer); err != nil {
		return nil, fmt.Errorf("claim on %s: %w", q, err)
	}
	if n <= 0 {
		n = c.opts.Jobs.ClaimBatch
	}
	keys := []string{JobsKey(q), DelayedKey(q)}
	args := []string{c.opts.Jobs.Group, consumer, strconv.Itoa(n), ms(c.now())}
	msgs, err := c.lua.claim.Exec(ctx, c.rdb, keys, args).ToArray()
	if err != nil {
		return nil, fmt.Errorf("claim on %s: %w", q, err)
	}
	entries, err := rawEntries(msgs)
	if err != nil {
		return nil, fmt.Errorf("claim on %s: %w", q, err)
	}
	out := make([]Delivery, 0, len(entries))
	var errs []error
	for _, e := range entries {
		d, err := decodeJob(JobsKey(q), e.xid, e.kv, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// decodeJob decodes a job entry; attempt 0 means the entry's own.
func decodeJob(key, xid string, kv []string, attempt int) (Delivery, error) {
	bad := func(err error) (Delivery, error) { return Delivery{}, &EntryError{Key: key, XID: xid, Err: err} }
	if len(kv) < 4 || kv[0] != "job" || kv[2] != "attempt" {
		return bad(fmt.Errorf("not a job entry (want job <id> attempt <n> …): %w", ErrInvalidRecord))
	}
	id, err := brand.JOB.Parse(kv[1])
	if err != nil {
		return bad(err)
	}
	n, err := strconv.Atoi(kv[3])
	if err != nil || n < 1 {
		return bad(fmt.Errorf("attempt %q: %w", clip(kv[3]), ErrInvalidRecord))
	}
	if attempt == 0 {
		attempt = n
	}
	d := Delivery{ID: id, EntryID: xid, Attempt: attempt}
	if len(kv) > 4 {
		if d.Fields, err = decodeFields(kv[4:]); err != nil {
			return bad(err)
		}
	}
	return d, nil
}

// Ack acknowledges finished jobs (by entry id) and deletes them from the
// job stream. It returns how many were pending; acknowledging a job twice
// is harmless.
func (c *Client) Ack(ctx context.Context, q names.Queue, entryIDs ...string) (int64, error) {
	if err := checkQueue(q); err != nil {
		return 0, err
	}
	if len(entryIDs) == 0 {
		return 0, nil
	}
	if err := checkEntryIDs(entryIDs); err != nil {
		return 0, fmt.Errorf("ack on %s: %w", q, err)
	}
	args := append([]string{c.opts.Jobs.Group}, entryIDs...)
	n, err := c.lua.ack.Exec(ctx, c.rdb, c.outcomeKeys(q, []string{JobsKey(q)}), args).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("ack on %s: %w", q, err)
	}
	return n, nil
}

// FailResult says what became of a failed job.
type FailResult struct {
	// Dead: the job used up its attempts and is now a dead letter.
	Dead bool
	// Attempts is the number of attempts made so far.
	Attempts int
	// RetryAt is when the next attempt is due (zero if Dead).
	RetryAt time.Time
}

// Fail reports that consumer failed delivery d of a job of q. The job
// leaves the job stream: to the delayed set for its next attempt after
// JobOptions.Backoff, or, once it has had MaxAttempts, to the dead letters
// with reason. A delivery no longer pending fails with ErrNoJob, as does
// one that another consumer has taken over.
func (c *Client) Fail(ctx context.Context, q names.Queue, consumer string, d Delivery, reason string) (FailResult, error) {
	if err := checkQueue(q); err != nil {
		return FailResult{}, err
	}
	if err := CheckConsumer(consumer); err != nil {
		return FailResult{}, fmt.Errorf("fail on %s: %w", q, err)
	}
	if err := CheckEntryID(d.EntryID); err != nil {
		return FailResult{}, fmt.Errorf("fail on %s: %w", q, err)
	}
	now := c.now()
	backoff := c.opts.Jobs.Backoff(d.Attempt)
	keys := c.outcomeKeys(q, []string{JobsKey(q), DelayedKey(q), DeadKey(q)})
	args := []string{c.opts.Jobs.Group, consumer, d.EntryID, reason, strconv.Itoa(c.opts.Jobs.MaxAttempts),
		ms(now), strconv.FormatInt(backoff.Milliseconds(), 10)}
	reply, err := c.lua.fail.Exec(ctx, c.rdb, keys, args).AsStrSlice()
	if err != nil {
		return FailResult{}, fmt.Errorf("fail %s on %s: %w", d.EntryID, q, err)
	}
	switch {
	case len(reply) == 2 && reply[0] == "RETRY":
		next, _ := strconv.Atoi(reply[1])
		return FailResult{Attempts: next - 1, RetryAt: now.Add(backoff)}, nil
	case len(reply) == 2 && reply[0] == "DEAD":
		n, _ := strconv.Atoi(reply[1])
		return FailResult{Dead: true, Attempts: n}, nil
	case len(reply) == 1 && reply[0] == "NOTPENDING":
		return FailResult{}, fmt.Errorf("fail %s on %s: %w (acknowledged, failed or buried already)", d.EntryID, q, ErrJobNotPending)
	case len(reply) == 2 && reply[0] == "NOTOWNER":
		return FailResult{}, fmt.Errorf("fail %s on %s: %w for %s: consumer %s has it now", d.EntryID, q, ErrNoJob, consumer, reply[1])
	}
	return FailResult{}, fmt.Errorf("fail %s on %s: unexpected reply %q", d.EntryID, q, reply)
}

// RecoverResult says what Recover did.
type RecoverResult struct {
	// Claimed are the stalled jobs now claimed by the consumer.
	Claimed []Delivery
	// Dead is how many stalled jobs had used up their attempts and went to
	// the dead letters.
	Dead int64
}

// Recover takes over up to n jobs of q claimed by any consumer and not
// acknowledged for at least minIdle (≤ 0: JobOptions.MinIdle; n ≤ 0:
// JobOptions.ClaimBatch): those that had MaxAttempts deliveries go to the
// dead letters, the others are claimed by consumer, each delivery counting
// as an attempt.
func (c *Client) Recover(ctx context.Context, q names.Queue, consumer string, minIdle time.Duration, n int) (RecoverResult, error) {
	if err := checkQueue(q); err != nil {
		return RecoverResult{}, err
	}
	if err := CheckConsumer(consumer); err != nil {
		return RecoverResult{}, fmt.Errorf("recover on %s: %w", q, err)
	}
	if minIdle <= 0 {
		minIdle = c.opts.Jobs.MinIdle
	}
	if n <= 0 {
		n = c.opts.Jobs.ClaimBatch
	}
	keys := c.outcomeKeys(q, []string{JobsKey(q), DeadKey(q)})
	args := []string{c.opts.Jobs.Group, consumer, strconv.FormatInt(minIdle.Milliseconds(), 10), strconv.Itoa(n),
		strconv.Itoa(c.opts.Jobs.MaxAttempts)}
	reply, err := c.lua.recover.Exec(ctx, c.rdb, keys, args).ToArray()
	if err != nil {
		if isNoGroup(err) {
			return RecoverResult{}, nil
		}
		return RecoverResult{}, fmt.Errorf("recover on %s: %w", q, err)
	}
	if len(reply) != 2 {
		return RecoverResult{}, fmt.Errorf("recover on %s: %w", q, errShape(len(reply), 2))
	}
	var res RecoverResult
	res.Dead, _ = reply[1].AsInt64()
	claimed, err := reply[0].ToArray()
	if err != nil {
		return RecoverResult{}, fmt.Errorf("recover on %s: %w", q, err)
	}
	var errs []error
	for _, m := range claimed {
		parts, err := m.ToArray()
		if err != nil || len(parts) != 3 {
			return res, fmt.Errorf("recover on %s: unexpected reply shape", q)
		}
		xid, _ := parts[0].ToString()
		attempt, _ := parts[1].AsInt64()
		kv, _ := parts[2].AsStrSlice()
		d, err := decodeJob(JobsKey(q), xid, kv, int(attempt))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Claimed = append(res.Claimed, d)
	}
	return res, errors.Join(errs...)
}

// Dead lists up to n dead letters of q (n ≤ 0: 100), oldest first, after the
// dead-letter entry id after ("" from the start).
func (c *Client) Dead(ctx context.Context, q names.Queue, after string, n int) ([]DeadLetter, error) {
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	if n <= 0 {
		n = 100
	}
	start := "-"
	if after != "" {
		if err := CheckEntryID(after); err != nil {
			return nil, fmt.Errorf("list dead letters of %s after: %w", q, err)
		}
		start = "(" + after
	}
	key := DeadKey(q)
	msgs, err := c.rdb.Do(ctx, c.rdb.B().Xrange().Key(key).Start(start).End("+").Count(int64(n)).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("list dead letters of %s: %w", q, err)
	}
	entries, err := rawEntries(msgs)
	if err != nil {
		return nil, fmt.Errorf("list dead letters of %s: %w", q, err)
	}
	out := make([]DeadLetter, 0, len(entries))
	var errs []error
	for _, e := range entries {
		if len(e.kv) < 6 || e.kv[4] != "error" {
			errs = append(errs, &EntryError{Key: key, XID: e.xid, Err: fmt.Errorf("not a dead letter: %w", ErrInvalidRecord)})
			continue
		}
		kv := append(append([]string(nil), e.kv[:4]...), e.kv[6:]...)
		d, err := decodeJob(key, e.xid, kv, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, DeadLetter{EntryID: e.xid, ID: d.ID, Attempts: d.Attempt, Error: e.kv[5], Fields: d.Fields})
	}
	return out, errors.Join(errs...)
}

// Redrive moves dead letters of q (by their entry ids) back to the job
// stream with fresh attempts and returns their new job entry ids. Ids that
// are not dead letters (any more) are skipped.
func (c *Client) Redrive(ctx context.Context, q names.Queue, deadIDs ...string) ([]string, error) {
	if err := checkEntryIDs(deadIDs); err != nil {
		return nil, fmt.Errorf("redrive dead letters of %s: %w", q, err)
	}
	return c.redrive(ctx, q, append([]string{c.opts.Jobs.Group, "ids"}, deadIDs...))
}

// RedriveAll moves up to n of the oldest dead letters of q back to the job
// stream (n ≤ 0: 1000) and returns their new job entry ids.
func (c *Client) RedriveAll(ctx context.Context, q names.Queue, n int) ([]string, error) {
	if n <= 0 {
		n = 1000
	}
	return c.redrive(ctx, q, []string{c.opts.Jobs.Group, "all", strconv.Itoa(n)})
}

func (c *Client) redrive(ctx context.Context, q names.Queue, args []string) ([]string, error) {
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	ids, err := c.lua.redrive.Exec(ctx, c.rdb, []string{JobsKey(q), DeadKey(q)}, args).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters of %s: %w", q, err)
	}
	return ids, nil
}

// Status returns the state of queue q.
func (c *Client) Status(ctx context.Context, q names.Queue) (QueueStatus, error) {
	if err := checkQueue(q); err != nil {
		return QueueStatus{}, err
	}
	b := c.rdb.B()
	res := c.rdb.DoMulti(ctx,
		b.Xlen().Key(JobsKey(q)).Build(),
		b.Zcard().Key(DelayedKey(q)).Build(),
		b.Xlen().Key(DeadKey(q)).Build(),
		b.Zrange().Key(DelayedKey(q)).Min("0").Max("0").Withscores().Build(),
	)
	st := QueueStatus{Queue: q.String()}
	var err error
	for i, p := range []*int64{&st.Length, &st.Delayed, &st.Dead} {
		if *p, err = res[i].AsInt64(); err != nil {
			return st, fmt.Errorf("status of %s: %w", q, err)
		}
	}
	if next, err := res[3].AsZScores(); err == nil && len(next) > 0 {
		st.NextDue = time.UnixMilli(int64(next[0].Score)).UTC().Format(time.RFC3339Nano)
	}
	if st.Length == 0 {
		return st, nil
	}
	summary, err := c.rdb.Do(ctx, b.Xpending().Key(JobsKey(q)).Group(c.opts.Jobs.Group).Build()).ToArray()
	if err != nil {
		if isNoGroup(err) {
			st.Lag = st.Length
			return st, nil
		}
		return st, fmt.Errorf("status of %s: %w", q, err)
	}
	st.Pending, _ = summary[0].AsInt64()
	if len(summary) == 4 && !summary[3].IsNil() {
		consumers, _ := summary[3].ToArray()
		st.Consumers = int64(len(consumers))
	}
	// Acknowledged entries are deleted, so what is not pending is undelivered.
	st.Lag = st.Length - st.Pending
	return st, nil
}

// isNoGroup reports a NOGROUP error reply: the job stream or its group does
// not exist yet (nothing was ever enqueued).
func isNoGroup(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(rerr.Error(), "NOGROUP")
}

// errShape reports a reply of the wrong length, or nil.
func errShape(got, want int) error {
	if got == want {
		return nil
	}
	return fmt.Errorf("reply has %d elements, want %d", got, want)
}
