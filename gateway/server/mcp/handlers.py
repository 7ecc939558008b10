"""The handlers of ``tools/list`` and ``tools/call`` that both MCP paths answer with: the SDK's
(``gateway.server.mcp.sdk``, adapting them to its request context) and the fast path's (``gateway.server.mcp.fast``,
shaping their results as the SDK would). One module both import, so the two answer alike by construction.

- ``tools/list``: tools whose scope allows server execution (plus browser tools when the request names a
  browser session in ``_meta["gateway/session"]``), filtered by the caller's API key, in pages of
  ``PAGE_SIZE``. Entries come from ``gateway.formats.mcp``, computed once per catalog. A caller who searches
  (the ``tool_search`` setting) lists its pinned tools and the meta-tools ``search_tools`` and ``call_tool``
  instead (``gateway.server.mcp.searching``).
- ``tools/call``: through ``invoke``. Argument and tool failures are ``isError`` results an LLM can read;
  an unknown tool, or one the key may not use, is a JSON-RPC error (``ProtocolError``). So is a call whose person
  must first connect an account (``ToolResult.connect_url``) from a client that declared URL-mode elicitation:
  ``URLElicitationRequiredError`` (-32042), which its user is shown as a link to open, then the call is made again.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from ...catalog.snapshot import Catalog, Tool
from ...client_channel import SILENT, ClientChannel
from ...context import CallContext
from ...formats import mcp as mcp_format
from ...formats import render_tools
from ...invoke import invoke
from ...results import ToolResult
from ...runtime.gateway import Gateway
from ...settings import ToolSearch
from ..http.auth import Caller, unknown_tool
from . import searching
from .messages import INVALID_PARAMS, URL_ELICITATION_REQUIRED, ProtocolError

log = logging.getLogger("gateway.mcp")
PAGE_SIZE = 500
TRACEPARENT_META = "traceparent"  # _meta key of a W3C trace context (the MCP SDK's own key), before the header
SESSION_META = "gateway/session"  # _meta key naming the browser bridge session that may run client tools
CONVERSATION_META = "gateway/conversation_id"
X_MCP_HEADER_KEY = "x-mcp-header"  # the SDK's schema annotation for Mcp-Param-* headers (mcp.shared.inbound)


class ToolHandlers:
    """``tools/list`` and ``tools/call`` on one gateway's catalog, and the per-catalog views they read."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway

    def list_view(self, caller: Caller, headers: Mapping[str, str], params: Any) -> tuple[Catalog, tuple[Any, ...], int]:
        """What a ``tools/list`` lists: the catalog, which of its ``visible`` lists, and where the page starts."""
        catalog = self.gateway.catalog
        key = self._key(caller, headers, params.meta)
        return catalog, key, _offset(params.cursor, len(self.listed(catalog, key, caller)))

    def page_key(self, key: tuple[Any, ...], start: int) -> tuple[Any, ...] | None:
        """How a page is known in the catalog's memo, for one that starts where this surface's pages start (not
        for one at a cursor a client made up: those would be unbounded)."""
        return None if start % PAGE_SIZE else ("mcp:page", key, start, PAGE_SIZE)

    def list_page(self, catalog: Catalog, key: tuple[Any, ...], start: int, caller: Caller) -> dict[str, Any]:
        listed = self.listed(catalog, key, caller)
        page: dict[str, Any] = {"tools": listed[start:start + PAGE_SIZE], "resultType": "complete"}
        if start + PAGE_SIZE < len(listed):
            page["nextCursor"] = str(start + PAGE_SIZE)
        return page

    def listed(self, catalog: Catalog, key: tuple[Any, ...], caller: Caller) -> list[dict[str, Any]]:
        """The entries a ``tools/list`` pages through: the visible tools', or, where this caller searches, its
        pinned tools' and the meta-tools' (``searching``)."""
        def make() -> list[dict[str, Any]]:
            tools, entries = self.visible(catalog, key, caller), self.entries(catalog)
            if not self._searching(catalog, key, tools):
                return [entries[tool.id] for tool in tools]
            pinned = self._pinned()
            return [entries[tool.id] for tool in tools if searching.listed_beside(tool, key[3], pinned)
                    ] + searching.meta_entries(len(self._searched(catalog, key, tools)))

        return catalog.memo((*key, "listed"), make)

    def talks(self, message: Any) -> bool:
        """Whether a POSTed message calls a tool that may talk to its client while it runs (itself, or through
        ``call_tool``)."""
        talking = self.talking(self.gateway.catalog)
        if not talking or type(message) is not dict or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        name = params.get("name") if type(params) is dict else None
        if name == searching.CALL_TOOL and type(params.get("arguments")) is dict:
            inner = params["arguments"].get("name")
            return name in talking or (type(inner) is str and inner in talking)
        return type(name) is str and name in talking

    async def call_tool(self, caller: Caller, headers: Mapping[str, str], request_id: Any, params: Any,
                        client: ClientChannel = SILENT, capabilities: Any = None) -> dict[str, Any]:
        """``capabilities``: the calling client's (a model, or its JSON), for URL elicitation."""
        catalog = self.gateway.catalog
        if params.name in searching.META_TOOLS:
            key = self._key(caller, headers, params.meta)
            visible = self.visible(catalog, key, caller)
            if self._searching(catalog, key, visible):
                if params.name == searching.SEARCH_TOOLS:
                    return await searching.search_result(self.gateway.searches, catalog,
                                                         self._searched(catalog, key, visible), key,
                                                         self.entries(catalog), params.arguments,
                                                         self.gateway.settings.tool_search.k)
                name, arguments = searching.called(params.arguments)  # then called as a direct call is
                params = SimpleNamespace(name=name, arguments=arguments, meta=params.meta)
        tool = catalog.tools.get(params.name)
        # A tool the key may not use is unknown to it, as on REST: neither told apart nor suggested.
        if tool is None or tool.id not in self.entries(catalog) or not caller.may_use(tool):
            key = self._key(caller, headers, params.meta)
            known = [t.id for t in self.visible(catalog, key, caller)]
            raise ProtocolError(INVALID_PARAMS, str(unknown_tool(params.name, known)))
        result = await invoke(catalog, tool.id, params.arguments,
                              _context(headers, caller, request_id, params.meta, client))
        if result.connect_url is not None and accepts_url_elicitation(capabilities):
            elicitation = {"mode": "url", "elicitationId": uuid.uuid4().hex, "url": result.connect_url,
                           "message": result.text}
            raise ProtocolError(URL_ELICITATION_REQUIRED, result.text, {"elicitations": [elicitation]})
        return self.call_result(tool, result)

    def input_schema(self, name: str) -> Any:
        """For the SDK's ``Mcp-Param-*`` header check (2026-07-28): the listed schema of a tool that declares
        ``x-mcp-header`` parameters; None (nothing to check) for every other tool, without walking its schema."""
        catalog = self.gateway.catalog
        entries = self.entries(catalog)
        annotated = catalog.memo("mcp:x-mcp-header", lambda: {
            tool_id: entry["inputSchema"] for tool_id, entry in entries.items()
            if X_MCP_HEADER_KEY in json.dumps(entry["inputSchema"])})
        return annotated.get(name)

    # -- catalog views --------------------------------------------------------------------------------------

    def entries(self, catalog: Catalog) -> dict[str, dict[str, Any]]:
        """MCP tool entries by id, once per catalog; a tool MCP cannot express is absent (logged once)."""
        return catalog.memo("mcp:entries", lambda: _entries(catalog))

    def talking(self, catalog: Catalog) -> frozenset[str]:
        """The ids of the tools whose calls may talk to their client (``Tool.talks``), once per catalog."""
        return catalog.memo("mcp:talking", lambda: frozenset(tool.id for tool in catalog.tools.values() if tool.talks))

    def visible(self, catalog: Catalog, key: tuple[Any, ...], caller: Caller) -> list[Tool]:
        # Once per catalog and kind of caller (what may_use reads): walking 10,000 tools took ~50 ms a listing.
        entries = self.entries(catalog)
        session = key[2]
        return catalog.memo(key, lambda: [
            tool for tool in catalog.tools.values()
            if tool.id in entries and (tool.scope.runs_on_server or session) and caller.may_use(tool)
        ])

    def _key(self, caller: Caller, headers: Mapping[str, str], meta: Any) -> tuple[Any, ...]:
        return _visible_key(caller, _session(headers, meta),
                            searching.searched(self.gateway.settings.tool_search, caller))

    def _searching(self, catalog: Catalog, key: tuple[Any, ...], visible: list[Tool]) -> bool:
        """Whether the caller of ``key`` (who may use ``visible``) gets a search rather than the whole list: some of
        its tools, not pinned, are left to search (``searching.searched``), and it may use more than ``min_tools``."""
        searched = key[3]
        if not searched or len(visible) <= self.gateway.settings.tool_search.min_tools:
            return False
        # A catalog tool named like a meta-tool is searched only beside others: alone, it is listed as itself.
        return any(tool.id not in searching.META_TOOLS for tool in self._searched(catalog, key, visible))

    def _searched(self, catalog: Catalog, key: tuple[Any, ...], visible: list[Tool]) -> list[Tool]:
        """The tools of ``visible`` the caller of ``key`` finds by search: those its list leaves out."""
        pinned = self._pinned()
        return catalog.memo((*key, "searched"), lambda: [
            tool for tool in visible if not searching.listed_beside(tool, key[3], pinned)])

    def _pinned(self) -> frozenset[str]:
        return frozenset(self.gateway.settings.tool_search.always) - set(searching.META_TOOLS)

    def call_result(self, tool: Tool, result: ToolResult) -> dict[str, Any]:
        body: dict[str, Any] = {"content": result.blocks(), "isError": result.is_error, "resultType": "complete"}
        if result.structured:
            body["structuredContent"] = mcp_format.structured_content(tool, result.value)
        return body


