"""Rounds handed back to the caller, kept until the caller returns with its tool results.

When the model calls client and server tools in one round, the gateway runs the server calls and hands back
only the client calls (ordinary ``tool_calls``). The caller's next request carries the conversation as it saw
it: the handed-back assistant message and its results, but not the server calls. ``Handoffs`` remembers what
the caller did not see — every message the gateway added in that request — under a digest of the conversation
the caller holds (and who holds it), and ``expand`` puts it back, so the model sees a complete history.

Entries live ``ttl_s`` seconds in this process (bounded in number, least recently used evicted first). A caller
that returns after that, or to another replica, still gets an answer: the model then sees only the client calls.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from .providers.base import text_of

Message = dict[str, Any]


class Handoffs:
    def __init__(self, ttl_s: float = 3600.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, list[Message]]] = OrderedDict()

    def remember(self, principal: Sequence[str | None], visible: Sequence[Message], added: list[Message]) -> None:
        """``visible`` ends with the handed-back message; ``added`` is what the gateway sent the model instead."""
        now = self._clock()
        while self._entries and (len(self._entries) >= self._max_entries or next(iter(self._entries.values()))[0] < now):
            self._entries.popitem(last=False)
        self._entries[_digest(principal, visible)] = (now + self._ttl_s, added)

    def expand(self, principal: Sequence[str | None], messages: Sequence[Message]) -> list[Message]:
        """The conversation with every handed-back message of the current turn replaced by what it stood for."""
        start = last_user_index(messages) + 1
        expanded = list(messages[:start])
        now = self._clock()
        for index in range(start, len(messages)):
            message = messages[index]
            entry = None
            if message.get("role") == "assistant" and message.get("tool_calls"):
                key = _digest(principal, messages[: index + 1])
                entry = self._entries.get(key)
                if entry is not None and entry[0] < now:
                    del self._entries[key]
                    entry = None
                elif entry is not None:
                    entry = self._entries[key] = (now + self._ttl_s, entry[1])
                    self._entries.move_to_end(key)
            expanded.extend(entry[1] if entry is not None else [message])
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
