"""Rounds handed back to the caller, kept until the caller returns with its tool results.

When the model calls client and server tools in one round, the gateway runs the server calls and hands back
only the client calls (ordinary ``tool_calls``). The caller's next request carries the conversation as it saw
it: the handed-back assistant message and its results, but not the server calls. ``Handoffs`` remembers what
the caller did not see — every message the gateway added in that request — under a digest of the conversation
the caller holds (and who holds it: the principal, so another key, user or conversation with the same messages
finds nothing), and ``expand`` puts it back, so the model sees a complete history.

Entries are records of the gateway's shared state (``gateway.state``): ``ttl_s`` seconds from their last use, in
this process's memory by default, in Redis in cluster mode — so a follow-up may reach any replica. An entry gone
(expired) leaves the caller an answer all the same: the model then sees only the client calls. The store
unreachable is ``StateUnavailable`` (503) for a request that needs it: one that hands tools back, or returns
with results for handed-back calls; other turns never touch it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..state import SharedState
from ..state.memory import MemoryState
from .messages import text_of

Message = dict[str, Any]
RECORD = "chat-handoff:"


class Handoffs:
    def __init__(self, state: SharedState | None = None, ttl_s: float = 3600.0):
        self._state = state if state is not None else MemoryState()
        self._ttl_s = ttl_s

    async def remember(self, principal: Sequence[str | None], visible: Sequence[Message],
                       added: list[Message]) -> None:
        """``visible`` ends with the handed-back message; ``added`` is what the gateway sent the model instead."""
        await self._state.put(RECORD + _digest(principal, visible), json.dumps(added).encode(), self._ttl_s)

    async def expand(self, principal: Sequence[str | None], messages: Sequence[Message]) -> list[Message]:
        """The conversation with every handed-back message of the current turn replaced by what it stood for."""
        start = last_user_index(messages) + 1
        expanded = list(messages[:start])
        for index in range(start, len(messages)):
            message = messages[index]
            entry = None
            if message.get("role") == "assistant" and message.get("tool_calls"):
                key = RECORD + _digest(principal, messages[: index + 1])
                raw = await self._state.get(key)
                if raw is not None:
                    entry = json.loads(raw)
                    await self._state.touch(key, self._ttl_s)  # in use: lives ttl_s from now
            expanded.extend(entry if entry is not None else [message])
        return order_results(expanded)


def last_user_index(messages: Sequence[Message]) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)


def order_results(messages: list[Message]) -> list[Message]:
    """Tool results right after each assistant message, in the order of its calls."""
    ordered: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        ordered.append(message)
        index += 1
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        end = index
        while end < len(messages) and messages[end].get("role") == "tool":
            end += 1
        position = {call["id"]: n for n, call in enumerate(message["tool_calls"])}
        ordered += sorted(messages[index:end], key=lambda m: position.get(m.get("tool_call_id"), len(position)))
        index = end
    return ordered


def _digest(principal: Sequence[str | None], messages: Sequence[Message]) -> str:
    # Only what survives a round trip through any client: role, text, calls and the ids that tie them.
    shape = [
        [m.get("role"), text_of(m.get("content")), m.get("tool_call_id"),
         [[c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")]
          for c in m.get("tool_calls") or []]]
        for m in messages
    ]
    return hashlib.sha256(json.dumps([list(principal), shape], ensure_ascii=False).encode()).hexdigest()
