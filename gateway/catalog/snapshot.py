"""The Catalog: an immutable snapshot of every tool, ready to serve.

``gateway.catalog.build`` makes one; the serving surfaces, ``invoke``, the formats and the loop only read it.
So this module holds the types and what they answer, and imports nothing of the build (bindings, sources,
filters): what the build puts in a catalog from there is named by what its readers use of it (``Chains``,
``ServedPlugin``). Nothing is served from a half-built catalog; a reload builds a new one beside the old and
swaps one reference.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import Problem, UnknownTool
from ..events import NULL_BUS, EventBus
from ..state import SharedState
from ..state.memory import MemoryState

if TYPE_CHECKING:
    from pathlib import Path

    from jsonschema import Draft202012Validator

    from ..context import Executor
    from ..definitions.model import Scope, ToolDefinition
    from ..schema.fastcheck import Check
    from ..settings import Settings


@dataclass(frozen=True, eq=False, slots=True)
class Tool:
    definition: ToolDefinition
    input_schema: Mapping[str, Any]
    validator: Draft202012Validator
    output_validator: Draft202012Validator | None
    # "server" and/or "client" executors, by where the tool may run.
    executors: Mapping[str, Executor]
    # Says True, fast, for arguments that plainly match a simple input schema (gateway.schema.fastcheck).
    fast_check: Check | None = None
    script: Path | None = None
    # The output schema the binding derived (a Python function's return annotation) when the YAML gives none.
    derived_output_schema: Mapping[str, Any] | None = None
    # How the LLM learns the output schema: the tool's return_schema, else the settings' (description|result|none).
    return_schema: str = "none"
    # Whether a call may talk to its client while it runs (``Bound.talks``): MCP answers it as SSE.
    talks: bool = False
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        """The schema results are checked against: declared in YAML, else derived by the binding, else None."""
        declared = self.definition.output_schema
        return declared if declared is not None else self.derived_output_schema

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """A value computed once per tool. A reload reuses the Tool objects of unchanged definitions
        (``BuildCache``), so per-tool renderings memoised here survive into the next catalog."""
        try:
            return self._memo[key]
        except KeyError:
            return self._memo.setdefault(key, compute())  # a race computes twice, and keeps one

    @property
    def scope(self) -> Scope:
        return self.definition.scope

    def describe(self) -> dict[str, Any]:
        """The gateway's own listing entry (GET /tools); computed once and shared, so never modify it."""
        return self.memo("describe", self._describe)

    def _describe(self) -> dict[str, Any]:
        d = self.definition
        entry: dict[str, Any] = {
            "id": d.id,
            "name": d.name,
            "user_description": d.user_description,
            "ai_description": d.ai_description,
            "scope": d.scope.value,
            "input_schema": self.input_schema,
        }
        if self.output_schema is not None:
            entry["output_schema"] = self.output_schema
        entry["tags"] = list(d.tags)
        entry["toolsets"] = list(d.toolsets)
        entry["annotations"] = dict(d.annotations)
        if d.return_direct:
            entry["return_direct"] = True
        return entry


class Chains(Protocol):
    """What a catalog keeps of its filters (``gateway.filters.chains.FilterChains``) and ``invoke`` runs."""

    def of(self, tool_id: str) -> tuple[Any, ...]:
        """The tool's filters (``gateway.filters.call.Filter``), outermost first."""
        ...


class _NoFilters:
    """The filters of a catalog made by hand without any (a build always passes its own): none for any tool."""

    def of(self, tool_id: str) -> tuple[Any, ...]:
        return ()


class ServedPlugin(Protocol):
    """What /status and the admin API read of a plugin a catalog serves tools of (``gateway.sources.plugins``)."""

    @property
    def name(self) -> str: ...

    @property
    def distribution(self) -> str: ...

    @property
    def version(self) -> str: ...


