package archive

import "github.com/echostore/echostore/mq"

// The archive's scripts on the live tier. Each touches only keys of one
// queue (one hashtag, one Cluster slot) and declares every key in KEYS;
// mq.NewScript puts the shebang and mq's shared helpers before each body
// (the fenced trim calls its cappedtrim).

// scriptLease takes or renews the archive driver's lease on a stream.
//
//	KEYS[1]  the lease (LeaseKey; value = the holder's fencing token)
//	KEYS[2]  the token counter (LeaseSeqKey)
//	ARGV[1]  time to live in milliseconds
//	ARGV[2]  the token the caller holds ("" to take a new lease)
//
// Replies {"HELD", token, pttl} when another token holds the lease;
// {"OK", token} when the caller holds it now: its own token renewed (also
// after it expired, if nobody took the lease since: the counter still
// equals the token), or a new token INCR'd from the counter; {"LOST"} when
// the caller's token expired and another took the lease since.
var scriptLease = mq.NewScript(`
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
`)

// scriptLeaseRelease deletes the lease if the caller's token still holds
// it. KEYS[1] the lease, ARGV[1] the token. Replies 1 if released, else 0.
var scriptLeaseRelease = mq.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// scriptFencedTrim is mq's trim (Client.TrimMinID) for the archive driver:
// instead of refusing an archived stream it refuses unless the caller's
// fencing token holds the stream's lease, and otherwise trims with the
// same cappedtrim (by MINID, never past an entry a consumer group has
// pending or undelivered, but those of the groups it is told to pass).
//
//	KEYS[1]  the stream
//	KEYS[2]  the lease
//	ARGV[1]  the caller's fencing token
//	ARGV[2]  the requested minimum id
//	ARGV[3…] consumer groups the trim passes (stalled ones under
//	         stalled_groups: archive; none: every group caps the trim)
//
// Replies {"FENCED"} (nothing trimmed) or cappedtrim's {"OK", trimmed,
// minid, capped}.
var scriptFencedTrim = mq.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {'FENCED'} end
local pass = {}
for i = 3, #ARGV do pass[ARGV[i]] = true end
return cappedtrim(KEYS[1], ARGV[2], pass)
`)

// scriptSeam writes the seam cache and registers the stream as archived.
//
//	KEYS[1] the seam hash, KEYS[2] the archived set
//	ARGV    stream name, w (branded text), xid, lsn
var scriptSeam = mq.NewScript(`
redis.call('HSET', KEYS[1], 'w', ARGV[2], 'xid', ARGV[3], 'lsn', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
return 'OK'
`)

// scriptSeamDrop deletes the seam hash if its w is still ARGV[1], so that a
// cache another node raised meanwhile is kept. Replies 1 if it deleted.
var scriptSeamDrop = mq.NewScript(`
if redis.call('HGET', KEYS[1], 'w') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// scriptDeleteStream deletes an archived stream from the live tier under
// the caller's archive lease, so that a running archive driver cannot race
// it.
//
//	KEYS[1]  the stream
//	KEYS[2]  the seam cache (SeamKey)
//	KEYS[3]  the archived set of the queue (mq.ArchivedSetKey)
//	KEYS[4]  the lease (LeaseKey)
//	ARGV[1]  the caller's fencing token
//	ARGV[2]  the stream's name (the member of the archived set)
//
// Replies {"FENCED"} (nothing deleted) when the token does not hold the
// lease, else {"OK", entries} with the number of entries the stream held.
// The token counter (LeaseSeqKey) is kept, so that fencing tokens keep
// increasing if the stream is archived again.
var scriptDeleteStream = mq.NewScript(`
if redis.call('GET', KEYS[4]) ~= ARGV[1] then return {'FENCED'} end
local n = 0
if redis.call('EXISTS', KEYS[1]) == 1 then n = redis.call('XLEN', KEYS[1]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
redis.call('SREM', KEYS[3], ARGV[2])
return {'OK', tostring(n)}
`)
