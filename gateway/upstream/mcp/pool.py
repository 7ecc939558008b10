"""Pooled client sessions to upstream MCP servers, one per connection config, for the life of the gateway.

The ``Gateway`` owns one ``McpPool``; catalogs come and go, sessions stay: a reload whose sources did not change
reuses every session, a changed ``mcp:`` mapping (``UpstreamConfig``) is a new session, and a session no built
tool holds any more (its tools' executors were collected with their catalog) is closed. Each session is a
``gateway.upstream.mcp.connection.Connection`` (its task, reconnects, change notices).

Every gateway has a pool, most never use it: the SDK's client side (``connection`` and what it imports) is
imported when a build first asks for a connection, that is when a definitions directory declares an ``mcp:``
source; until then the pool is an empty table.

Before the pool is started on a loop (the first build, which runs before the server's loop does), a build's
listing is made through a session of the build thread's own (``gateway.upstream.mcp.listing.list_once``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mcp_types

    from ..oauth.clients import OAuthClients
    from .config import UpstreamConfig
    from .connection import Connection
    from .people import People, PersonSession

log = logging.getLogger("gateway.mcp_pool")

CLOSE_GRACE_S = 5.0  # an unused session is closed this long after its last holder let go
CHANGE_INTERVAL_S = 2.0  # one upstream asks for a rebuild at most this often: a flood of list_changed is one


class McpPool:
    """The gateway's sessions to upstream MCP servers, by ``UpstreamConfig``."""

    change_interval_s = CHANGE_INTERVAL_S

    def __init__(self) -> None:
        self._connections: dict[UpstreamConfig, Connection] = {}
        self.lock = threading.Lock()  # the table and every connection's holders (builds hold from their threads)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_change: Callable[[], None] | None = None
        self._oauth: OAuthClients | None = None
        self._people: People | None = None
        self._closed = False  # aclose ran: no person's session is opened any more

    @property
    def oauth(self) -> OAuthClients:
        """The OAuth clients of the upstreams that demand OAuth (imported on first need, as the connections)."""
        if self._oauth is None:
            from ..oauth.clients import OAuthClients

            self._oauth = OAuthClients()
        return self._oauth

    def bind(self) -> asyncio.AbstractEventLoop:
        """The loop sessions live on: the first one the pool is used from (the gateway's)."""
        if self._loop is None or self._loop.is_closed():
            self._loop, self._closed = asyncio.get_running_loop(), False  # a new run of the gateway's server
        return self._loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop sessions live on, once bound (None before: a build then uses a session of its own)."""
        return self._loop

    def start(self, on_change: Callable[[], None]) -> None:
        """On the gateway's loop: tell ``on_change`` when an upstream's tools change, and connect every upstream
        a built tool holds (to hear of changes before the first call)."""
        self.bind()
        self.on_change = on_change
        for connection in self.connections():
            if connection.holders:
                connection.start()

    def connection(self, config: UpstreamConfig) -> Connection:
        # Imported here, on first need: it imports the SDK's client side (see the module's docstring).
        from .connection import Connection

        with self.lock:
            found = self._connections.get(config)
            if found is None or found.state == "closed":
                found = self._connections[config] = Connection(self, config)
            return found

    def person(self, config: UpstreamConfig, person: Hashable, authorization: str) -> PersonSession:
        """On the pool's loop: ``person``'s own session to ``config``'s upstream (``person_auth``), sending
        ``authorization`` (``gateway.upstream.mcp.people``); ``UpstreamUnavailable`` once the pool closed, or
        from another loop (a session lives on the loop its pool serves)."""
        from .client import UpstreamUnavailable

        if asyncio.get_running_loop() is not self.bind():
            raise UpstreamUnavailable(f"{config.label}: a person's session is made on the gateway's own loop")
        if self._closed:
            raise UpstreamUnavailable(f"{config.label} is not connected: the gateway is closing")
        if self._people is None:
            from .people import People

            self._people = People(self)
        return self._people.session(config, person, authorization)

    def connections(self) -> list[Connection]:
        with self.lock:
            return list(self._connections.values())

    def changed(self, connection: Connection) -> None:
        if self.on_change is not None and self._connections.get(connection.config) is connection:
            self.on_change()

    def list_tools_blocking(self, config: UpstreamConfig, timeout: float) -> list[mcp_types.Tool]:
        """The upstream's tools, from a thread that is not the loop's (a build): through the pooled session when
        the pool runs on a loop, else through a session of this thread's own; ``UpstreamUnavailable`` if not
        within ``timeout``."""
        return self.connection(config).list_blocking(self._loop, timeout)

    def authorized(self, source: str) -> None:
        """On the pool's loop: the gateway was just authorized with the OAuth server of ``source``'s upstream;
        a session refused for want of it connects again now."""
        for connection in self.connections():
            if connection.config.source == source:
                connection.retry()

    def released(self, connection: Connection) -> None:
        """A holder was collected (any thread): close the session soon if no one holds it by then."""
        with self.lock:
            connection.holders -= 1
            unused = connection.holders <= 0
        loop = self._loop
        if unused and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: aclose ran or never will
                loop.call_soon_threadsafe(loop.call_later, CLOSE_GRACE_S, self._close_if_unused, connection)

    def _close_if_unused(self, connection: Connection) -> None:
        with self.lock:
            if connection.holders > 0 or self._connections.get(connection.config) is not connection:
                return
            del self._connections[connection.config]
        log.info("%s is not used any more: closing its session", connection.config.label)
        asyncio.ensure_future(connection.aclose())

    async def aclose(self) -> None:
        """Close every session (stdio servers are stopped), for the gateway's shutdown."""
        with self.lock:
            connections, self._connections = list(self._connections.values()), {}
        people, self._people, self._closed = self._people, None, True
        await asyncio.gather(*(c.aclose() for c in connections), *([people.aclose()] if people else []),
                             return_exceptions=True)


