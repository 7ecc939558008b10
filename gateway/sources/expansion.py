"""The contract between the ``sources:`` framework and each source kind (``openapi``, ``mcp``).

A kind is a module named in ``SOURCE_KINDS`` (imported on first use) that exposes::

    def expand(declaration: SourceDeclaration, env: SourceEnv) -> Expansion

``declaration`` is the ``sources:`` entry as written (``declaration.settings`` is the kind's own mapping, e.g.
``raw["openapi"]``; ``declaration.problem(path, message)`` locates a problem at ``sources[i].<path>``).
``expand`` runs in the catalog's build thread (never on the event loop), once per build; it returns every tool
the upstream offers, as the upstream names them (``UpstreamTool``), and the framework
(``gateway.sources.select``, by ``gateway.sources.rules``) does the rest, the same for every kind:
``include``/``exclude``, ``prefix``, per-tool overrides, hidden arguments, default toolsets/tags/timeout, id
checks with suggested fixes, then the tools join the catalog like hand-written ones (same checks, call path,
filters, auth, metrics, audit).

What a kind must do:

- Be quick or bounded: the framework waits ``env.deadline`` (``time.monotonic()``) at most for it, then uses the
  last expansion this process had for the same declaration, marked stale; a kind that fetches over the network
  bounds its own timeouts by ``env.remaining()`` too.
- Cache what is unchanged: return the *same* ``tools`` tuple (the same object; the status may be new) when nothing
  changed since the last call (the framework then reuses the generated definitions, and the build reuses the built
  tools), e.g. keyed by the declaration and the digest of the document read.
- Never raise for an upstream that is down: return the last known tools (``gateway.sources.cache`` keeps them
  on disk across restarts) with ``status["stale"] = True`` and ``status["error"]`` saying why, or no tools and a
  problem. An exception from ``expand`` is reported as a problem of the source (the build goes on).
- Report problems of the declaration with ``declaration.problem`` and problems of an upstream document at its
  own file:line:col (or ``<url>#/json/pointer``); severity "warning" for what does not stop serving.

A kind that reaches outside the definitions directory (starts a process, opens a connection, fetches a URL) also
exposes::

    def unconnected(declaration: SourceDeclaration, env: SourceEnv) -> tuple[Problem, ...] | None

for a build that may not connect (``env.connect`` false: the console's check of a draft, which any admin key — or,
with auth off, a page on the machine — may send): the problems of the declaration found without connecting, or
None when this declaration reaches nothing outside (``expand`` then runs as usual, e.g. an OpenAPI ``spec`` file).

A kind may also expose::

    def late(declaration: SourceDeclaration, expansion: Expansion, env: SourceEnv) -> None

called (in the expanding thread) with an expansion that came after the build stopped waiting for it: that build
served the source stale or without tools, and whatever the kind noted of what it read was served by no build (the
``mcp`` kind forgets the listing it holds as the last build's, so that a later build lists the upstream again).

``UpstreamTool.binding`` is the ``binding:`` mapping a YAML author would write for the tool: the framework checks
and builds it with the ordinary binding kinds (``{"http": {...}}`` for openapi; ``{"mcp": {"source": id,
"tool": name}}`` for mcp, built by ``gateway.bindings.mcp``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Problem

if TYPE_CHECKING:
    from ..definitions.yamlbudget import YamlLimits
    from ..settings import Settings

# kind (the key of a `sources:` entry) -> module holding its expand(); imported on first use.
SOURCE_KINDS = {"openapi": "gateway.sources.openapi", "mcp": "gateway.sources.mcp"}


@dataclass(frozen=True)
class UpstreamTool:
    """One tool an upstream offers, under the upstream's own name."""

    name: str  # the operationId / MCP tool name: what include, exclude, tools and hidden name
    title: str  # shown to people (the definition's `name`); "" → the upstream name
    description: str  # sent to the LLM; "" → the title
    input_schema: Mapping[str, Any]
    binding: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, bool] = field(default_factory=dict)  # read_only, destructive, idempotent, open_world
    summary: str = ""  # one line for people (the definition's user_description); "" → the description's first line


@dataclass(frozen=True, eq=False)
class Expansion:
    """What a kind found upstream: its tools, the problems met, and the status ``/status`` shows.

    ``status`` keys the framework reads (a kind may add its own): ``health`` ("ok", "stale", "down"),
    ``stale`` (bool: the tools are the last known ones, not fresh), ``error`` (str: why not fresh),
    ``last_refresh`` (epoch seconds the tools were last read from the upstream).
    """

    tools: tuple[UpstreamTool, ...] = ()
    problems: tuple[Problem, ...] = ()
    status: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class SourceEnv:
    """What a kind may use while expanding."""

    settings: Settings
    root: Path  # the definitions directory: a spec file is read inside it only
    limits: YamlLimits  # what one document may cost to parse (the definitions files' limits)
    wait_s: float  # how long the build waits for the sources
    deadline: float  # time.monotonic() by which expand should have returned (the build's start + wait_s)
    gateway: Any = None  # the running gateway (None under the CLI): e.g. to ask for a rebuild on list_changed
    events: Any = None  # the gateway's event stream (gateway.events.EventBus), or None
    # False for a draft check: no process is started and nothing is fetched (see ``unconnected`` above).
    connect: bool = True

    def remaining(self) -> float:
        """Seconds left before the deadline (at least a little, so a timeout computed from it is valid)."""
        return max(self.deadline - time.monotonic(), 0.01)
