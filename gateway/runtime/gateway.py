"""The running gateway: the services every call shares, and the catalog they serve now.

One ``Gateway`` per process: settings, the event bus and its observers, the shared state, the pooled HTTP client,
the upstream MCP sessions, the browser bridge and the replica registry (these two set by the server while it runs).
It makes each catalog build from those services; when builds run, in which thread, and how the result replaces
the catalog served is the rebuild engine's (``gateway.runtime.rebuild``), which it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import secrets as secret_store
from ..bindings import DECLARED_CONNECTIONS, BuildEnv
from ..catalog.build import build_catalog
from ..catalog.held import hold
from ..catalog.snapshot import Catalog
from ..events import EventBus, Observer
from ..search import Searches
from ..settings import Settings, SettingsInvalid
from ..sources import load_all
from ..state import SharedState, open_state
from ..upstream.mcp.pool import McpPool
from .rebuild import Listener, Rebuilder, ReloadOutcome

if TYPE_CHECKING:
    import httpx

    from ..identity.tokens import Verifier
    from ..upstream.connections import Connections
    from .bridge_cluster import ClusterBridge
    from .cluster import Replicas


def _shared_state(settings: Settings) -> SharedState:
    """The store ``settings.cluster`` names; cluster mode without its extra is a settings error that says what to
    install (the ``redis`` package is optional, and a bare ModuleNotFoundError left operators a traceback)."""
    try:
        return open_state(settings.cluster.get("redis_url"), prefix=settings.cluster.get("prefix", "tool-gateway:"))
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "redis":  # a broken module of our own stays the bug it is
            raise
        raise SettingsInvalid("setting 'cluster.redis_url': cluster mode needs the redis package, which is "
                              "missing; install it with: pip install 'tool-gateway[cluster]'") from None


def _secret(settings: Settings, name: str) -> str:
    """A secret the settings name (introspection's client secret), under the rule every secret follows."""
    refused = secret_store.refusal(name, settings)
    if refused is not None:
        raise LookupError(refused)
    return secret_store.resolve([name])[name]


def _connection_of(binding: Any) -> str | None:
    """The person's connection an HTTP binding declares (``auth: {authorization_code: {connection}}``), if any."""
    http = binding.get("http") if isinstance(binding, Mapping) else None
    auth = http.get("auth") if isinstance(http, Mapping) else None
    grant = auth.get("authorization_code") if isinstance(auth, Mapping) else None
    return grant.get("connection") if isinstance(grant, Mapping) else None


class Gateway:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.bridge: ClusterBridge | None = None  # set by the server that serves browser tools (server.client)
        self.events = EventBus()  # calls, reloads and admin actions, told to metrics, audit, traces (gateway.events)
        self.observers: dict[str, Observer] = {}  # its consumers by name (gateway.observe.attach)
        # What replicas share (gateway.state): Redis in cluster mode, else this process's memory.
        self.state: SharedState = _shared_state(settings)
        self.replicas: Replicas | None = None  # while the server runs (gateway.runtime.cluster.replicating)
        self._http: httpx.AsyncClient | None = None
        # Sessions to upstream MCP servers (sources: mcp), kept across catalogs; the reload service starts it.
        self.mcp_pool = McpPool()
        # Checks OAuth access tokens (gateway.identity) and keeps the issuer's keys and the tokens it has checked.
        self.identity: Verifier | None = None
        self._connections: Connections | None = None
        if settings.oauth is not None:
            from ..identity.tokens import Verifier  # jwt and its cryptography: only where tokens are accepted

            self.identity = Verifier(settings.oauth, secret=lambda name: _secret(settings, name))
        # Builds run in threads of their own and read the caches the engine hands them: it must exist before the
        # first build starts.
        self.rebuilder = Rebuilder(settings.definitions, self._build, self.events)
        self.rebuilder.first_build(settings)
        # Tool search on every surface; once used, each new catalog's index is made as soon as it is swapped in.
        self.searches = Searches(settings.tool_search.dense)
        self.on_change(self.searches.swapped)

    @property
    def catalog(self) -> Catalog:
        """The catalog served now: a surface reads it once per request and keeps that snapshot to the end."""
        return self.rebuilder.catalog

    @property
    def last_reload(self) -> ReloadOutcome:
        return self.rebuilder.last_reload

    def http_client(self) -> httpx.AsyncClient:
        """The pooled client every HTTP-bound tool shares; created on first use, closed by ``aclose``."""
        if self._http is None:
            import httpx  # a catalog without an http binding never asks: ~30 ms of a start spared

            from ..upstream.http import new_client

            # new_client: no redirects of its own (the binding checks each hop) and no cookie jar shared by users.
            self._http = new_client(
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
                timeout=httpx.Timeout(self.settings.default_timeout_s),
            )
        return self._http

    def connections(self) -> Connections:
        """Each person's own connections to upstreams (``gateway.upstream.connections``): made on first use, as
        only a catalog that declares one needs its crypto and HTTP code."""
        if self._connections is None:
            from ..sources.cache import state_dir
            from ..upstream.connections import Connections

            connections = self._connections = Connections(
                self.state, self.settings.upstream_oauth_key_secret, state_dir,
                clustered=bool(self.settings.cluster.get("redis_url")))

            async def retain(catalog: Catalog) -> None:  # a connection no tool declares any more is not offered
                connections.retain({_connection_of(tool.definition.binding) for tool in catalog.tools.values()})

            self.on_change(retain)
        return self._connections

    def _build(self) -> Catalog:
        """Load and build from disk, in a build thread, with the caches the engine handed that build."""
        loaded, built = self.rebuilder.handed()
        env = BuildEnv(settings=self.settings, root=self.settings.definitions, http_client=self.http_client,
                       bridge=self, events=self.events, state=self.state, mcp_pool=self.mcp_pool,
                       connections=self.connections)
        definitions, plugins = load_all(self.settings, loaded)
        # Held to the lock file, if there is one: what changed upstream since the admin trusted it is not served as
        # it is now (gateway.catalog.held). Here, not in build_catalog: the CLI's lock and validate read it unheld.
        catalog = hold(build_catalog(definitions, self.settings, env, built, plugins), definitions.sources, built.lock)
        for source in env.memo.get(DECLARED_CONNECTIONS, ()):  # only now: a build that failed changes no connection
            self.connections().declare(source)
        return catalog

    def on_change(self, listener: Listener) -> None:
        """``listener`` hears of each catalog a reload swaps in (gateway.runtime.rebuild)."""
        self.rebuilder.on_change(listener)

    async def reload(self) -> ReloadOutcome:
        """Rebuild from disk under the settings of now; swap only on success and only if the content changed."""
        return await self.rebuilder.reload(self.settings)

    async def execute(self, session: str, tool_id: str, arguments: dict[str, Any], context: Any) -> Any:
        """Browser bindings call this; the live bridge does the work once the server has attached one."""
        from ..errors import ToolError

        if self.bridge is None:
            raise ToolError(f"Tool '{tool_id}' runs in the user's browser, and no browser bridge is running.")
        return await self.bridge.execute(session, tool_id, arguments, context)

    async def aclose(self) -> None:
        try:
            await self.rebuilder.aclose()  # parses not written yet
        finally:  # a write that failed never leaves stdio servers or connections behind
            await self.mcp_pool.aclose()  # stops the stdio servers it spawned
            await self.state.aclose()
            if self._http is not None:
                await self._http.aclose()
                self._http = None
