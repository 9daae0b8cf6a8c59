package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// replayRequestSeconds sizes the requests of Replay: each copies about
// this many seconds' worth of records at the replay's rate.
const replayRequestSeconds = 5

// replayBody is the body of POST /v1/streams/{q}/{s}/replay and
// POST /v1/keys/{k}/replay.
type replayBody struct {
	From  string  `json:"from,omitempty"`
	To    string  `json:"to,omitempty"`
	Into  string  `json:"into"`
	Rate  float64 `json:"rate,omitempty"`
	Limit int     `json:"limit,omitempty"`
}

// Replay copies the stream's range into the Redis stream opts.Into under
// the original ids (POST /v1/streams/{q}/{s}/replay, or
// POST /v1/keys/{k}/replay when ref is a stream at a key; force=true for
// opts.Force), as Node.Replay does. It sends the replay as a run of
// requests of about replayRequestSeconds' worth of records each, every one
// resuming where the one before stopped, and calls opts.Progress after
// each; opts.Limiter is not used (serve paces each request at opts.Rate).
// The result adds up the requests'. On an error after some records were
// copied the result says how many.
func (c *Client) Replay(ctx context.Context, ref names.StreamRef, opts api.ReplayOptions) (api.ReplayResult, error) {
	rate := opts.Rate
	if rate == 0 {
		rate = api.DefaultReplayRate
	}
	// Each request is about replayRequestSeconds of records at the rate
	// (at least one record), so that progress arrives that often however
	// slow the rate.
	chunk := int(max(1, min(rate*replayRequestSeconds, 1<<30)))
	b := replayBody{Into: opts.Into, Rate: opts.Rate}
	if !opts.From.IsZero() {
		b.From = api.FormatID(opts.From, api.StreamIDForm(ref))
	}
	if !opts.To.IsZero() && opts.To != xid.Max {
		b.To = api.FormatID(opts.To, api.StreamIDForm(ref))
	}
	q := url.Values{}
	if opts.Force {
		q.Set("force", "true")
	}
	out := api.ReplayResult{Into: opts.Into}
	for i := 0; ; i++ {
		b.Limit = chunk
		if opts.Limit > 0 {
			b.Limit = min(chunk, opts.Limit-int(out.Copied))
		}
		var got api.ReplayResult
		if err := c.call(ctx, request{method: http.MethodPost, path: streamPath(ref, "/replay"), query: q, body: b}, &got); err != nil {
			if out.Copied > 0 {
				return out, fmt.Errorf("replay of %s into %s stopped after %d records (the last %s; run it again to go on): %w",
					ref, opts.Into, out.Copied, *out.Last, err)
			}
			return out, err
		}
		if i == 0 {
			out.ResumedAfter = got.ResumedAfter
		}
		out.Copied += got.Copied
		if got.Last != nil {
			out.Last = got.Last
		}
		if opts.Progress != nil && got.Copied > 0 {
			opts.Progress(api.ReplayProgress{Copied: out.Copied, Last: *out.Last})
		}
		switch {
		case got.Done:
			out.Done = true
			return out, nil
		case opts.Limit > 0 && out.Copied >= int64(opts.Limit):
			return out, nil
		case got.Copied == 0:
			return out, fmt.Errorf("replay of %s into %s through the serve on %s: a request copied nothing and did not finish the range", ref, opts.Into, c.where)
		}
	}
}