def accepts_url_elicitation(capabilities: Any) -> bool:
    """Whether client ``capabilities`` (``ClientCapabilities``, or their JSON) declare URL-mode elicitation."""
    if isinstance(capabilities, Mapping):
        elicitation = capabilities.get("elicitation")
        return isinstance(elicitation, Mapping) and isinstance(elicitation.get("url"), Mapping)
    elicitation = getattr(capabilities, "elicitation", None)
    return elicitation is not None and getattr(elicitation, "url", None) is not None


def _entries(catalog: Catalog) -> dict[str, dict[str, Any]]:
    entries = {}
    for tool in catalog.tools.values():
        rendered = render_tools([tool], "mcp")  # memoised on the tool: a reload re-renders only what changed
        for diagnostic in rendered.diagnostics:
            log.warning("%s", diagnostic)
        if rendered.tools:
            entries[tool.id] = rendered.tools[0]
    return entries


def _visible_key(caller: Caller, session: str | None, searched: bool | ToolSearch = False) -> tuple[Any, ...]:
    """What of a caller decides which tools it sees (what ``may_use`` reads, whether it names a session) and how
    they are listed (what of them it leaves to search: ``searching.searched``)."""
    return "mcp:visible", caller.reach, bool(session), searched


def _session(headers: Mapping[str, str], meta: Any) -> str | None:
    """The browser bridge session a request names: ``_meta["gateway/session"]``, else ``X-Gateway-Session``."""
    return _meta_text(meta, SESSION_META) or headers.get("x-gateway-session")


