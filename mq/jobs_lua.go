package mq

// Job queue scripts. A job entry in emq:{Q}:jobs has the fields
//
//	job <JOB_…> attempt <n> <the job's own fields…>
//
// where n is the attempt its next delivery is (1 for a fresh job). A dead
// letter in emq:{Q}:jobs:dead has
//
//	job <JOB_…> attempt <attempts made> error <why> <the job's own fields…>
//
// With JobOptions.Outcomes set, every end of a delivery is also appended
// to the queue's outcome stream emq:{Q}:stream:<Outcomes> (its key passed
// as the scripts' last key, the queue's change feed emq:{Q}:dirty after it)
// as
//
//	outcome <done|retry|dead> job <JOB_…> attempt <n> consumer <name> error <why> <the job's own fields…>
//
// where n is the attempt that ended, consumer is who held it (for a
// stall's burial, the consumer that stalled) and why is "" for done; the entry's Redis id is the time
// it ended. The same script appends it, so an outcome is logged exactly
// when the job stream moved on.
//
// Delayed jobs wait in the sorted set emq:{Q}:jobs:delayed, scored by the
// Unix millisecond they are due, the member being the JSON array of the
// entry's fields (job id first, so members are unique). Acknowledged, dead
// and retried entries are deleted from the job stream, so every entry in it
// is either pending (claimed) or not yet delivered.

// luaOutcome holds the helpers that log an outcome (the ack script's
// whole library, so that an ack defines no more than it uses).
const luaOutcome = `
local function attempts(kv, deliveries)
  local n = tonumber(kv[4]) or 1
  return n + deliveries - 1
end
local function tail(kv, from, out)
  for j = from, #kv do out[#out + 1] = kv[j] end
  return out
end
local function logged(log, feed, outcome, kv, n, consumer, why)
  if not log then return end
  redis.call('XADD', log, '*', unpack(tail(kv, 5, {'outcome', outcome, 'job', kv[2], 'attempt', tostring(n), 'consumer', consumer, 'error', why})))
  redis.call('SADD', feed, log)
end
`

// luaJobs holds helpers of the job scripts (after luaLib).
const luaJobs = luaLib + luaOutcome + `
local function bury(jobs, dead, group, xid, kv, n, why)
  redis.call('XACK', jobs, group, xid)
  redis.call('XDEL', jobs, xid)
  redis.call('XADD', dead, '*', unpack(tail(kv, 5, {'job', kv[2], 'attempt', tostring(n), 'error', why})))
end
local function promote(jobs, delayed, now, limit)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, limit)
  for _, m in ipairs(due) do
    redis.call('XADD', jobs, '*', unpack(cjson.decode(m)))
    redis.call('ZREM', delayed, m)
  end
  return #due
end
local function ensuregroup(jobs, group)
  if redis.call('EXISTS', jobs) == 1 then
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', jobs)) do
      if field(g, 'name') == group then return end
    end
  end
  redis.call('XGROUP', 'CREATE', jobs, group, '0', 'MKSTREAM')
end
`

