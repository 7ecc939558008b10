"""Rate limits: ``rate_limit: {calls: N, per_s: S}`` on a tool (its YAML) or on an API key (the settings),
counted in the shared state (``gateway.state``), so one limit holds across every replica.

A limit lets a burst of ``calls`` through, then one call every ``per_s / calls`` seconds (GCRA, one atomic
Redis script per check; ``gateway.state.gcra``). ``invoke`` asks ``admit`` after the arguments are valid and
before the filters and the binding run; a call nobody limits never reaches this module's awaits.

The caller's key is checked before the tool, so a caller refused by its own key's limit uses none of the tool's
calls (a call refused by the tool's limit has used one of its key's: it was tried).

Fail closed: when the shared state cannot be reached, a limited call is refused with an error that says so (a
limit that cannot be counted is not enforced by letting everything through); calls without a limit need no
shared state and are unaffected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import ToolError
from . import SharedState, StateUnavailable

Limit = tuple[str, str, Mapping[str, Any]]  # (state key, who is limited as the message says it, {calls, per_s})


class RateLimited(ToolError):
    """A call refused by a rate limit; ``retry_after_s`` says when one would be taken (REST's ``Retry-After``)."""

    outcome = "rejected"

    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.retry_after_s = retry_after_s


def checked(value: Any, where: str) -> dict[str, Any]:
    """A ``rate_limit`` mapping from the settings, checked (the YAML's is checked by the schema); ``ValueError``
    names ``where`` and the value."""
    if (not isinstance(value, Mapping) or set(value) != {"calls", "per_s"}
            or not isinstance(value["calls"], int) or isinstance(value["calls"], bool) or value["calls"] < 1
            or not isinstance(value["per_s"], (int, float)) or isinstance(value["per_s"], bool)
            or not 0 < value["per_s"] <= 86400):
        raise ValueError(f"{where}: 'rate_limit' must be {{calls: <integer ≥ 1>, per_s: <seconds, 0 < s ≤ 86400>}}, "
                         f"got {value!r}")
    return {"calls": value["calls"], "per_s": float(value["per_s"])}


def key_limits(api_keys: Any) -> dict[str, Mapping[str, Any]]:
    """The limited API keys' limits by key name (computed once per catalog)."""
    return {key.name: key.rate_limit for key in api_keys if key.rate_limit is not None}


def applying(tool_id: str, tool_limit: Mapping[str, Any] | None, caller: str | None,
             keys: Mapping[str, Mapping[str, Any]]) -> tuple[Limit, ...]:
    """The limits a call must pass: its caller's key's, then its tool's; empty (the common case) for none."""
    key_limit = keys.get(caller) if caller is not None else None
    if tool_limit is None and key_limit is None:
        return ()
    limits: list[Limit] = []
    if key_limit is not None:
        limits.append((f"key:{caller}", f"API key '{caller}'", key_limit))
    if tool_limit is not None:
        limits.append((f"tool:{tool_id}", "it", tool_limit))  # "Tool 'x' was not run: it is rate limited ..."
    return tuple(limits)


async def admit(state: SharedState, tool_id: str, limits: tuple[Limit, ...]) -> None:
    """Take one call from each limit in turn; ``RateLimited`` at the first that has none left, ``ToolError`` when
    the shared state that counts them cannot be reached (the call is not run)."""
    for key, who, limit in limits:
        try:
            retry_after_s = await state.acquire(key, int(limit["calls"]), float(limit["per_s"]))
        except StateUnavailable as exc:
            raise ToolError(f"Tool '{tool_id}' was not run: {who} has a rate limit, and the shared state that "
                            f"counts it is unavailable ({exc}). Limited calls fail until it is back; calls "
                            "without a rate limit are unaffected.") from None
        if retry_after_s:
            wait = retry_after_seconds(retry_after_s)
            raise RateLimited(f"Tool '{tool_id}' was not run: {who} is rate limited to {limit['calls']} call(s) per "
                              f"{limit['per_s']:g} s; retry in {wait} s.", retry_after_s)


def retry_after_seconds(retry_after_s: float) -> int:
    """Whole seconds, rounded up (HTTP's ``Retry-After``): never 0, which would invite a retry that fails."""
    return max(1, math.ceil(retry_after_s))
