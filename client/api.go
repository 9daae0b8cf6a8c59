package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// DeleteConfirm is the confirmation a delete of a stream sends (serve
// refuses a delete without it).
const DeleteConfirm = api.DeleteConfirm

// streamPath is the API path of ref, with sub appended.
func streamPath(ref names.StreamRef, sub string) string {
	if k, ok := ref.Key(); ok {
		return "/v1/keys/" + KeyPathSegment(k) + sub
	}
	return "/v1/streams/" + url.PathEscape(ref.Queue().String()) + "/" + url.PathEscape(ref.Stream().String()) + sub
}

// KeyPathSegment is key k as the one path segment of the routes
// /v1/keys/{k}/…: url.PathEscape of its bytes, with every '.' escaped
// too (%2E) when the key is all dots, so that "." and ".." stay keys and
// are not taken for path steps.
func KeyPathSegment(k names.Key) string {
	s := k.String()
	if strings.Trim(s, ".") == "" {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

// decodeRecord parses one JSON line of a read of ref: its id is EVT_… for a
// stream of a queue, a Redis id <ms>-<seq> for a key stream
// (api.StreamIDForm).
func decodeRecord(ref names.StreamRef, line []byte) (api.Record, error) {
	var rec api.Record
	if !ref.IsKey() {
		err := rec.UnmarshalJSON(line)
		return rec, err
	}
	var v struct {
		ID     string          `json:"id"`
		Fields json.RawMessage `json:"fields"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return rec, err
	}
	id, err := xid.Parse(v.ID)
	if err != nil {
		return rec, fmt.Errorf("record id %q: %w", v.ID, err)
	}
	fields, err := api.ParseFieldsJSON(v.Fields)
	if err != nil {
		return rec, err
	}
	return api.Record{ID: id, Fields: fields}, nil
}

func queuePath(q names.Queue, sub string) string {
	return "/v1/queues/" + url.PathEscape(q.String()) + sub
}

func volumePath(v names.Volume, sub string) string {
	return "/v1/volumes/" + url.PathEscape(v.String()) + sub
}

// AppendBodyBytes bounds the body of one append request: Append sends a
// larger batch as several requests, in order, each of whole records, so
// that a batch never meets serve's max_body (8 MiB by default). A record
// larger than this goes alone.
const AppendBodyBytes = 1 << 20

// Append appends the records to the stream, in order (POST
// /v1/streams/{q}/{s}, a body of JSON lines {"fields":{…}}); a batch whose
// body would pass AppendBodyBytes goes as several requests. If one fails,
// the result holds the ids of the records appended before it, and the
// error says how many they are.
func (c *Client) Append(ctx context.Context, ref names.StreamRef, records [][]api.Field) (api.AppendResult, error) {
	if len(records) == 0 {
		return api.AppendResult{}, fmt.Errorf("append %s: no records: %w", ref, ErrInvalid)
	}
	var out api.AppendResult
	for start := 0; start < len(records); {
		var body []byte
		end := start
		for end < len(records) && (end == start || len(body) < AppendBodyBytes) {
			body = append(api.AppendFieldsJSON(append(body, `{"fields":`...), records[end]), "}\n"...)
			end++
		}
		var got api.AppendResult
		if err := c.call(ctx, request{method: http.MethodPost, path: streamPath(ref, ""), raw: body}, &got); err != nil {
			if start > 0 {
				return out, fmt.Errorf("append %s: %d of %d records appended (ids in the result), then: %w", ref, start, len(records), err)
			}
			return out, err
		}
		out.IDs = append(out.IDs, got.IDs...)
		start = end
	}
	return out, nil
}

// Read reads the stream (GET /v1/streams/{q}/{s}) as opts says, yielding
// the records as serve sends them. A body cut short (serve aborts a read
// that fails after its first record) ends the read with an error.
func (c *Client) Read(ctx context.Context, ref names.StreamRef, opts api.ReadOptions) iter.Seq2[api.Record, error] {
	return func(yield func(api.Record, error) bool) {
		v := url.Values{}
		if !opts.From.IsZero() {
			v.Set("from", api.FormatID(opts.From, api.IDBranded))
		}
		if !opts.To.IsZero() && opts.To != xid.Max {
			v.Set("to", api.FormatID(opts.To, api.IDBranded))
		}
		v.Set("limit", strconv.Itoa(max(opts.Limit, 0)))
		if opts.Reverse {
			v.Set("reverse", "true")
		}
		switch opts.Side {
		case api.ReadLiveOnly:
			v.Set("live_only", "true")
		case api.ReadArchiveOnly:
			v.Set("archive_only", "true")
		}
		if !opts.AsOf.IsZero() {
			v.Set("as_of", opts.AsOf.String())
		}
		resp, err := c.do(ctx, request{method: http.MethodGet, path: streamPath(ref, ""), query: v})
		if err != nil {
			yield(api.Record{}, err)
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 && err == nil {
				rec, derr := decodeRecord(ref, line)
				if derr != nil {
					yield(api.Record{}, fmt.Errorf("read %s through the serve on %s: %w", ref, c.where, derr))
					return
				}
				if !yield(rec, nil) {
					return
				}
				continue
			}
			switch {
			case errors.Is(err, io.EOF) && len(line) == 0:
				return
			case errors.Is(err, io.EOF):
				err = io.ErrUnexpectedEOF
			}
			yield(api.Record{}, fmt.Errorf("read %s through the serve on %s: cut short: %w", ref, c.where, err))
			return
		}
	}
}

// Cycle runs one archive cycle of the stream (POST
// /v1/streams/{q}/{s}/cycle) with opts's window, trim_after and retention.
func (c *Client) Cycle(ctx context.Context, ref names.StreamRef, opts api.CycleOptions) (api.CycleResult, error) {
	v := url.Values{
		"trim_after":   {opts.TrimAfter.String()},
		"retain_count": {strconv.FormatUint(opts.Retain.Count, 10)},
		"retain_age":   {opts.Retain.MaxAge.String()},
	}
	if opts.Window.Keep > 0 {
		v.Set("keep", strconv.FormatInt(opts.Window.Keep, 10))
	}
	if opts.Window.MaxAge > 0 || opts.Window.Keep <= 0 {
		v.Set("max_age", opts.Window.MaxAge.String())
	}
	if g := opts.Window.Groups; g != (api.GroupLimits{}) {
		v.Set("max_live", strconv.FormatInt(g.MaxLive, 10))
		v.Set("max_hold", g.MaxHold.String())
		v.Set("stalled_groups", g.Stalled.String())
	}
	var out api.CycleResult
	err := c.call(ctx, request{method: http.MethodPost, path: streamPath(ref, "/cycle"), query: v}, &out)
	return out, err
}

// Status returns where the seam of the stream is (GET
// /v1/streams/{q}/{s}/archive).
func (c *Client) Status(ctx context.Context, ref names.StreamRef) (api.ArchiveStatus, error) {
	var out api.ArchiveStatus
	err := c.call(ctx, request{method: http.MethodGet, path: streamPath(ref, "/archive")}, &out)
	return out, err
}

// Delete deletes the archived stream and its archive (DELETE
// /v1/streams/{q}/{s}, confirmed); serve stops cycling it.
func (c *Client) Delete(ctx context.Context, ref names.StreamRef) (api.DeleteResult, error) {
	var out api.DeleteResult
	err := c.call(ctx, request{method: http.MethodDelete, path: streamPath(ref, ""), query: url.Values{"confirm": {DeleteConfirm}}}, &out)
	return out, err
}

// jobBody is the body of an enqueue.
type jobBody struct {
	Payload json.RawMessage `json:"payload"`
	ID      string          `json:"id,omitempty"`
	RunAt   string          `json:"run_at,omitempty"`
}

// Enqueue enqueues one job with payload, a JSON value (POST
// /v1/queues/{q}/jobs).
func (c *Client) Enqueue(ctx context.Context, q names.Queue, payload []byte, opts api.EnqueueOptions) (api.Receipt, error) {
	b := jobBody{Payload: json.RawMessage(payload)}
	if opts.ID != 0 {
		b.ID = brand.JOB.Format(opts.ID)
	}
	if !opts.RunAt.IsZero() {
		b.RunAt = opts.RunAt.Format(time.RFC3339Nano)
	}
	var out api.Receipt
	err := c.call(ctx, request{method: http.MethodPost, path: queuePath(q, "/jobs"), query: url.Values{"mode": {opts.Mode.String()}}, body: b}, &out)
	return out, err
}

// batchBody is the body of a batch enqueue.
type batchBody struct {
	Jobs []jobBody `json:"jobs"`
}

// EnqueueBatch enqueues jobs on q in one request, all in mode (POST
// /v1/queues/{q}/jobs/batch), as Node.EnqueueBatch does: a receipt a job,
// in order; each payload must be a JSON value.
func (c *Client) EnqueueBatch(ctx context.Context, q names.Queue, jobs []api.BatchJob, mode api.Mode) (api.BatchResult, error) {
	b := batchBody{Jobs: make([]jobBody, len(jobs))}
	for i, j := range jobs {
		b.Jobs[i] = jobBody{Payload: json.RawMessage(j.Payload)}
		if j.ID != 0 {
			b.Jobs[i].ID = brand.JOB.Format(j.ID)
		}
		if !j.RunAt.IsZero() {
			b.Jobs[i].RunAt = j.RunAt.Format(time.RFC3339Nano)
		}
	}
	if mode == 0 {
		mode = api.ModeAsync
	}
	var out api.BatchResult
	err := c.call(ctx, request{method: http.MethodPost, path: queuePath(q, "/jobs/batch"), query: url.Values{"mode": {mode.String()}}, body: b}, &out)
	return out, err
}

// Claim claims jobs (POST /v1/queues/{q}/claim).
func (c *Client) Claim(ctx context.Context, q names.Queue, opts api.ClaimOptions) (api.ClaimResult, error) {
	v := url.Values{}
	if opts.Consumer != "" {
		v.Set("consumer", opts.Consumer)
	}
	if opts.Count > 0 {
		v.Set("count", strconv.Itoa(opts.Count))
	}
	if opts.Stalled > 0 {
		v.Set("stalled", opts.Stalled.String())
	}
	var out api.ClaimResult
	err := c.call(ctx, request{method: http.MethodPost, path: queuePath(q, "/claim"), query: v, body: struct{}{}}, &out)
	if out.Jobs == nil {
		out.Jobs = []api.Job{}
	}
	return out, err
}

// entriesBody is the body of an ack and a redrive.
type entriesBody struct {
	Entries []string `json:"entries,omitempty"`
	All     bool     `json:"all,omitempty"`
	Limit   int      `json:"limit,omitempty"`
}

// Ack acknowledges finished jobs by entry (POST /v1/queues/{q}/ack).
func (c *Client) Ack(ctx context.Context, q names.Queue, entries []string) (api.AckResult, error) {
	var out api.AckResult
	err := c.call(ctx, request{method: http.MethodPost, path: queuePath(q, "/ack"), body: entriesBody{Entries: entries}}, &out)
	return out, err
}

// Fail reports a failed delivery of a job (POST /v1/queues/{q}/fail) by
// opts.Consumer ("": "http", the default consumer of Claim).
func (c *Client) Fail(ctx context.Context, q names.Queue, opts api.FailOptions) (api.FailResult, error) {
	v := url.Values{}
	if opts.Consumer != "" {
		v.Set("consumer", opts.Consumer)
	}
	var out api.FailResult
	err := c.call(ctx, request{method: http.MethodPost, path: queuePath(q, "/fail"), query: v,
		body: failBody{Entry: opts.Entry, Attempt: opts.Attempt, Reason: opts.Reason}}, &out)
	return out, err
}

// failBody is the body of a fail (server.FailBody).
type failBody struct {
	Entry   string `json:"entry"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason,omitempty"`
}

// Dead lists dead letters (GET /v1/queues/{q}/dead).
func (c *Client) Dead(ctx context.Context, q names.Queue, opts api.DeadOptions) (api.DeadResult, error) {
	v := url.Values{}
	if opts.After != "" {
		v.Set("after", opts.After)
	}
	if opts.Limit > 0 {
		v.Set("limit", strconv.Itoa(opts.Limit))
	}
	var out api.DeadResult
	err := c.call(ctx, request{method: http.MethodGet, path: queuePath(q, "/dead"), query: v}, &out)
	if out.Dead == nil {
		out.Dead = []api.DeadLetter{}
	}
	return out, err
}

// Redrive moves dead letters back to the job stream (POST
// /v1/queues/{q}/redrive).
func (c *Client) Redrive(ctx context.Context, q names.Queue, opts api.RedriveOptions) (api.RedriveResult, error) {
	var out api.RedriveResult
	err := c.call(ctx, request{method: http.MethodPost, path: queuePath(q, "/redrive"),
		body: entriesBody{Entries: opts.Entries, All: opts.All, Limit: opts.Limit}}, &out)
	if out.Entries == nil {
		out.Entries = []string{}
	}
	return out, err
}

// Jobs lists up to limit jobs of queue q in state st, oldest first (GET
// /v1/queues/{q}/jobs).
func (c *Client) Jobs(ctx context.Context, q names.Queue, st api.JobState, limit int) (api.JobList, error) {
	v := url.Values{"state": {st.String()}}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var wire struct {
		Jobs []listedJob `json:"jobs"`
	}
	err := c.call(ctx, request{method: http.MethodGet, path: queuePath(q, "/jobs"), query: v}, &wire)
	out := api.JobList{Jobs: make([]api.ListedJob, 0, len(wire.Jobs))}
	for _, j := range wire.Jobs {
		lj, jerr := j.decode()
		if jerr != nil {
			return out, jerr
		}
		out.Jobs = append(out.Jobs, lj)
	}
	return out, err
}

// listedJob is a job of GET /v1/queues/{q}/jobs as api.ListedJob's
// MarshalJSON renders it (ListedJob has no decoder of its own).
type listedJob struct {
	State    string          `json:"state"`
	Entry    string          `json:"entry"`
	ID       string          `json:"id"`
	Attempt  int             `json:"attempt"`
	Consumer string          `json:"consumer"`
	IdleMs   int64           `json:"idle_ms"`
	Due      time.Time       `json:"due"`
	Error    string          `json:"error"`
	Fields   json.RawMessage `json:"fields"`
}

func (j listedJob) decode() (api.ListedJob, error) {
	st, err := api.ParseJobState(j.State)
	if err != nil {
		return api.ListedJob{}, fmt.Errorf("%w: listed job: %w", api.ErrSyntax, err)
	}
	id, err := brand.JOB.Parse(j.ID)
	if err != nil {
		return api.ListedJob{}, fmt.Errorf("%w: listed job id: %w", api.ErrSyntax, err)
	}
	fields, err := api.ParseFieldsJSON(j.Fields)
	if err != nil {
		return api.ListedJob{}, fmt.Errorf("listed job %s: fields: %w", j.ID, err)
	}
	return api.ListedJob{State: st, EntryID: j.Entry, ID: id, Attempt: j.Attempt, Consumer: j.Consumer,
		Idle: time.Duration(j.IdleMs) * time.Millisecond, Due: j.Due, Error: j.Error, Fields: fields}, nil
}

// DeleteDeadConfirm is the confirmation a delete of dead letters sends
// (serve refuses the delete without it: a deleted dead letter exists
// nowhere else).
const DeleteDeadConfirm = api.DeleteDeadConfirm

// DeleteDead deletes dead letters of queue q by entry (DELETE
// /v1/queues/{q}/dead, confirmed).
func (c *Client) DeleteDead(ctx context.Context, q names.Queue, entries []string) (api.DeleteDeadResult, error) {
	var out api.DeleteDeadResult
	err := c.call(ctx, request{method: http.MethodDelete, path: queuePath(q, "/dead"),
		query: url.Values{"confirm": {DeleteDeadConfirm}}, body: entriesBody{Entries: entries}}, &out)
	return out, err
}

// Groups lists the consumer groups of the stream ref (GET
// /v1/streams/{q}/{s}/groups).
func (c *Client) Groups(ctx context.Context, ref names.StreamRef) (api.GroupList, error) {
	var out api.GroupList
	err := c.call(ctx, request{method: http.MethodGet, path: streamPath(ref, "/groups")}, &out)
	if out.Groups == nil {
		out.Groups = []api.StreamGroup{}
	}
	return out, err
}

// QueueStatus describes the queue (GET /v1/queues/{q}).
func (c *Client) QueueStatus(ctx context.Context, q names.Queue) (api.QueueStatus, error) {
	var out api.QueueStatus
	err := c.call(ctx, request{method: http.MethodGet, path: queuePath(q, "")}, &out)
	return out, err
}

// Queues lists the queues serve knows (GET /v1/queues), by name: those
// with a job stream in Redis (Node.Queues), and those serve has handled
// or declares in its configuration; at most api.MaxListedQueues.
// The statuses the route also answers are not kept (QueueStatus has one).
func (c *Client) Queues(ctx context.Context) ([]names.Queue, error) {
	var list struct {
		Queues []struct {
			Queue string `json:"queue"`
		} `json:"queues"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/v1/queues"}, &list); err != nil {
		return nil, err
	}
	out := make([]names.Queue, 0, len(list.Queues))
	for _, row := range list.Queues {
		q, err := names.ParseQueue(row.Queue)
		if err != nil {
			return out, fmt.Errorf("GET /v1/queues: %w", err)
		}
		out = append(out, q)
	}
	return out, nil
}

// Volumes lists the volumes of serve's data dir (GET /v1/volumes).
func (c *Client) Volumes(ctx context.Context) (api.VolumeList, error) {
	var out api.VolumeList
	err := c.call(ctx, request{method: http.MethodGet, path: "/v1/volumes"}, &out)
	if out.Volumes == nil {
		out.Volumes = []api.VolumeStatus{}
	}
	return out, err
}

// VolumeInfo describes a volume (GET /v1/volumes/{vid}).
func (c *Client) VolumeInfo(ctx context.Context, v names.Volume) (api.VolumeInfo, error) {
	var out api.VolumeInfo
	err := c.call(ctx, request{method: http.MethodGet, path: volumePath(v, "")}, &out)
	return out, err
}

// Push pushes the volume's local commits not yet pushed (POST
// /v1/volumes/{vid}/push).
func (c *Client) Push(ctx context.Context, v names.Volume) (api.PushResult, error) {
	var out api.PushResult
	err := c.call(ctx, request{method: http.MethodPost, path: volumePath(v, "/push")}, &out)
	return out, err
}

// Pull follows the remote (POST /v1/volumes/{vid}/pull), creating the
// volume if the remote has it. progress is not called: serve reports no
// progress.
func (c *Client) Pull(ctx context.Context, v names.Volume, progress func(done, total int)) (api.PullResult, error) {
	var out api.PullResult
	err := c.call(ctx, request{method: http.MethodPost, path: volumePath(v, "/pull")}, &out)
	return out, err
}

// Hydrate fetches every page of the volume not yet local (POST
// /v1/volumes/{vid}/hydrate). progress is not called.
func (c *Client) Hydrate(ctx context.Context, v names.Volume, progress func(done, total int)) (api.HydrateResult, error) {
	var out api.HydrateResult
	err := c.call(ctx, request{method: http.MethodPost, path: volumePath(v, "/hydrate")}, &out)
	return out, err
}

// Reset drops the volume's local commits never pushed and follows the
// remote (POST /v1/volumes/{vid}/reset?to_remote=true); discard confirms
// the acknowledged records a refused reset named (ErrWouldDiscard).
func (c *Client) Reset(ctx context.Context, v names.Volume, discard uint64) (api.ResetResult, error) {
	q := url.Values{"to_remote": {"true"}}
	if discard > 0 {
		q.Set("discard", strconv.FormatUint(discard, 10))
	}
	var out api.ResetResult
	err := c.call(ctx, request{method: http.MethodPost, path: volumePath(v, "/reset"), query: q}, &out)
	return out, err
}

// Checkpoint appends a checkpoint commit to the volume's remote log (POST
// /v1/volumes/{vid}/checkpoint).
func (c *Client) Checkpoint(ctx context.Context, v names.Volume) (api.CheckpointResult, error) {
	var out api.CheckpointResult
	err := c.call(ctx, request{method: http.MethodPost, path: volumePath(v, "/checkpoint")}, &out)
	return out, err
}

// GC collects the volume's remote segments below its horizon (POST
// /v1/volumes/{vid}/gc).
func (c *Client) GC(ctx context.Context, v names.Volume, opts api.GCOptions) (api.GCResult, error) {
	q := url.Values{
		"keep_checkpoints": {strconv.Itoa(opts.KeepCheckpoints)},
		"min_age":          {opts.MinAge.String()},
		"grace":            {opts.Grace.String()},
		"trim_log":         {strconv.FormatBool(opts.TrimLog)},
	}
	var out api.GCResult
	err := c.call(ctx, request{method: http.MethodPost, path: volumePath(v, "/gc"), query: q}, &out)
	return out, err
}
