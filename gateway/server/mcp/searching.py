"""Tool search on MCP (the ``tool_search`` setting, ``gateway.settings.ToolSearch``): a caller whose ``tools/list`` is a
search gets its pinned tools (``always``) and two meta-tools instead of every tool it may use.

- ``search_tools`` (``query``, ``k``): the best tools for the query among those the caller may use, each as its
  ``tools/list`` entry (name, description, input schema), best first (``gateway.search``: the path REST and the
  bench take);
- ``call_tool`` (``name``, ``arguments``): the call of that tool, made as a direct ``tools/call`` is — the same
  checks (a tool the caller may not use is unknown to it, exactly as a direct call), validation, filters, limits
  and audit (``ToolHandlers.call_tool``).

With ``tool_search.toolsets`` only the tools of those toolsets are left to search: the others are listed beside
the meta-tools, and a caller who may use none of those toolsets' tools gets its whole list, without meta-tools.
``search_tools`` ranks only the tools left to search (those listed are at hand already); ``call_tool`` calls any.
A catalog tool named like a meta-tool is shadowed in the list while search is on, and still called through
``call_tool``. Whether a caller searches is decided by its API key's ``tool_search``, else the setting, and never
for a caller who may use ``min_tools`` tools or fewer (the whole list is small enough).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...search import MAX_K, Searches
from ...settings import ToolSearch
from .messages import INVALID_PARAMS, ProtocolError

if TYPE_CHECKING:
    from ...catalog.snapshot import Catalog, Tool
    from ..http.auth import Caller

SEARCH_TOOLS, CALL_TOOL = "search_tools", "call_tool"
META_TOOLS = (SEARCH_TOOLS, CALL_TOOL)


def searched(settings: ToolSearch, caller: Caller) -> bool | ToolSearch:
    """What of ``caller``'s tools its listing leaves to search (before ``min_tools`` is weighed): all of them (True),
    none (False), or those of the setting's toolsets (the setting: ``ToolSearch.leaves_to_search``). Its API key's
    own ``tool_search`` decides all or none for it."""
    key = caller.key
    chosen = key.tool_search if key is not None else None
    if chosen is not None:
        return chosen
    return True if settings.mcp else settings if settings.toolsets else False


def listed_beside(tool: Tool, searched: bool | ToolSearch, pinned: frozenset[str]) -> bool:
    """Whether ``tool`` is listed beside the meta-tools (when other tools are left to search): pinned, or in none of
    the toolsets left to search — and not named like a meta-tool (shadowed by it, called through ``call_tool``)."""
    if tool.id in META_TOOLS:
        return False
    left = searched is True or (searched is not False and searched.leaves_to_search(tool.definition.toolsets))
    return tool.id in pinned or not left


def meta_entries(tools: int) -> list[dict[str, Any]]:
    """The two meta-tools' ``tools/list`` entries; ``tools``: how many are left to search."""
    return [
        {"name": SEARCH_TOOLS, "title": "Search tools",
         "description": f"Finds the tools for a task among the {tools:,} this gateway offers you, best first, each with "
                        "its description and input schema. Describe the task in a few words; then call the tool "
                        f"you chose with {CALL_TOOL}.",
         "inputSchema": {"type": "object", "additionalProperties": False, "required": ["query"], "properties": {
             "query": {"type": "string", "minLength": 1, "description": "The task, in words."},
             "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "description": "How many tools (default 8)."}}},
         "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}},
        {"name": CALL_TOOL, "title": "Call a tool",
         "description": f"Calls a tool {SEARCH_TOOLS} found, by its name, with arguments that fit its input schema.",
         "inputSchema": {"type": "object", "additionalProperties": False, "required": ["name"], "properties": {
             "name": {"type": "string", "minLength": 1, "description": f"The tool's name, as {SEARCH_TOOLS} gave it."},
             "arguments": {"type": "object", "description": "The tool's arguments."}}}},
    ]


async def search_result(searches: Searches, catalog: Catalog, searched: list[Tool], key: Any,
                        entries: dict[str, dict[str, Any]], arguments: Any, default_k: int) -> dict[str, Any]:
    """``search_tools``' result: the best of ``searched`` (the caller's tools its list leaves out) for the query,
    their entries as text (what a model reads) and structured."""
    arguments = arguments or {}
    query, k = arguments.get("query"), arguments.get("k", default_k)
    if not isinstance(query, str) or not query.strip():
        return _error("search_tools: 'query' must be the task, in words.")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        return _error(f"search_tools: 'k' must be a whole number from 1 to {MAX_K}.")
    ids = catalog.memo((*key, "ids"), lambda: frozenset(tool.id for tool in searched))
    found = await searches.search(catalog, query, k, reach=key, allowed=lambda tool: tool.id in ids)
    tools = [entries[hit.tool.id] for hit in found]
    text = json.dumps(tools, ensure_ascii=False) if tools else "No tool fits; say the task in other words."
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"tools": tools}, "isError": False,
            "resultType": "complete"}


def called(arguments: Any) -> tuple[str, dict[str, Any] | None]:
    """The tool ``call_tool`` names and its arguments (None when it gives none or null, as a direct call's are);
    ``ProtocolError`` for a call that names none."""
    arguments = arguments or {}
    name, inner = arguments.get("name"), arguments.get("arguments")
    if not isinstance(name, str) or not name:
        raise ProtocolError(INVALID_PARAMS, "call_tool: 'name' must name a tool search_tools found.")
    if inner is not None and not isinstance(inner, dict):
        raise ProtocolError(INVALID_PARAMS, "call_tool: 'arguments' must be an object.")
    return name, inner


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}

