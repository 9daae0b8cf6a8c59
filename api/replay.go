package api

import (
	"context"

	"github.com/echostore/echostore/xid"
)

// A replay as the API carries it: an archived range copied into a Redis
// stream under the original ids (docs/REPLAY.md).

// DefaultReplayRate is the rate of a replay that gives none, in records per
// second.
const DefaultReplayRate = 10000

// ReplayLimiter paces a replay: WaitN blocks until n more records may be
// written or ctx ends. *rate.Limiter (golang.org/x/time/rate) is one.
type ReplayLimiter interface {
	WaitN(ctx context.Context, n int) error
}

// ReplayOptions are the range, target and pace of a replay.
type ReplayOptions struct {
	// From and To bound the ids of the source's records to copy,
	// inclusive; xid.Min and xid.Max (the zero To is xid.Max) leave an end
	// open.
	From, To xid.ID
	// Into is the Redis key of the target stream.
	Into string
	// Rate is the most records written per second (0: DefaultReplayRate).
	// It also sizes the batches: a tenth of a second's worth, from 1 to
	// echostore.MaxReplayBatch records.
	Rate float64
	// Limit is the most records this call copies (≤ 0: all); a replay cut
	// short by it says Done false, and the next call goes on from there.
	Limit int
	// Force lets Into be a stream of a queue (emq:{Q}:stream:S, in
	// echostore's namespace echostore.ReplayNamespace) that is neither
	// archived nor the source; no other key of the namespace is ever a
	// target.
	Force bool
	// Limiter, if set, paces the writes instead of a token bucket of Rate
	// (Rate still sizes the batches).
	Limiter ReplayLimiter
	// Progress, if set, is called after each batch written.
	Progress func(ReplayProgress)
}

// ReplayProgress is where a running replay is: the records it copied so
// far and the Redis id of the last of them.
type ReplayProgress struct {
	Copied int64
	Last   string
}

// ReplayResult is the answer of a replay: the target, the records copied,
// the target's last id when the replay began if the target held part of
// the range already (a resumed or repeated replay; null otherwise), the
// Redis id of the last record copied (null if none), and whether the range
// is done (false only when Limit cut the replay short).
type ReplayResult struct {
	Into         string  `json:"into"`
	Copied       int64   `json:"copied"`
	ResumedAfter *string `json:"resumed_after"`
	Last         *string `json:"last"`
	Done         bool    `json:"done"`
}
