package mq

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// ScriptDeleteStream deletes an archived stream from the live tier under the
// caller's archive lease, so that a running archive driver cannot race it.
//
//	KEYS[1]  the stream
//	KEYS[2]  the seam cache (SeamKey)
//	KEYS[3]  the archived set of the queue (ArchivedSetKey)
//	KEYS[4]  the lease (LeaseKey)
//	ARGV[1]  the caller's fencing token
//	ARGV[2]  the stream's name (the member of the archived set)
//
// Replies {"FENCED"} (nothing deleted) when the token does not hold the
// lease, else {"OK", entries} with the number of entries the stream held.
// The token counter (LeaseSeqKey) is kept, so that fencing tokens keep
// increasing if the stream is archived again.
const ScriptDeleteStream = "#!lua\n" + `
if redis.call('GET', KEYS[4]) ~= ARGV[1] then return {'FENCED'} end
local n = 0
if redis.call('EXISTS', KEYS[1]) == 1 then n = redis.call('XLEN', KEYS[1]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
redis.call('SREM', KEYS[3], ARGV[2])
return {'OK', tostring(n)}
`

var deleteStreamLua = rueidis.NewLuaScript(ScriptDeleteStream)

// DeleteArchivedStream deletes stream s of queue q from the live tier: the
// stream, its seam cache, its membership of the archived set and its
// archive lease, in one script that first checks that token holds the
// stream's lease (take it with TakeLease). With another token, or none, on
// the lease it deletes nothing and fails with ErrFenced. The lease's token
// counter is kept. It returns the number of entries the stream held.
func (c *Client) DeleteArchivedStream(ctx context.Context, q, s string, token int64) (int64, error) {
	if err := checkQS(q, s); err != nil {
		return 0, err
	}
	keys := []string{StreamKey(q, s), SeamKey(q, s), ArchivedSetKey(q), LeaseKey(q, s)}
	args := []string{strconv.FormatInt(token, 10), s}
	reply, err := deleteStreamLua.Exec(ctx, c.rdb, keys, args).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("delete %s: %w", where(q, s), err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "FENCED":
		return 0, fmt.Errorf("delete %s with lease token %d: %w", where(q, s), token, ErrFenced)
	case len(reply) == 2 && reply[0] == "OK":
		n, err := strconv.ParseInt(reply[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("delete %s: bad count %q", where(q, s), reply[1])
		}
		return n, nil
	}
	return 0, fmt.Errorf("delete %s: unexpected reply %q", where(q, s), reply)
}