// scriptEnqueue enqueues a chunk of jobs, in order, each unless its id was
// enqueued within the dedup window (an id twice in one chunk: the second is
// a duplicate). An id remembered with another digest of its fields is a
// conflict: nothing is done for that job.
//
//	KEYS  jobs, delayed, ids, digests
//	ARGV  now (ms), dedup window (ms), group, n (the number of jobs),
//	      then per job: its id, due (ms; ≤ now: at once), the digest of its
//	      fields, its number of fields f, and f name/value pairs
//
// Replies one element per job, in order: the job stream entry id of a job
// queued now, "DELAYED", "DUP" or "CONFLICT". Malformed arguments are
// refused before anything is written. A chunk sent again after its reply
// was lost is harmless: each job that had landed is then a "DUP". Ids
// remembered without a digest (enqueued before digests were kept) are
// duplicates whatever their fields. The dedup set and the digests are read
// and written once a chunk (ZMSCORE, HMGET, ZADD, HSET of many members),
// so that a job costs one command of its own: its XADD, or its ZADD to the
// delayed set.
const scriptEnqueue = "#!lua\n" + luaJobs + `
local now, n = tonumber(ARGV[1]), tonumber(ARGV[4])
local js = {}
local p = 5
local ok = now and n and n >= 1
if ok then
  for i = 1, n do
    local nf = tonumber(ARGV[p + 3])
    if not nf or nf < 0 or not tonumber(ARGV[p + 1]) then break end
    js[i] = {p, nf}
    p = p + 4 + 2 * nf
  end
end
if not ok or #js ~= n or p - 1 ~= #ARGV then
  return redis.error_reply('ERR emq enqueue: malformed arguments')
end
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
if #old > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  for i = 1, #old, 1000 do
    redis.call('HDEL', KEYS[4], unpack(old, i, math.min(i + 999, #old)))
  end
end
local expiry = now + tonumber(ARGV[2])
-- One ZMSCORE (per 1000 ids: Lua's unpack is bounded) finds the chunk's ids
-- the dedup set remembers, and one HMGET their digests; the ids new to it
-- are added with one ZADD and one HSET at the end. So a job queued now
-- costs Redis one command of its own, its XADD (or its delayed set's ZADD).
local ids = {}
for i = 1, n do ids[i] = ARGV[js[i][1]] end
local known = {} -- id → its remembered digest, or false (none kept)
local kn = {}
for i = 1, n, 1000 do
  local s = redis.call('ZMSCORE', KEYS[3], unpack(ids, i, math.min(i + 999, n)))
  for j = 1, #s do
    local id = ids[i + j - 1]
    if s[j] and known[id] == nil then
      known[id] = false
      kn[#kn + 1] = id
    end
  end
end
for i = 1, #kn, 1000 do
  local d = redis.call('HMGET', KEYS[4], unpack(kn, i, math.min(i + 999, #kn)))
  for j = 1, #d do known[kn[i + j - 1]] = d[j] end
end
local grouped = false
local out, zs, hs = {}, {}, {}
for i = 1, n do
  local at, nf = js[i][1], js[i][2]
  local id, digest = ARGV[at], ARGV[at + 2]
  local d = known[id]
  if d ~= nil then
    if d and d ~= digest then out[i] = 'CONFLICT' else out[i] = 'DUP' end
  else
    known[id] = digest -- a second job of the chunk under the id meets it
    zs[#zs + 1] = expiry
    zs[#zs + 1] = id
    hs[#hs + 1] = id
    hs[#hs + 1] = digest
    if not grouped then
      ensuregroup(KEYS[1], ARGV[3])
      grouped = true
    end
    local fields = {'job', id, 'attempt', '1'}
    for j = at + 4, at + 3 + 2 * nf do fields[#fields + 1] = ARGV[j] end
    if tonumber(ARGV[at + 1]) > now then
      redis.call('ZADD', KEYS[2], ARGV[at + 1], cjson.encode(fields))
      out[i] = 'DELAYED'
    else
      out[i] = redis.call('XADD', KEYS[1], '*', unpack(fields))
    end
  end
end
for i = 1, #zs, 2000 do
  redis.call('ZADD', KEYS[3], unpack(zs, i, math.min(i + 1999, #zs)))
  redis.call('HSET', KEYS[4], unpack(hs, i, math.min(i + 1999, #hs)))
end
return out
`

// scriptClaim promotes due delayed jobs, then claims new entries for a
// consumer.
//
//	KEYS  jobs, delayed
//	ARGV  group, consumer, count, now (ms)
//
// Replies the claimed entries, as XREADGROUP gives them. A queue with no
// job stream (nothing due was ever enqueued) replies nothing and creates
// nothing: a claim does not make a queue.
const scriptClaim = "#!lua\n" + luaJobs + `
promote(KEYS[1], KEYS[2], ARGV[4], ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
ensuregroup(KEYS[1], ARGV[1])
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
if not r then return {} end
return r[1][2]
`

// scriptAck acknowledges and deletes entries, logging each one that was
// pending as done when an outcome stream is given.
//
//	KEYS  jobs[, outcome stream, change feed]
//	ARGV  group, then entry ids
//
// Replies the number of entries that were pending.
const scriptAck = "#!lua\n" + luaOutcome + `
local n = 0
local log = KEYS[2]
for i = 2, #ARGV do
  local p
  if log then p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1) end
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    if log and #p > 0 then
      local e = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])
      if #e > 0 then logged(log, KEYS[3], 'done', e[1][2], attempts(e[1][2], p[1][4]), p[1][2], '') end
    end
    redis.call('XDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
`