@dataclass(frozen=True)
class Content:
    # By served name: a gateway.catalog.prompts.Prompt or a gateway.sources.mcp_content.UpstreamPrompt (one interface:
    # entry, toolsets, answer, completions).
    prompts: Mapping[str, Any] = field(default_factory=dict)
    # By uri (a template's as written): a gateway.catalog.resources.Resource or an UpstreamResource (entry, toolsets,
    # template, digest, subscribable, read, completions).
    resources: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()  # errors: the build fails
    warnings: tuple[Problem, ...] = ()
    digest: str = ""

    def resource_for(self, uri: str) -> tuple[Any, dict[str, str]] | None:
        """The resource a read of ``uri`` reads, with the values of its template's variables."""
        resource = self.resources.get(uri)
        if resource is not None and resource.template is None:
            return resource, {}
        for resource in self.resources.values():
            variables = resource.template.match(uri) if resource.template else None
            if variables is not None:
                return resource, variables
        return None


EMPTY = Content()


@dataclass(frozen=True, eq=False)
class Catalog:
    tools: Mapping[str, Tool]
    version: str
    root: Path
    settings: Settings
    warnings: tuple[Problem, ...] = ()
    filters: Chains = field(default_factory=_NoFilters)  # every tool's, outermost first
    plugins: tuple[ServedPlugin, ...] = ()  # the plugins it serves tools of
    events: EventBus = NULL_BUS  # where calls on this catalog are told (gateway.events)
    # Each `sources:` entry as /status shows it: id, kind, file, tools, health, stale, error, last_refresh.
    sources: tuple[Mapping[str, Any], ...] = ()
    state: SharedState = field(default_factory=MemoryState)  # where its rate limits are counted (gateway.state)
    # Its tools file by file (gateway.catalog.per_file.FileBuild), when it was built so: comparing catalogs costs
    # what changed. Only the build reads them.
    parts: tuple[Any, ...] = ()
    content: Content = EMPTY  # its prompts and resources (built by gateway.catalog.prompts_resources)
    # The tools the lock file holds (gateway.catalog.held): {tool, change, served: as_locked | no, locked, now}.
    held: tuple[Mapping[str, Any], ...] = ()
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    # One lock per key, so that a value computed in a worker thread (a listing of 10,000 tools: tens of ms) never
    # holds up the event loop asking for another; re-entrant: a value may be built from other memoised values.
    _memo_locks: dict[Any, threading.RLock] = field(default_factory=dict, repr=False)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # guards _memo_locks only

    def get(self, tool_id: str) -> Tool:
        tool = self.tools.get(tool_id)
        if tool is None:
            raise UnknownTool(tool_id, difflib.get_close_matches(tool_id, self.tools, n=3, cutoff=0.6))
        return tool

    def select(self, *, toolsets: Iterable[str] = (), tags: Iterable[str] = (), side: str | None = None,
               ids: Iterable[str] | None = None) -> list[Tool]:
        """Tools in any of ``toolsets``, with any of ``tags``, runnable on ``side`` ("server"/"client")."""
        toolsets, tags = set(toolsets), set(tags)
        wanted = set(ids) if ids is not None else None
        return [
            tool for tool in self.tools.values()
            if (not toolsets or toolsets & set(tool.definition.toolsets))
            and (not tags or tags & set(tool.definition.tags))
            and (side is None or side in tool.executors)
            and (wanted is None or tool.id in wanted)
        ]

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """A value computed once per catalog (listings per format): a catalog never changes, so neither do they."""
        try:
            return self._memo[key]
        except KeyError:
            pass
        with self._memo_lock:
            lock = self._memo_locks.setdefault(key, threading.RLock())
        with lock:
            if key not in self._memo:
                try:
                    self._memo[key] = compute()
                finally:  # asked again, the value is found without a lock; a failure is computed afresh
                    with self._memo_lock:
                        self._memo_locks.pop(key, None)
            return self._memo[key]

    def memoised(self, key: Any) -> Any:
        """The value ``memo`` computed for ``key``, or None when none was yet (never computes)."""
        return self._memo.get(key)


def plugin_of(tool: Tool, catalog: Catalog) -> str | None:
    """The plugin that declares ``tool`` (its files are named ``<plugin>:<path>``), or None: the directory."""
    if not catalog.plugins:
        return None
    file = tool.definition.file
    return next((p.name for p in catalog.plugins if file.startswith(f"{p.name}:")), None)
