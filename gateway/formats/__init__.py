"""Tool declarations in each provider's format: ``render(catalog, fmt)``.

Formats: ``openai`` and ``openai-strict`` (Chat Completions function tools), ``openai-responses`` (the Responses
API's function tools), ``anthropic`` (Messages API tools), ``gemini`` (FunctionDeclaration) and ``mcp`` (MCP Tool).
Each adapts the tool's JSON Schema to what the target accepts (adapt.py, refs.py, strict.py); a tool whose schema
cannot be adapted is left out of that format with a diagnostic naming the tool, where (file:line:col) and why — the
rest of the list is unaffected. ``deferred`` gives a listing for a provider's own tool search (``SEARCHES``:
Anthropic's, the Responses API's).

Renderings are memoised: the whole list per format on the catalog (a catalog never changes), and each tool's
declaration on the tool (a reload reuses unchanged tools, so they are not rendered again), so offering a subset
of tools (the chat loop) costs a lookup once warm. Treat the returned lists and dicts as read-only: they are
shared.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..catalog.snapshot import Catalog, Tool
from ..errors import BadRequest
from . import anthropic, gemini, mcp, openai
from .errors import Unadaptable
from .strict import restore_arguments

__all__ = ["FORMATS", "SEARCHES", "Rendered", "Unadaptable", "deferred", "known", "render", "render_tool",
           "render_tools", "restore_arguments"]

log = logging.getLogger("gateway.formats")

FORMATS: Mapping[str, Callable[[Tool], dict[str, Any]]] = {
    "openai": openai.render,
    "openai-strict": openai.render_strict,
    "openai-responses": openai.render_responses,
    "anthropic": anthropic.render,
    "gemini": gemini.render,
    "mcp": mcp.render,
}

# A provider's own tool search, by format: its search tool by the variant a caller asks for (``defer_loading=``).
SEARCHES: Mapping[str, Mapping[str, Mapping[str, Any]]] = {
    "anthropic": anthropic.SEARCH_TOOLS,
    "openai-responses": openai.SEARCH_TOOLS,
}


@dataclass(frozen=True)
class Rendered:
    """Declarations in one format, and why any tool was left out of it."""

    tools: list[dict[str, Any]]
    diagnostics: list[str]


def render(catalog: Catalog, fmt: str) -> Rendered:
    """Every tool of ``catalog`` in format ``fmt`` (``BadRequest`` for an unknown format)."""
    _renderer(fmt)
    return catalog.memo(("format", fmt), lambda: render_tools(catalog.tools.values(), fmt))


def render_tools(tools: Iterable[Tool], fmt: str) -> Rendered:
    """``tools`` in format ``fmt``, in order (each tool's rendering is memoised on the tool)."""
    declarations: list[dict[str, Any]] = []
    diagnostics: list[str] = []
    for tool in tools:
        one = tool.memo(("format", fmt), lambda tool=tool: render_tool(tool, fmt))
        declarations += one.tools
        diagnostics += one.diagnostics
    return Rendered(declarations, diagnostics)


def render_tool(tool: Tool, fmt: str) -> Rendered:
    """One tool in format ``fmt``: ``tools`` holds its declaration, or is empty and ``diagnostics`` says why."""
    renderer = _renderer(fmt)
    try:
        return Rendered([renderer(tool)], [])
    except Unadaptable as exc:
        return Rendered([], [_diagnostic(tool, fmt, exc.path, exc.reason)])
    except Exception as exc:  # a schema this module mishandles must not take the whole listing down
        log.exception("rendering tool %r as %s failed", tool.id, fmt)
        return Rendered([], [_diagnostic(tool, fmt, (), f"internal error: {type(exc).__name__}: {exc}")])


def known(fmt: str | None) -> str | None:
    """``fmt`` when it names a format (None stays None), else ``BadRequest`` saying which do."""
    if fmt is not None:
        _renderer(fmt)
    return fmt


def _renderer(fmt: str) -> Callable[[Tool], dict[str, Any]]:
    try:
        return FORMATS[fmt]
    except KeyError:  # quoted cut short: a caller's value may be as long as its request
        raise BadRequest(f"unknown format {fmt[:40]!r}; use one of: {', '.join(FORMATS)}") from None


def _diagnostic(tool: Tool, fmt: str, path: tuple[str | int, ...], reason: str) -> str:
    where = "input_schema" + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)
    located = tool.definition.problem(["input_schema", *path], f"tool '{tool.id}' left out of the {fmt} format: "
                                      f"{reason} (at {where})")
    return str(located)


def deferred(fmt: str, variant: str, declarations: list[dict[str, Any]], pinned: frozenset[str]
             ) -> list[dict[str, Any]]:
    """``declarations`` (format ``fmt``) for that provider's tool search ``variant`` (one of ``SEARCHES[fmt]``):
    its search tool first, then each tool marked ``defer_loading`` unless pinned (a provider refuses a request
    whose every tool is deferred, so the search tool never is); when every one is pinned, the declarations alone:
    a search tool with nothing to find would only cost the model a turn."""
    if all(declaration["name"] in pinned for declaration in declarations):
        return declarations
    return [copy.deepcopy(dict(SEARCHES[fmt][variant])),
            *(declaration if declaration["name"] in pinned else {**declaration, "defer_loading": True}
              for declaration in declarations)]
