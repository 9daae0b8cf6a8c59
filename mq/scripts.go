package mq

// Server-side scripts. Each one touches only keys of one queue (one hashtag,
// one Cluster slot) and declares every key it touches in KEYS. They start
// with the "#!lua" shebang (Redis ≥ 7): Redis then checks for OOM before the
// script runs, so a script that writes either runs whole or not at all.
//
// Another package builds its scripts on the same helpers with NewScript
// (script.go): the archive's fenced trim calls cappedtrim, the trim below.

// luaIDs compares stream ids: the part of luaLib that luaTop shares.
const luaIDs = `
local function split(id)
  local d = string.find(id, '-', 1, true)
  return string.sub(id, 1, d - 1), string.sub(id, d + 1)
end
local function cmpdec(a, b)
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  if a == b then return 0 end
  if a < b then return -1 end
  return 1
end
local function cmpid(a, b)
  local am, as = split(a)
  local bm, bs = split(b)
  local c = cmpdec(am, bm)
  if c ~= 0 then return c end
  return cmpdec(as, bs)
end
`

// luaLib holds helpers the scripts share. Stream ids are compared as
// strings of decimal digits, never as Lua numbers (doubles lose precision
// above 2^53).
const luaLib = luaIDs + `
local function incdec(s)
  local i = #s
  while i > 0 and string.sub(s, i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end
local function nextid(id)
  local ms, seq = split(id)
  if seq == '18446744073709551615' then return incdec(ms) .. '-0' end
  return ms .. '-' .. incdec(seq)
end
local function field(flat, name)
  for i = 1, #flat, 2 do
    if flat[i] == name then return flat[i + 1] end
  end
  return nil
end
local function lastid(key)
  if redis.call('EXISTS', key) == 0 then return '0-0' end
  return field(redis.call('XINFO', 'STREAM', key), 'last-generated-id')
end

-- records(at) reads the batch of records a script is given from ARGV[at]
-- on: their count n, then per record its id, its field count nf and nf
-- name/value pairs. It returns {id, index of the first name, nf} per record
-- and nil, or nil and what is wrong ('malformed': the arguments are not
-- exactly such a batch of one or more; 'order': ids do not increase).
local function records(at)
  local n = tonumber(ARGV[at])
  local recs = {}
  local p = at + 1
  for i = 1, n do
    local nf = tonumber(ARGV[p + 1])
    recs[i] = {ARGV[p], p + 2, nf}
    p = p + 2 + 2 * nf
  end
  if n < 1 or p - 1 ~= #ARGV then return nil, 'malformed' end
  for i = 2, n do
    if cmpid(recs[i - 1][1], recs[i][1]) >= 0 then return nil, 'order' end
  end
  return recs, nil
end
`

