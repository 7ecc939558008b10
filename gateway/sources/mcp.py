"""``sources: [{id, mcp: {url | command, ...}}]`` — the tools of an upstream MCP server.

``expand`` lists the upstream's tools when the catalog is built (in the build's thread): through the gateway's
pooled session (``gateway.upstream.mcp.pool``) when the gateway runs, else through a session of its own, waiting
``connect_timeout_s`` at most (and never past the build's deadline). Each upstream tool becomes an
``UpstreamTool``: its name, ``title`` (the name people see), description, ``inputSchema``, ``outputSchema`` and
annotation hints (``readOnlyHint`` → ``read_only``, ...), called through ``{"mcp": {"source", "tool"}}``
(``gateway.bindings.mcp``).

A listing is read within the source's bounds (``ListingBounds``: ``source_max_tools`` tools in all,
``source_max_bytes`` per tools/list answer, ``source_max_depth`` of a tool's schemas; ``gateway.upstream.mcp.listing``
reads and parses it off the event loop). One
past them is refused as a whole, not cut to its first tools (which those are is the upstream's order, and would
change under the admin): the source serves its last listing within the bounds, stale, or none, and its status
and a warning name the setting to raise.

The listing read is kept on disk (``gateway.sources.cache``, by the upstream's URL or command line); when the
upstream is down at build time that copy is served, marked stale, and calls to its tools fail as error results
naming it until it is back — then the pool asks for a rebuild and the fresh tools are served.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types

from .. import secrets as secret_store
from ..definitions.model import SourceDeclaration
from ..errors import Problem
from ..upstream.mcp.client import ListingTooLarge, UpstreamUnavailable, counted, listing_digest, shaped
from ..upstream.mcp.config import UpstreamConfig, parse_config
from ..upstream.mcp.listing import list_once
from ..upstream.mcp.pool import McpPool
from . import cache
from .expansion import Expansion, SourceEnv, UpstreamTool

MAX_CACHED_BYTES = 16 * 1024 * 1024
# MCP's annotation hints -> the gateway's annotation keys.
HINTS = {"read_only_hint": "read_only", "destructive_hint": "destructive", "idempotent_hint": "idempotent",
         "open_world_hint": "open_world"}

# The last expansion per (declaration, listing): an unchanged listing gives the same object, so the framework
# reuses the definitions it generated and the build the tools it built.
_expansions: weakref.WeakKeyDictionary[SourceDeclaration, tuple[str, Expansion]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def unconnected(declaration: SourceDeclaration, env: SourceEnv) -> tuple[Problem, ...]:
    """Every MCP source starts a process or opens a connection: a draft check reads its declaration only."""
    _, problems = parse_config(declaration.id, declaration.settings, env.settings)
    return tuple(declaration.problem(["mcp", *path], message) for path, message in problems)


def expand(declaration: SourceDeclaration, env: SourceEnv) -> Expansion:
    config, problems = parse_config(declaration.id, declaration.settings, env.settings)
    if config is None:
        return Expansion(problems=tuple(declaration.problem(["mcp", *path], message) for path, message in problems))
    timeout = min(config.connect_timeout_s, env.remaining())
    pool: McpPool | None = getattr(env.gateway, "mcp_pool", None)
    base = {"transport": config.transport, "target": config.target}
    if pool is not None:
        if config.oauth is not None:  # where its tokens are kept, before the listing asks for one
            try:
                pool.oauth.use_store(cache.state_dir() / "oauth", env.settings.upstream_oauth_key_secret)
            except secret_store.SecretsMissing as exc:
                problem = declaration.problem(["mcp", "auth"], f"setting upstream_oauth_key_secret: {exc}")
                return Expansion(problems=(problem,))
        pool.connection(config).hold(declaration)  # connected while the file declares it, tools or not
    try:
        listed = pool.list_tools_blocking(config, timeout) if pool is not None else list_once(config, timeout)
    except ListingTooLarge as exc:  # refused, not cut to its first tools: which those are is the upstream's order
        return _last_known(declaration, config, str(exc), base, until="its listing is within the bound")
    except UpstreamUnavailable as exc:
        # The HTTP status it refused the gateway with: `validate` fails on refused credentials (401, 403).
        refused = {"http_status": exc.refusal.status} if exc.refusal is not None else {}
        if exc.refusal is not None and exc.refusal.authorize:  # OAuth: where an admin authorizes the gateway
            refused["authorize"] = exc.refusal.authorize
        return _last_known(declaration, config, str(exc), {**base, **refused})
    raw = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed]
    text = listing_digest(raw)
    # Tool by tool, as listing_digest: a build's one long json.dumps would hold the loop that serves the calls.
    kept = b",".join(json.dumps(tool).encode() for tool in raw)
    try:
        cache.save(cache.entry("mcp", config.identity, ".json"), b'{"at":%r,"tools":[%b]}' % (time.time(), kept))
    except OSError:  # a read-only state directory: served fresh all the same, only not kept for a restart
        pass
    now = time.time()
    status = {**base, "health": "ok", "stale": False, "error": None, "last_refresh": now}
    expansion = _remembered(declaration, text, lambda: Expansion(_tools(declaration, listed), status=status))
    expansion.status["last_refresh"] = now  # type: ignore[index]  # read now, even when it listed the same
    return expansion


def late(declaration: SourceDeclaration, expansion: Expansion, env: SourceEnv) -> None:
    """A listing that came after the build stopped waiting for it (a slow start on a busy host): the build served
    the source stale or without tools, while the pooled connection holds that listing as the one the last build
    read, and a session listing the same would never ask for the rebuild that serves it (its tools unknown for
    good while it is up). Fresh, it is forgotten (``Connection.unread``)."""
    pool: McpPool | None = getattr(env.gateway, "mcp_pool", None)
    config, _ = parse_config(declaration.id, declaration.settings, env.settings)
    if pool is None or config is None or expansion.status.get("health") != "ok":
        return
    for connection in pool.connections():
        if connection.config == config:
            connection.unread()


def _last_known(declaration: SourceDeclaration, config: UpstreamConfig, error: str,
                base: Mapping[str, Any], until: str = "it answers") -> Expansion:
    """The listing kept on disk, stale; none (and a warning) when there is no copy, or none within the bounds
    (they may have been lowered since it was kept)."""
    kept = cache.load(cache.entry("mcp", config.identity, ".json"), MAX_CACHED_BYTES)
    try:
        document = json.loads(kept) if kept is not None else None
        listed = [mcp_types.Tool.model_validate(raw) for raw in document["tools"]] if document else None
        if listed is not None:
            counted(config, len(listed))
            shaped(config, listed)
    except (ValueError, KeyError, TypeError, ListingTooLarge):  # not a copy this version wrote: as if there were none
        listed = None
    if listed is None:
        status = {**base, "health": "down", "stale": False, "error": error, "last_refresh": None}
        problem = declaration.problem(["mcp"], f"{error}; it serves no tools until {until}", key=True,
                                      severity="warning")
        return _remembered(declaration, f"down\0{error}", lambda: Expansion(problems=(problem,), status=status))
    status = {**base, "health": "stale", "stale": True, "error": error, "last_refresh": document.get("at")}
    return _remembered(declaration, f"stale\0{error}\0{kept.decode()}",
                       lambda: Expansion(_tools(declaration, listed), status=status))


def _remembered(declaration: SourceDeclaration, content: str, make: Callable[[], Expansion]) -> Expansion:
    """The expansion last made for ``declaration`` if it was made from the same ``content``, else a new one."""
    with _lock:
        found = _expansions.get(declaration)
        if found is None or found[0] != content:
            found = _expansions[declaration] = (content, make())
        return found[1]


def _tools(declaration: SourceDeclaration, listed: list[mcp_types.Tool]) -> tuple[UpstreamTool, ...]:
    return tuple(_tool(declaration.id, tool) for tool in listed)


def _tool(source: str, tool: mcp_types.Tool) -> UpstreamTool:
    hints = tool.annotations
    annotations = {ours: value for theirs, ours in HINTS.items()
                   if isinstance(value := getattr(hints, theirs, None), bool)} if hints is not None else {}
    title = tool.title or (hints.title if hints is not None and hints.title else "")
    return UpstreamTool(
        name=tool.name,
        title=title or "",
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations,
        binding={"mcp": {"source": source, "tool": tool.name}},
    )
