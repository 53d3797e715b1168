package cluster

import "github.com/redis/go-redis/v9"

// Time in the scripts is microseconds since the Unix epoch: Redis's own
// clock (TIME) unless the caller passes one (the step-table tests do), so
// replicas whose clocks disagree by milliseconds still share one
// schedule. Every number stays below 2^53, exact in Lua's doubles.
const luaNow = `
local function now_us(arg)
  local n = tonumber(arg)
  if n > 0 then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function level_of(key, cap, refill, now)
  local h = redis.call('HMGET', key, 'tokens', 'last')
  if not h[1] then return cap end
  return math.min(cap, tonumber(h[1]) + math.max(now - tonumber(h[2]), 0) * refill / 1e6)
end
local function next_slots(key, now, interval, tolerance, count, ttl)
  local slot = tonumber(redis.call('GET', key) or '0')
  if slot == 0 or now - slot >= math.max(interval, tolerance) then slot = now end
  redis.call('SET', key, string.format('%.0f', slot + count * interval), 'PX', ttl)
  return slot - now
end
local function set_level(key, level, cap, refill, now)
  redis.call('HSET', key, 'tokens', string.format('%.6f', level), 'last', string.format('%.0f', now))
  local ttl = 86400000
  if refill > 0 then ttl = math.ceil((cap - level) / refill * 1000) + 1000 end
  redis.call('PEXPIRE', key, ttl)
end
`

// admitLua leases what one request needs of every cap it is under, all
// or nothing.
//
// A granted request may also take its bucket's next release slot (see
// paceLua) in the same call. Admitter does not use it (it passes 0):
// taking slots at admission made a replica hold slots for requests that
// other requests' batched slots then covered, so a bucket ran below its
// rate; slots are taken at release, in batches (Pacer).
//
// KEYS: epoch, hold, the bucket's pacing key, then one key per counter.
// ARGV: now (0 = TIME), the epoch the caller knows ("" = none), hold ms,
// the pacing interval µs (0 = take no slot), tolerance µs and idle TTL ms,
// then five per counter:
// kind ("w" fixed window, "b" token bucket), limit (a bucket's capacity),
// need, want (need plus the lease's extra), and the window key's TTL in ms
// or the bucket's refill per second.
//
// A window grants when need fits under limit, or when the window is
// empty (a cost above the whole cap goes alone, as in policy.FixedWindow);
// it grants up to want, never past the cap. A bucket grants when it holds
// need, up to want whole tokens.
//
// Reply: {status, epoch, failed counter, wait µs, then grant and
// used-after (a bucket: tokens left) per counter}; a grant's wait is µs
// until its release slot (-1: no slot taken). status 1 = granted,
// 0 = denied (failed counter is 1-based; wait is a bucket's refill time,
// -1 never), -1 = holding: the store came back empty and replicas are
// still re-uploading their usage (wait = the hold's rest).
const admitLua = luaNow + `
local now = now_us(ARGV[1])
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  epoch = string.format('%.0f', now)
  redis.call('SET', KEYS[1], epoch)
  if ARGV[2] ~= '' and tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[2], '1', 'PX', ARGV[3]) end
end
local hold = redis.call('PTTL', KEYS[2])
if hold > 0 then return {-1, epoch, 0, hold * 1000} end
local n = #KEYS - 3
local seen = {}
for i = 1, n do
  local a = 7 + (i - 1) * 5
  local kind, limit, need = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local key = KEYS[i + 3]
  if kind == 'w' then
    local used = tonumber(redis.call('GET', key) or '0')
    if used > 0 and used + need > limit then return {0, epoch, i, 0} end
    seen[i] = used
  else
    local refill = tonumber(ARGV[a + 4])
    local level = level_of(key, limit, refill, now)
    if level < need then
      local wait = -1
      if refill > 0 and need <= limit then wait = math.ceil((need - level) / refill * 1e6) end
      return {0, epoch, i, wait}
    end
    seen[i] = level
  end
end
local slot = -1
if tonumber(ARGV[4]) > 0 then
  slot = math.max(next_slots(KEYS[3], now, tonumber(ARGV[4]), tonumber(ARGV[5]), 1, ARGV[6]), 0)
end
local out = {1, epoch, 0, slot}
for i = 1, n do
  local a = 7 + (i - 1) * 5
  local kind, limit, need, want = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local key = KEYS[i + 3]
  if kind == 'w' then
    local grant = math.max(math.min(want, limit - seen[i]), need)
    redis.call('INCRBY', key, grant)
    redis.call('PEXPIRE', key, ARGV[a + 4])
    out[#out + 1] = grant
    out[#out + 1] = seen[i] + grant
  else
    local refill = tonumber(ARGV[a + 4])
    local grant = math.max(math.min(want, math.floor(seen[i])), need)
    local level = seen[i] - grant
    set_level(key, level, limit, refill, now)
    out[#out + 1] = grant
    out[#out + 1] = math.floor(level)
  end
end
return out
`