// scriptAppend appends one chunk of records atomically, each with its given
// id, or none of them.
//
//	KEYS[1]  the stream
//	KEYS[2]  (optional) the stream's archived registry (mq.ArchivedRegistry)
//	KEYS[3]  (with KEYS[2]) the change feed of its slot (DirtySetKey)
//	ARGV[1]  "1" if this is a retry of a chunk whose reply was lost, else "0"
//	ARGV[2]  (with KEYS[2] only) the stream's member of the registry
//	ARGV[2]  n, the number of records (ARGV[3] with KEYS[2])
//	then per record: its Redis id, its number of fields f, and f name/value pairs
//
// With KEYS[2] and KEYS[3], a chunk appended (or landed) to a stream that is
// a member of its archived registry adds the stream's key to the change
// feed KEYS[3], in the same script: the beat cycles the streams the feed
// names (server, docs/SERVE.md "The beat").
//
// Replies {"OK"} when the chunk was appended; {"LANDED"} on a retry that
// finds any record of the chunk (same id, same fields) in the stream: the
// chunk is appended whole or not at all, so it landed, even if a trim or an
// XDEL has taken some of it since; {"TOP", id} when the first id is not above
// the stream's last id and the chunk is not in the stream (nothing appended:
// re-mint above id and send again); {"UNKNOWN"} on a retry that finds none
// of the chunk where it may have been and been trimmed or deleted since
// (the top is above its first id, and no entry below its first id is left,
// or one at or above it was deleted): re-minting could append it twice, so
// the outcome stays unknown. Ids within a chunk must increase.
const scriptAppend = "#!lua\n" + luaLib + `
local key = KEYS[1]
local at = 2
if KEYS[2] then at = 3 end
local function changed()
  if KEYS[3] and redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then
    redis.call('SADD', KEYS[3], key)
  end
end
local recs, bad = records(at)
if bad == 'malformed' then
  return redis.error_reply('ERR emq append: malformed arguments')
elseif bad then
  return redis.error_reply('ERR emq append: ids of a chunk must increase')
end
local n = #recs
local retry = ARGV[1] == '1'
if retry then
  -- A chunk is appended whole or not at all, under ids no one else mints,
  -- so one record of it still there proves it landed; trims and deletions
  -- since may have taken the others.
  local got = redis.call('XRANGE', key, recs[1][1], recs[n][1], 'COUNT', n + 1)
  local landed = #got > 0
  local k = 1
  for _, e in ipairs(got) do
    while k <= n and cmpid(recs[k][1], e[1]) < 0 do k = k + 1 end
    local r = recs[k]
    if k > n or r[1] ~= e[1] or #e[2] ~= 2 * r[3] then landed = false break end
    for j = 1, 2 * r[3] do
      if e[2][j] ~= ARGV[r[2] + j - 1] then landed = false break end
    end
    if not landed then break end
  end
  if landed then changed() return {'LANDED'} end
  if #got > 0 then
    -- Another producer's entries where this chunk would be: it never
    -- landed (its XADD would have failed).
    local top = lastid(key)
    return {'TOP', top}
  end
end
local function xadd(r, call)
  local a = {key, r[1]}
  for j = r[2], r[2] + 2 * r[3] - 1 do a[#a + 1] = ARGV[j] end
  return call('XADD', unpack(a))
end
local first = xadd(recs[1], redis.pcall)
if type(first) == 'table' and first.err then
  local ok, top = pcall(lastid, key)
  if not (ok and top and cmpid(recs[1][1], top) <= 0) then return first end
  if retry then
    -- None of the chunk is there and the top is above its first id: it
    -- never landed only if an entry below its first id is still there (a
    -- trim takes the oldest entries first, so none of the chunk was
    -- trimmed) and no entry at or above it was ever deleted.
    local low = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)
    local deleted = field(redis.call('XINFO', 'STREAM', key), 'max-deleted-entry-id')
    if not (#low == 1 and cmpid(low[1][1], recs[1][1]) < 0 and deleted and cmpid(deleted, recs[1][1]) < 0) then
      return {'UNKNOWN'}
    end
  end
  return {'TOP', top}
end
for i = 2, n do xadd(recs[i], redis.call) end
changed()
return {'OK'}
`

// luaTrim holds cappedtrim(key, minid, pass), the trim of scriptTrim
// without its archived check: XTRIM MINID of the stream key to minid,
// lowered to the oldest entry any consumer group has pending or not yet
// delivered, except the groups named in pass (a table of name → true; nil
// or {} passes none). It replies {"OK", trimmed, minid, capped} where minid
// is the id actually trimmed to and capped names the group that held the
// trim back ("" if none). The archive's fenced trim calls it too (NewScript
// prepends it), so the consumer-group cap is the same code in both; only
// the archive passes groups (stalled ones, under stalled_groups: archive,
// whose entries below minid are already archived).
const luaTrim = `
local function cappedtrim(key, minid, pass)
  if redis.call('EXISTS', key) == 0 then return {'OK', '0', minid, ''} end
  local capped = ''
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name = field(g, 'name')
    if not (pass and pass[name]) then
      local succ = nextid(field(g, 'last-delivered-id'))
      if cmpid(succ, minid) < 0 then
        minid = succ
        capped = name .. ' (undelivered)'
      end
      local pend = redis.call('XPENDING', key, name)
      if pend[1] > 0 and cmpid(pend[2], minid) < 0 then
        minid = pend[2]
        capped = name .. ' (pending)'
      end
    end
  end
  local n = redis.call('XTRIM', key, 'MINID', minid)
  return {'OK', tostring(n), minid, capped}
end
`

// scriptTrim trims a stream to a minimum id, unless it is archived, never
// past an entry that a consumer group has pending or not yet delivered.
//
//	KEYS[1]  the stream
//	KEYS[2]  the queue's set of archived streams
//	ARGV[1]  the stream's name (its member in KEYS[2])
//	ARGV[2]  the requested minimum id (entries below it go)
//
// Replies {"ARCHIVED"} (nothing trimmed) or cappedtrim's {"OK", trimmed,
// minid, capped}. The check and the trim are one atomic step: a stream
// registered as archived is never trimmed here.
const scriptTrim = "#!lua\n" + luaLib + luaTrim + `
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return {'ARCHIVED'} end
return cappedtrim(KEYS[1], ARGV[2], nil)
`

