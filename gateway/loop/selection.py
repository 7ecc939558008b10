"""``tool_selection``: the chat loop offers each turn the tools that fit the conversation so far, not every tool.

    tool_selection: {search: {k: 8, always: [get_time]}}   # in the settings' chat, or a request's gateway
    tool_selection: {search: {k: 8, toolsets: [github]}}   # only those toolsets' tools are searched
    tool_selection: all                                     # a request asking for every tool (the default)

With ``search``, of the tools a request would offer (its toolsets, tags, allowlists, the caller's key, the offer
rules), the model is given the ``k`` best for the user's messages so far (``gateway.search``: the ranking REST and
MCP use), the ``always`` ones, every tool whose own offer rule matched the latest message (an admin's rule is a
stronger word than a ranking), and, when ``toolsets`` names the toolsets left to search, every tool of none of
them. The response's ``tools_offered`` says which tools were offered and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..search.bounds import MAX_K

ALL = "all"


@dataclass(frozen=True)
class Selection:
    k: int
    always: tuple[str, ...] = ()
    toolsets: tuple[str, ...] = ()  # only these toolsets' tools are searched (empty: every tool)


def parse_selection(value: Any, where: str) -> Selection | str:
    """``all`` or a ``Selection``; ``ValueError`` says what is wrong, at ``where``."""
    if value == ALL:
        return ALL
    search = value.get("search") if isinstance(value, Mapping) and set(value) == {"search"} else None
    if not isinstance(search, Mapping) or set(search) - {"k", "always", "toolsets"}:
        raise ValueError(f"{where}: expected 'all' or {{search: {{k: 8, always: [tool ids], toolsets: [names]}}}}")
    k, always, toolsets = search.get("k", 8), search.get("always", []), search.get("toolsets", [])
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValueError(f"{where}.search.k: expected a whole number from 1 to {MAX_K}, got {k!r}")
    if not isinstance(always, list) or not all(isinstance(item, str) for item in always):
        raise ValueError(f"{where}.search.always: expected a list of tool ids")
    if not isinstance(toolsets, list) or not all(isinstance(item, str) for item in toolsets):
        raise ValueError(f"{where}.search.toolsets: expected a list of toolset names")
    return Selection(k, tuple(always), tuple(toolsets))