// scriptFail ends a failed delivery: the job goes to the delayed set for
// another attempt after a backoff, or to the dead letters once it has had
// its attempts.
//
//	KEYS  jobs, delayed, dead[, outcome stream, change feed]
//	ARGV  group, consumer, entry id, error text, max attempts, now (ms),
//	      backoff (ms)
//
// Replies {"RETRY", next attempt}, {"DEAD", attempts}, {"NOTPENDING"} or
// {"NOTOWNER", owner}.
const scriptFail = "#!lua\n" + luaJobs + `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 then return {'NOTPENDING'} end
if p[1][2] ~= ARGV[2] then return {'NOTOWNER', p[1][2]} end
local e = redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3])
if #e == 0 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
  return {'NOTPENDING'}
end
local kv = e[1][2]
local n = attempts(kv, p[1][4])
if n >= tonumber(ARGV[5]) then
  logged(KEYS[4], KEYS[5], 'dead', kv, n, ARGV[2], ARGV[4])
  bury(KEYS[1], KEYS[3], ARGV[1], ARGV[3], kv, n, ARGV[4])
  return {'DEAD', tostring(n)}
end
logged(KEYS[4], KEYS[5], 'retry', kv, n, ARGV[2], ARGV[4])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
kv[4] = tostring(n + 1)
redis.call('ZADD', KEYS[2], tonumber(ARGV[6]) + tonumber(ARGV[7]), cjson.encode(kv))
return {'RETRY', kv[4]}
`

// scriptRecover takes over claims idle for at least min-idle: each one that
// has had its attempts goes to the dead letters, the others are claimed by
// the consumer (XCLAIM, which counts a delivery).
//
//	KEYS  jobs, dead[, outcome stream, change feed]
//	ARGV  group, consumer, min idle (ms), count, max attempts
//
// Replies {claimed, dead} where claimed is a list of {xid, attempt, kv}.
// A burial is logged dead, with the stalled consumer; a take-over is not
// an outcome (the job's attempt goes on under another consumer).
const scriptRecover = "#!lua\n" + luaJobs + `
local pend = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[3], '-', '+', ARGV[4])
local claimed, dead = {}, 0
for _, p in ipairs(pend) do
  local xid = p[1]
  local e = redis.call('XRANGE', KEYS[1], xid, xid)
  if #e == 0 then
    redis.call('XACK', KEYS[1], ARGV[1], xid)
  else
    local kv = e[1][2]
    local n = attempts(kv, p[4])
    if n >= tonumber(ARGV[5]) then
      local why = 'stalled: not acknowledged within ' .. ARGV[3] .. ' ms'
      logged(KEYS[3], KEYS[4], 'dead', kv, n, p[2], why)
      bury(KEYS[1], KEYS[2], ARGV[1], xid, kv, n, why)
      dead = dead + 1
    else
      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], xid)
      claimed[#claimed + 1] = {xid, tostring(n + 1), kv}
    end
  end
end
return {claimed, dead}
`

// scriptRedrive moves dead letters back to the job stream with fresh
// attempts.
//
//	KEYS  jobs, dead
//	ARGV  group, "all" and a count, or "ids" and dead entry ids
//
// Replies the new job entry ids. A queue with no dead letters replies
// nothing and creates nothing.
const scriptRedrive = "#!lua\n" + luaJobs + `
if redis.call('EXISTS', KEYS[2]) == 0 then return {} end
local entries = {}
if ARGV[2] == 'all' then
  entries = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', ARGV[3])
else
  for i = 3, #ARGV do
    local e = redis.call('XRANGE', KEYS[2], ARGV[i], ARGV[i])
    if #e > 0 then entries[#entries + 1] = e[1] end
  end
end
ensuregroup(KEYS[1], ARGV[1])
local out = {}
for _, e in ipairs(entries) do
  local kv = e[2]
  out[#out + 1] = redis.call('XADD', KEYS[1], '*', unpack(tail(kv, 7, {'job', kv[2], 'attempt', '1'})))
  redis.call('XDEL', KEYS[2], e[1])
end
return out
`
