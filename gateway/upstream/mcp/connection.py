"""One upstream MCP server's session, held by a task of its own on the gateway's loop (``gateway.upstream.mcp.pool`` keeps
one ``Connection`` per ``UpstreamConfig``).

The task enters the official client (``mcp.Client``: streamable HTTP or a spawned stdio server, protocol
negotiated with ``mode="auto"``), serves until the connection ends, and leaves the client in that same task (the
SDK's task groups demand it). Calls are made from the callers' own tasks on the entered client. When the upstream
drops, the task reconnects with exponential backoff and jitter between the source's ``reconnect_floor_s`` and
``reconnect_cap_s`` (``UpstreamConfig.reconnect_delay``), reset once a session stays up the cap; a call meanwhile
fails at once, naming the upstream (or, when the last attempt is older than the floor, wakes the task and waits for
one attempt), so an upstream restarted mid-use heals by itself, and one that drops every session is asked at most
once per floor while called, once per cap while idle. A session the upstream no longer knows (it restarted: the
Python SDK's HTTP 404, the TypeScript SDK's 400) is reconnected and the call, which the upstream refused without
running it, is sent once more; so is a build's listing that meets its session closed or forgotten (a listing
changes nothing upstream). A call never meets a client a reconnect is closing: one given a session that closed
before it was sent is sent on the next one.

A ``tools/call`` to a streamable-HTTP upstream is posted by the gateway itself on the session's HTTP client
(``gateway.upstream.mcp.fastcall``), and so is a ``tools/list`` (``gateway.upstream.mcp.listing``: within the source's bounds,
parsed off the loop), beside the SDK's session, which keeps everything else (connecting, notifications, the GET
or listen stream, reconnects); a call's answer goes through the SDK's own result checks
(``gateway.upstream.mcp.client.finish_call``).

The upstream's ``tools/list_changed`` (a notification on 2025-11-25 sessions, a ``subscriptions/listen`` event
on 2026-07-28 ones, or a periodic listing: ``gateway.upstream.mcp.watch``) tells the pool (``Pool.changed``); so does a
reconnect whose listing differs from the one the last build read, and an upstream going down (``/status`` shows it
stale).

This module (with ``calls``, its asking half) imports the SDK's client side; the pool imports it when a definitions
directory first declares an ``mcp:`` source, so a gateway without one never loads the SDK's client (importing it
imports the whole ``mcp`` package and its pydantic types: more than a second of CPU on a small machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Hashable
from typing import Any, Protocol

import anyio
import httpx2
import mcp_types
from mcp import Client

from ..oauth.clients import OAuthClients
from . import fastcall as mcp_fastcall
from . import listing as mcp_listing
from .calls import RECONNECTING, SessionCalls
from .client import (
    ListingTooLarge,
    UpstreamUnavailable,
    connected,
    fingerprint,
    reason,
    refusal_of,
)
from .config import UpstreamConfig
from .refusals import Refusal
from .watch import ChangeWatch

log = logging.getLogger("gateway.mcp_pool")

# What an upstream tells that makes the next build list it again: its tools, prompts or resources changed.
LIST_CHANGES = (mcp_types.ToolListChangedNotification, mcp_types.PromptListChangedNotification,
                mcp_types.ResourceListChangedNotification)


class Pool(Protocol):
    """What a connection asks of the pool that holds it (``gateway.upstream.mcp.pool.McpPool``)."""

    lock: threading.Lock  # guards the pool's table and every connection's holders
    change_interval_s: float  # one upstream tells the pool of a change at most this often

    @property
    def oauth(self) -> OAuthClients: ...  # the OAuth clients of upstreams that demand OAuth

    def bind(self) -> asyncio.AbstractEventLoop: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def changed(self, connection: Connection) -> None: ...

    def released(self, connection: Connection) -> None: ...


class Connection(ChangeWatch, SessionCalls):
    """One upstream's session, held by a task of its own (see the module's docstring)."""

    # Whether the session lists the upstream's tools when it connects and watches them change: the gateway's own
    # does, for the builds; a person's (``gateway.upstream.mcp.people``) only calls.
    watches = True

    @property
    def relay_key(self) -> Hashable:
        """Under what its calls' relay channels are found (``gateway.upstream.mcp.relay``): the upstream."""
        return self.config

    def __init__(self, pool: Pool, config: UpstreamConfig):
        self.pool = pool
        self.config = config
        self.state = "idle"  # idle (not started) | connecting | up | down | closed
        self.error: str | None = None
        self.refusal: Refusal | None = None  # the HTTP error status the last attempt met, if that is why it failed
        self.connected_at: float | None = None
        self.listed: str | None = None  # fingerprint of the listing the last build read ("" when it read none)
        self.listen_refused = False  # the upstream refused a subscriptions/listen stream: not asked again
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._attempt: asyncio.Future[Client] | None = None
        self._wake: asyncio.Event | None = None
        self._redo: asyncio.Event | None = None  # set: leave this session and connect again
        self._last_attempt = 0.0
        self.holders = 0
        self._owners: weakref.WeakSet[object] = weakref.WeakSet()
        self._told = -pool.change_interval_s  # loop time the pool was last told of a change
        self._retried = False  # an attempt made at once (``retry``): its failure is told too, its reason being new
        self._telling: asyncio.TimerHandle | None = None  # a change heard since then, told when the interval ends
        self._fast: mcp_fastcall.FastCall | None = None  # tools/call beside the SDK, on the current client

    # -- calls (on the pool's loop): ``SessionCalls`` ---------------------------------------------------------

    def unread(self) -> None:
        """The listing ``listed`` records was read by no build (its build stopped waiting for it first:
        ``gateway.sources.mcp.late``, from a build's thread): forgotten, so that the session's listing on connecting
        differs and asks for a rebuild; a session up already (it lists nothing more unless told of a change) asks
        now. One of the two asks: ``_serve`` sets the state before it compares."""
        self.listed = ""
        loop = self.pool.loop
        if self.state == "up" and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the gateway is stopping
                loop.call_soon_threadsafe(self._changed)

    def auth(self) -> httpx2.Auth | None:
        """The OAuth of the session's HTTP client, for an upstream that demands it."""
        if self.config.oauth is None or self.config.url is None:
            return None
        return self.pool.oauth.authorizer(self.config.source, self.config.url, self.config.oauth,
                                          self.config.oauth_secrets).auth

    def retry(self) -> None:
        """Connect again now, not when the backoff ends (on the pool's loop): the gateway was just authorized."""
        if self.state == "down" and self._wake is not None:
            self._retried = True
            self._wake.set()

    # -- the task holding the session -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the task holding the session, on the pool's loop (from that loop's thread)."""
        if self._task is not None or self.state == "closed":
            return
        loop = self.pool.bind()
        self._wake, self._redo = asyncio.Event(), asyncio.Event()
        self._attempt = loop.create_future()
        self.state = "connecting"
        # A context of its own: started by whatever first needed it (a call), the session must not keep that call's
        # context variables (its relay channel) for what it hears later.
        self._task = loop.create_task(self._hold(), name=f"mcp upstream {self.config.source}",
                                      context=contextvars.Context())

    async def _hold(self) -> None:
        assert self._wake is not None and self._redo is not None
        failures = 0
        loop = asyncio.get_running_loop()
        while True:
            self._last_attempt = loop.time()
            if self._attempt is None or self._attempt.done():
                self._attempt = loop.create_future()
            attempt, self.state = self._attempt, "connecting"
            beside = mcp_listing.Beside(self.config.url)
            try:
                async with connected(self.config, self._notified, beside.opened, relays=self.config.relay,
                                     auth=self.auth(), relay_key=self.relay_key) as client:
                    await self._serve(client, beside, attempt)
                self.error = self.error or "the connection ended"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 — any failure of the upstream is its state, told on calls
                self.error, self.refusal = reason(exc), refusal_of(exc)
                log.info("%s: %s", self.config.label, self.error)
            finally:
                if self._fast is not None:
                    self._fast.close()
                self._client = self._fast = None
            was_up = self.state == "up"
            if not attempt.done():
                attempt.set_exception(UpstreamUnavailable(self.error))
                attempt.exception()  # retrieved: no "never retrieved" warning when no call waited
            # A session that stayed up the cap ends the run of failures: the next attempt is made now. One that
            # did not (or no session) waits longer each time, so an upstream that drops every session is not
            # asked in a loop.
            healthy = was_up and time.time() - (self.connected_at or 0.0) >= self.config.reconnect_cap_s
            failures = 0 if healthy else failures + 1
            if self._redo.is_set():  # a call found the session gone (the upstream restarted, or dropped it)
                self._redo.clear()
                if failures <= 1:  # a new one at once (never within the floor): the calls waiting for it get it
                    await asyncio.sleep(max(0.0, self._last_attempt + self.config.reconnect_floor_s - loop.time()))
                    continue
                self.error = RECONNECTING
            self.state = "down"
            pending = self._attempt
            if pending is not None and not pending.done():  # calls waiting for a session hear why now, not later
                pending.set_exception(UpstreamUnavailable(self.error))
                pending.exception()
            if was_up or self._retried:
                self._changed()  # its tools are served stale now, or it failed anew: /status says so
            self._retried = False
            self._wake.clear()
            if failures:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.config.reconnect_delay(failures)):  # not wait_for (see above)
                        await self._wake.wait()

    async def _serve(self, client: Client, beside: mcp_listing.Beside, attempt: asyncio.Future[Client]) -> None:
        assert self._redo is not None
        self._fast = beside.fast(client)
        tools: list[mcp_types.Tool] = []
        listed = None
        try:
            if self.watches:
                tools = await mcp_listing.list_tools(client, self._fast, self.config)
                listed = await asyncio.to_thread(fingerprint, tools)
        except ListingTooLarge as exc:  # the build says so; the session stays (a reconnect would list it again)
            listed = str(exc)
        self._client, self.state, self.error, self.refusal, self.connected_at = client, "up", None, None, time.time()
        if not attempt.done():
            attempt.set_result(client)
        log.info("%s connected (%s, %d tools)", self.config.label, client.protocol_version, len(tools))
        if self.listed is not None and listed != self.listed:
            self._changed()  # it came back, or came back different, since the last build read it
        async with anyio.create_task_group() as group:
            if self.watches:
                group.start_soon(self._listen, client, group.cancel_scope)
            await self._redo.wait()
            group.cancel_scope.cancel()

    def _changed(self) -> None:
        """Tell the pool its tools changed, at once or (told less than the pool's ``change_interval_s`` ago) once
        when the interval ends: an upstream that says list_changed without pause costs a rebuild per interval, not
        a rebuild storm, and its last change is still heard."""
        loop = asyncio.get_running_loop()
        if self._telling is not None:
            return
        wait = self._told + self.pool.change_interval_s - loop.time()
        if wait > 0:
            self._telling = loop.call_later(wait, self._tell)
        else:
            self._tell()

    def _tell(self) -> None:
        self._telling = None
        self._told = asyncio.get_running_loop().time()
        self.pool.changed(self)

    async def _notified(self, message: Any) -> None:
        if isinstance(message, LIST_CHANGES):
            self._changed()

    async def aclose(self) -> None:
        self.state = "closed"
        if self._telling is not None:
            self._telling.cancel()
            self._telling = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._client = self._fast = None
        if self._attempt is not None and not self._attempt.done():
            self._attempt.cancel()

    # -- holders --------------------------------------------------------------------------------------------

    def hold(self, owner: object) -> None:
        """Keep this session open while ``owner`` lives: a tool's executor, or the source's declaration (so an
        upstream with no tools served yet is still connected to, and its tools appear when it answers)."""
        with self.pool.lock:
            if owner in self._owners:
                return
            self._owners.add(owner)
            self.holders += 1
        weakref.finalize(owner, self.pool.released, self)

