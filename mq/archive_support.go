package mq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/redis/rueidis"
)

// What the archive driver (package archive) needs from the live tier: its
// lease with fencing tokens, the window cut that retention computes, and a
// trim that checks the lease's token in the same script as the trim.

// ErrFenced: a lease-fenced trim or a lease renewal found another holder's
// token on the lease (or none): the caller's lease was lost, and it must not
// trim.
var ErrFenced = errors.New("archive lease lost to another driver")

// LeaseSeqKey returns the key of the counter that mints fencing tokens for
// the lease on stream s: emq:{q}:stream:s:lease:seq. It outlives every
// lease, so tokens increase across holders.
func LeaseSeqKey(q, s string) string { return LeaseKey(q, s) + ":seq" }

// ScriptLease takes or renews the archive driver's lease on a stream.
//
//	KEYS[1]  the lease (value = the holder's fencing token)
//	KEYS[2]  the token counter (LeaseSeqKey)
//	ARGV[1]  time to live in milliseconds
//	ARGV[2]  the token the caller holds ("" to take a new lease)
//
// Replies {"HELD", token, pttl} when another token holds the lease;
// {"OK", token} when the caller holds it now: its own token renewed (also
// after it expired, if nobody took the lease since: the counter still
// equals the token), or a new token INCR'd from the counter; {"LOST"} when
// the caller's token expired and another took the lease since.
const ScriptLease = "#!lua\n" + `
local cur = redis.call('GET', KEYS[1])
if cur and cur == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {'OK', cur}
end
if cur then return {'HELD', cur, tostring(redis.call('PTTL', KEYS[1]))} end
if ARGV[2] ~= '' then
  if redis.call('GET', KEYS[2]) ~= ARGV[2] then return {'LOST'} end
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
  return {'OK', ARGV[2]}
end
local tok = tostring(redis.call('INCR', KEYS[2]))
redis.call('SET', KEYS[1], tok, 'PX', ARGV[1])
return {'OK', tok}
`

// ScriptLeaseRelease deletes the lease if the caller's token still holds
// it. KEYS[1] the lease, ARGV[1] the token. Replies 1 if released, else 0.
const ScriptLeaseRelease = "#!lua\n" + `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`

// archivedCheck is the line of ScriptTrim that refuses archived streams;
// ScriptFencedTrim replaces it with the lease check and keeps the rest, so
// that the consumer-group cap is the same code in both.
const archivedCheck = "if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return {'ARCHIVED'} end\n"

// ScriptFencedTrim is ScriptTrim for the archive driver: instead of refusing
// an archived stream it refuses unless the caller's fencing token holds the
// stream's lease, and otherwise trims exactly as ScriptTrim does (by MINID,
// never past an entry a consumer group has pending or undelivered).
//
//	KEYS[1]  the stream
//	KEYS[2]  the lease
//	ARGV[1]  the caller's fencing token
//	ARGV[2]  the requested minimum id
//
// Replies {"FENCED"} (nothing trimmed) or ScriptTrim's {"OK", trimmed,
// minid, capped}.
var ScriptFencedTrim = func() string {
	before, after, ok := strings.Cut(ScriptTrim, archivedCheck)
	if !ok {
		panic("mq: ScriptTrim no longer starts with its archived check; update ScriptFencedTrim")
	}
	return before + "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {'FENCED'} end\n" + after
}()

// archiveScripts are the archive's scripts, loaded by SHA on first use.
type archiveScripts struct{ lease, release, trim *rueidis.Lua }

func newArchiveScripts() archiveScripts {
	return archiveScripts{
		lease:   rueidis.NewLuaScript(ScriptLease),
		release: rueidis.NewLuaScript(ScriptLeaseRelease),
		trim:    rueidis.NewLuaScript(ScriptFencedTrim),
	}
}

// Lease is the reply of TakeLease.
type Lease struct {
	// Token is the fencing token of the holder: the caller's when Held is
	// false.
	Token int64
	// Held: another token holds the lease, for TTL more.
	Held bool
	TTL  time.Duration
}