def _meta_text(meta: Any, key: str) -> str | None:
    """A gateway ``_meta`` entry, which must be a string when present (else INVALID_PARAMS naming it)."""
    value = (meta or {}).get(key)
    if value is not None and not isinstance(value, str):
        raise ProtocolError(INVALID_PARAMS, f'_meta["{key}"] must be a string, not {type(value).__name__}.')
    return value


def _context(headers: Mapping[str, str], caller: Caller, request_id: Any, meta: Any,
             client: ClientChannel) -> CallContext:
    session = _session(headers, meta)
    return CallContext(
        conversation_id=_meta_text(meta, CONVERSATION_META) or headers.get("x-conversation-id"),
        user=caller.user(headers.get("x-user")),
        tool_call_id=str(request_id) if request_id is not None else None,
        session=session,
        side="client" if session else "server",  # a named page runs scope-all tools
        surface="mcp",
        **caller.who(),
        traceparent=_meta_text(meta, TRACEPARENT_META) or headers.get("traceparent"),
        client=client,
    )


def _offset(cursor: str | None, total: int) -> int:
    """Where a page starts. A catalog that shrank between pages ends the listing; list_changed follows."""
    if cursor is None:
        return 0
    # ASCII digits, and few: str.isdigit takes '²', and int() refuses 4,300 digits or more (an internal error).
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 12:
        raise ProtocolError(INVALID_PARAMS, f"Invalid cursor {cursor[:40]!r}: list the tools again from the start.")
    return min(int(cursor), total)