// scriptSetID raises a stream's last id to ARGV[1], never lowers it, and
// creates an empty stream with that last id if the key is missing.
//
// Replies {"RAISED"|"CREATED"|"KEPT", last id after the call}.
const scriptSetID = "#!lua\n" + luaLib + `
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then
  redis.call('XADD', key, 'MAXLEN', '0', ARGV[1], 'x', 'x')
  return {'CREATED', ARGV[1]}
end
local top = lastid(key)
if cmpid(ARGV[1], top) <= 0 then return {'KEPT', top} end
redis.call('XSETID', key, ARGV[1])
return {'RAISED', ARGV[1]}
`

// scriptPublish appends an entry to a lane, capped, with the id of the
// lane's previous entry as its first field, "prev": a follower whose cursor
// is below an entry's prev knows that entries it never read were trimmed.
//
//	KEYS[1] the lane; ARGV[1] the cap; then the entry's name/value pairs
//
// Replies the new entry's id.
const scriptPublish = "#!lua\n" + `
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local prev = '0-0'
if #last > 0 then prev = last[1][1] end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'prev', prev, unpack(ARGV, 2))
`

// luaTop holds what the append transaction's guard needs of luaLib: id
// comparison and a stream's last id.
const luaTop = luaIDs + `
local function lastid(key)
  if redis.call('EXISTS', key) == 0 then return '0-0' end
  local flat = redis.call('XINFO', 'STREAM', key)
  for i = 1, #flat, 2 do
    if flat[i] == 'last-generated-id' then return flat[i + 1] end
  end
  return nil
end
`

// scriptAppendGuard opens the append transaction of a chunk (appendTx):
// MULTI, this guard, the chunk's XADDs with their ids, scriptAppendRestore,
// EXEC. Redis runs a transaction whole with no other client's command in
// between, so the guard sees the stream as the XADDs do.
//
//	KEYS[1]  the stream
//	KEYS[2]  the stream's archived registry (mq.ArchivedRegistry)
//	KEYS[3]  the change feed of its slot (DirtySetKey)
//	KEYS[4]  the slot's append scratch key (appendScratchKey)
//	ARGV[1]  the stream's member of the registry
//	ARGV[2]  the chunk's first id, ARGV[3] its last id
//	ARGV[4]  (optional) the last id the stream must end at: the previous
//	         chunk's last, for a chunk sent in one pipeline behind it
//
// When the first id is above the stream's last id (and, with ARGV[4], the
// last id is ARGV[4]: the chunk before it landed), every XADD after it
// succeeds (ids increase): the guard adds an archived stream to the change
// feed, as scriptAppend does, and replies {"OK"}. Otherwise it replies
// {"TOP", last id} and makes every XADD of the chunk fail: when the last
// id is above the stream's, it raises the stream's last id to the chunk's
// last (XSETID) and keeps the old one in KEYS[4], from which
// scriptAppendRestore sets it back after the XADDs have failed. No other
// client sees the raised id; the stream ends the transaction as it began.
const scriptAppendGuard = "#!lua\n" + luaTop + `
local key = KEYS[1]
local top = lastid(key)
if cmpid(ARGV[2], top) > 0 and (ARGV[4] == nil or cmpid(ARGV[4], top) == 0) then
  if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
    redis.call('SADD', KEYS[3], key)
  end
  return {'OK'}
end
if cmpid(ARGV[3], top) > 0 then
  redis.call('SET', KEYS[4], top)
  redis.call('XSETID', key, ARGV[3])
end
return {'TOP', top}
`

// scriptAppendRestore closes the append transaction: it sets the stream's
// last id back to the one the guard kept in the scratch key, if it kept
// one (the chunk's XADDs all failed), and deletes the scratch key.
//
//	KEYS[1]  the stream; KEYS[2] the scratch key
//
// Replies 1 if it restored a last id, else 0.
const scriptAppendRestore = "#!lua\n" + `
local top = redis.call('GET', KEYS[2])
if not top then return 0 end
redis.call('DEL', KEYS[2])
redis.call('XSETID', KEYS[1], top)
return 1
`