// TakeLease takes the archive lease on stream s of queue q for ttl, or
// renews it if token (non-zero) still holds it. A new lease gets a token
// above every token handed out before for this stream. A lease held by
// another token is reported (Held, with its remaining TTL), not waited for.
// Renewing a token that expired and was taken over since fails with
// ErrFenced.
func (c *Client) TakeLease(ctx context.Context, q, s string, token int64, ttl time.Duration) (Lease, error) {
	if err := checkQS(q, s); err != nil {
		return Lease{}, err
	}
	if ttl < time.Millisecond {
		return Lease{}, fmt.Errorf("lease on %s: ttl %v below 1ms", where(q, s), ttl)
	}
	tok := ""
	if token != 0 {
		tok = strconv.FormatInt(token, 10)
	}
	keys := []string{LeaseKey(q, s), LeaseSeqKey(q, s)}
	args := []string{strconv.FormatInt(ttl.Milliseconds(), 10), tok}
	reply, err := archiveLua.lease.Exec(ctx, c.rdb, keys, args).AsStrSlice()
	if err != nil {
		return Lease{}, fmt.Errorf("lease on %s: %w", where(q, s), err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "LOST":
		return Lease{}, fmt.Errorf("renew lease %d on %s: %w", token, where(q, s), ErrFenced)
	case len(reply) == 2 && reply[0] == "OK":
		t, err := strconv.ParseInt(reply[1], 10, 64)
		if err != nil {
			return Lease{}, fmt.Errorf("lease on %s: bad token %q", where(q, s), reply[1])
		}
		return Lease{Token: t}, nil
	case len(reply) == 3 && reply[0] == "HELD":
		t, err1 := strconv.ParseInt(reply[1], 10, 64)
		ms, err2 := strconv.ParseInt(reply[2], 10, 64)
		if err1 != nil || err2 != nil {
			return Lease{}, fmt.Errorf("lease on %s: bad reply %q", where(q, s), reply)
		}
		if token != 0 {
			return Lease{}, fmt.Errorf("renew lease %d on %s: held by %d: %w", token, where(q, s), t, ErrFenced)
		}
		return Lease{Token: t, Held: true, TTL: time.Duration(ms) * time.Millisecond}, nil
	}
	return Lease{}, fmt.Errorf("lease on %s: unexpected reply %q", where(q, s), reply)
}

// ReleaseLease gives up the lease on stream s of queue q if token holds it,
// and reports whether it did.
func (c *Client) ReleaseLease(ctx context.Context, q, s string, token int64) (bool, error) {
	if err := checkQS(q, s); err != nil {
		return false, err
	}
	n, err := archiveLua.release.Exec(ctx, c.rdb, []string{LeaseKey(q, s)},
		[]string{strconv.FormatInt(token, 10)}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("release lease on %s: %w", where(q, s), err)
	}
	return n == 1, nil
}

// FencedTrim trims stream s of queue q below minID like TrimMinID (XTRIM
// MINID, capped at every consumer group's oldest pending or undelivered
// entry), but only while token holds the stream's archive lease; otherwise
// it trims nothing and fails with ErrFenced. The check and the trim are one
// script (ScriptFencedTrim). It trims archived streams: it is the archive
// driver's trim, to be called after the fold.
func (c *Client) FencedTrim(ctx context.Context, q, s string, token int64, minID brand.ID) (TrimResult, error) {
	if err := checkQS(q, s); err != nil {
		return TrimResult{}, err
	}
	keys := []string{StreamKey(q, s), LeaseKey(q, s)}
	args := []string{strconv.FormatInt(token, 10), minID.RedisID()}
	reply, err := archiveLua.trim.Exec(ctx, c.rdb, keys, args).AsStrSlice()
	if err != nil {
		return TrimResult{}, fmt.Errorf("fenced trim %s to %s: %w", where(q, s), minID.RedisID(), err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "FENCED":
		return TrimResult{}, fmt.Errorf("trim %s with lease token %d: %w", where(q, s), token, ErrFenced)
	case len(reply) == 4 && reply[0] == "OK":
		n, err := strconv.ParseInt(reply[1], 10, 64)
		if err != nil {
			return TrimResult{}, fmt.Errorf("fenced trim %s: bad count %q", where(q, s), reply[1])
		}
		return TrimResult{MinXID: reply[2], Trimmed: n, CappedBy: reply[3]}, nil
	}
	return TrimResult{}, fmt.Errorf("fenced trim %s: unexpected reply %q", where(q, s), reply)
}

// WindowCut returns the lowest id window w keeps live in stream s of queue
// q at time now, computed exactly as the Retention driver computes its trim
// point: entries below the cut are outside the window. ok is false when the
// window keeps every entry.
func (c *Client) WindowCut(ctx context.Context, q, s string, w Window, now time.Time) (cut brand.ID, ok bool, err error) {
	if err := checkQS(q, s); err != nil {
		return 0, false, err
	}
	if w.Keep < 0 || w.MaxAge < 0 {
		return 0, false, fmt.Errorf("window of %s: negative limit (keep %d, max age %v)", where(q, s), w.Keep, w.MaxAge)
	}
	r := &Retention{c: c, clock: func() time.Time { return now }}
	xid, err := r.minXID(ctx, StreamKey(q, s), w)
	if err != nil || xid == "" {
		return 0, false, err
	}
	id, err := brand.ParseRedisID(xid)
	if err != nil {
		return 0, false, fmt.Errorf("window cut of %s at %s: %w", where(q, s), xid, err)
	}
	return id, true, nil
}

// archiveLua holds the archive's scripts; a rueidis.Lua only caches its SHA.
var archiveLua = newArchiveScripts()
