"""Bindings: how a tool is executed. One module per kind, named like its YAML key.

Each module exposes ``build(definition, env) -> Bound``. Building happens once per catalog, so everything that
can be checked or compiled (imports, templates, scripts) is done there and reported as ``BindingProblems``;
the executor it returns then does no checking. Adding a kind is one module and one line in ``BINDINGS``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Problem
from ..events import NULL_BUS, EventBus
from ..state import SharedState
from ..state.memory import MemoryState

if TYPE_CHECKING:
    import httpx

    from ..context import Executor
    from ..definitions.model import ToolDefinition
    from ..settings import Settings


class BindingProblems(Exception):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


@dataclass
class BuildEnv:
    """What bindings may use while being built and when executing: settings and the gateway's shared parts."""

    settings: Settings
    root: Path
    # The running gateway's pooled HTTP client; a function so that a catalog built by the CLI needs none.
    http_client: Callable[[], httpx.AsyncClient] | None = None
    # Live browser sessions (gateway.bridge); None where no server runs.
    bridge: Any = None
    # The running gateway's event stream: calls made through the catalog and upstream requests are told to it.
    events: EventBus = NULL_BUS
    # The running gateway's pooled upstream MCP sessions (gateway.upstream.mcp.pool.McpPool); None: one-shot sessions.
    mcp_pool: Any = None
    # Each person's own upstream connections (gateway.upstream.connections.Connections), made on first use; None
    # where no server runs (the CLI's builds): such a tool is checked, and calls of it need the server.
    connections: Callable[[], Any] | None = None
    # What replicas share (gateway.state): the running gateway's; a catalog built without one counts its rate
    # limits in memory of its own.
    state: SharedState = field(default_factory=MemoryState)
    warnings: list[Problem] = field(default_factory=list)
    # Values a binding kind computes once per build rather than once per tool.
    memo: dict[Any, Any] = field(default_factory=dict)
    # Digest of <definitions>/python/*.py for this build, set by build_catalog before any tool is built.
    python_digest: str = ""
    # A plugin's tools are built with an env of their own: root is the plugin's directory, its Python code is
    # trusted inside ``package`` (never <definitions>/python/), and its python/ modules are <modules>.python.<name>.
    package: str = ""
    modules: str = ""
    # False for a draft check (gateway.drafts): its `sources:` start no process and fetch nothing.
    connect_sources: bool = True


# BuildEnv.memo: the people's connections a build's HTTP bindings declared (gateway.bindings.httpauth), told to the
# gateway once the build succeeds.
DECLARED_CONNECTIONS = "connections declared"


@dataclass(frozen=True)
class Bound:
    executor: Executor
    # A schema the binding derived (a Python function's signature); None when the definition gives one.
    input_schema: Mapping[str, Any] | None = None
    # The schema of its results the binding derived (a Python function's return annotation), likewise.
    output_schema: Mapping[str, Any] | None = None
    # Files the binding depends on (a browser script), part of the catalog's version.
    files: tuple[Path, ...] = ()
    # Whether a call may talk to its client while it runs (gateway.client_channel): MCP answers it as SSE.
    talks: bool = False


# kind (the YAML key) -> module holding its build(); imported on first use.
BINDINGS = {"python": "python", "http": "http", "browser": "browser", "mcp": "mcp"}


@functools.cache  # asked once per tool: 10,000 trips through the import system cost 7% of a warm start
def builder(kind: str) -> Callable[[ToolDefinition, BuildEnv], Bound]:
    return import_module(f"{__name__}.{BINDINGS[kind]}").build
