"""GCRA (the generic cell rate algorithm): one number per limit, the theoretical arrival time (TAT).

A limit of ``calls`` per ``per_s`` seconds lets a burst of ``calls`` through at once and then one call every
``per_s / calls`` seconds; it never needs a list of timestamps, so the Redis form is one key and one atomic
script. Both implementations share ``decide`` (in milliseconds, the unit Redis' clock gives the script).
"""

from __future__ import annotations


def decide(tat_ms: float | None, now_ms: float, calls: int, per_s: float) -> tuple[float, float]:
    """``(new_tat_ms, retry_after_ms)``: when ``retry_after_ms`` is 0 the call is taken and ``new_tat_ms`` stored;
    otherwise it is refused and the TAT stays as it was."""
    interval = per_s * 1000.0 / calls
    tat = max(tat_ms if tat_ms is not None else now_ms, now_ms)
    new_tat = tat + interval
    allowed_at = new_tat - per_s * 1000.0
    if allowed_at > now_ms:
        return tat, allowed_at - now_ms
    return new_tat, 0.0


# The same decision inside Redis, atomic per key; the server's clock, so replicas need not agree on theirs.
# Returns {taken (1/0), retry_after_ms as a string (Lua numbers become integers on the way out)}.
LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local calls = tonumber(ARGV[1])
local period = tonumber(ARGV[2]) * 1000
local interval = period / calls
-- A value no limit could have stored (not a number, or a TAT past now + period: left by another writer or
-- corruption, maybe without a TTL) counts as missing rather than refusing the limit forever.
local tat = tonumber(redis.call('GET', KEYS[1]) or now) or now
if tat < now or tat > now + period then tat = now end
local new_tat = tat + interval
local allowed_at = new_tat - period
if allowed_at > now then
  -- Refused: the TAT stays, but its TTL is re-asserted every time, so no key outlives its limit.
  redis.call('PEXPIRE', KEYS[1], math.ceil(tat - now) + 1)
  return {0, tostring(allowed_at - now)}
end
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil(new_tat - now) + 1)
return {1, '0'}
"""