// settleLua moves units between replicas and the shared counters without
// a check: a positive delta charges (usage known after the fact, usage
// re-uploaded after the store lost it), a negative one gives back (an
// idle lease, a refund). A give-back is skipped when the caller's epoch is
// not the store's: the counter it came from is gone, and taking from
// its successor would undercount.
//
// KEYS: epoch, hold, then one key per counter. ARGV: now (0 = TIME), the
// epoch the caller knows, hold ms to set (0 = none), then four per
// counter: kind, delta, limit (a bucket's capacity), and the window TTL ms
// or the bucket's refill per second. Reply: the store's epoch.
const settleLua = luaNow + `
local now = now_us(ARGV[1])
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  epoch = string.format('%.0f', now)
  redis.call('SET', KEYS[1], epoch)
end
if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[2], '1', 'PX', ARGV[3]) end
local same = ARGV[2] == epoch
for i = 1, #KEYS - 2 do
  local a = 4 + (i - 1) * 4
  local kind, delta, limit = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local key = KEYS[i + 2]
  if delta > 0 or same then
    if kind == 'w' then
      if delta > 0 then
        redis.call('INCRBY', key, delta)
        redis.call('PEXPIRE', key, ARGV[a + 3])
      elseif redis.call('EXISTS', key) == 1 then
        local used = tonumber(redis.call('GET', key))
        redis.call('SET', key, math.max(used + delta, 0), 'KEEPTTL')
      end
    else
      local refill = tonumber(ARGV[a + 3])
      local level = level_of(key, limit, refill, now)
      set_level(key, math.min(limit, level - delta), limit, refill, now)
    end
  end
end
return epoch
`

// paceLua hands out a bucket's next release slot from its shared "next
// free time" and moves that time one interval on: a slot that has come
// is released now, and one still ahead is the caller's to wait for. A
// bucket late by less than max(interval, tolerance) keeps its grid (the
// long-run rate stays exact when a replica is woken a little late); later
// than that it restarts from now, so an idle bucket earns no burst.
//
// A replica with several requests of the bucket queued takes count
// consecutive slots at once (slot, slot+interval, ...): one round trip
// for count releases. The reply is the first slot's offset from now,
// negative when the grid kept a slot that has passed: the caller places
// the batch on the grid, so that a bucket catching up releases every
// slot that has come at once, as policy.Pacer does, where slots counted
// from now would each wait an interval.
//
// KEYS: the bucket's pacing key. ARGV: now (0 = TIME), interval µs,
// tolerance µs, count, idle TTL ms. Reply: µs from now to the first slot
// (≤ 0: it has come).
const paceLua = luaNow + `
local now = now_us(ARGV[1])
return next_slots(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5])
`

var (
	admitScript  = redis.NewScript(admitLua)
	settleScript = redis.NewScript(settleLua)
	paceScript   = redis.NewScript(paceLua)
)
