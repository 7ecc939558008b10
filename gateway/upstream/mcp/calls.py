"""The asking half of an upstream MCP ``Connection`` (``gateway.upstream.mcp.connection``): calls, listings and
other requests on the session it holds, each sent once more where that is safe — a call the upstream refused
without running it (its session forgotten by a restart), or sent on no session at all (a reconnect closed the one
it was given first), and a build's listing that met its session lost (a listing changes nothing upstream). A call
that may have run is never sent twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from . import fastcall as mcp_fastcall
from . import listing as mcp_listing
from .client import (
    CALL_READ_TIMEOUT_S,
    ListingTooLarge,
    UpstreamUnavailable,
    entered,
    fingerprint,
    finish_call,
    forgotten,
    reason,
    refusal_of,
    unreachable,
)
from .config import UpstreamConfig
from .refusals import Refusal

# Why a call fails while the backoff runs after sessions that did not last (a second one lost in a row).
RECONNECTING = "it lost its session again soon after connecting"
T = TypeVar("T")


class _Unsent(Exception):
    """The session a call was given was closed (a reconnect) before the call was sent."""


def _gone(exc: MCPError) -> bool:
    """Whether ``exc`` says the session is gone: closed under the request, or forgotten by a restarted upstream."""
    return exc.error.code == mcp_types.CONNECTION_CLOSED or forgotten(exc)


class SessionCalls:
    """The asking half of a ``Connection``: what it reads and sets of the connection."""

    config: UpstreamConfig
    state: str
    error: str | None
    refusal: Refusal | None
    listed: str | None
    _client: Client | None
    _attempt: asyncio.Future[Client] | None
    _wake: asyncio.Event | None
    _redo: asyncio.Event | None
    _last_attempt: float
    _fast: mcp_fastcall.FastCall | None
    start: Callable[[], None]  # start the task holding the session, if it is not running
    auth: Callable[[], httpx2.Auth | None]  # the OAuth of its HTTP client, if the upstream demands it

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """The upstream's answer; ``UpstreamUnavailable`` when it cannot be reached, ``MCPError`` for a
        JSON-RPC error it answered (an unknown tool, invalid params)."""
        client = await self._session()
        try:
            return await self._call(client, name, arguments)
        except _Unsent:  # a reconnect closed the session it was given before it was sent: the next one sends it
            pass
        except MCPError as exc:
            if not self._lost(client, exc):
                if client is not self._client:  # a reconnect closed the session under the call, which may have run
                    raise UpstreamUnavailable(f"{self.config.label} is reconnecting: the session closed while the "
                                              f"call ran ({exc.error.message}); try again") from None
                raise
            if not forgotten(exc):  # the call may have run: never send it twice
                raise UpstreamUnavailable(f"{self.config.label} closed the connection during the call") from None
        client = await self._renewed()  # a new session (the upstream restarted and forgot the old one, or a
        try:  # reconnect replaced it), and the call has not run
            return await self._call(client, name, arguments)
        except _Unsent:
            raise UpstreamUnavailable(f"{self.config.label} is reconnecting: its session was replaced twice before "
                                      "the call could be sent; try again") from None

    async def _renewed(self) -> Client:
        """The session replacing one lost under a call that has not run. A server that has just started may fail
        the first handshake (a connection it resets or closes unanswered while it warms up): an attempt that fails
        so is made once more, after the floor, before the call fails; a refusal (an HTTP error status) is not.
        One that ran out of ``connect_timeout_s`` is not made again either; the call's own deadline bounds both."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            return await self._session()
        except UpstreamUnavailable as exc:
            if exc.refusal is not None or self.state == "closed" or \
                    loop.time() - started >= self.config.connect_timeout_s:
                raise
        await asyncio.sleep(max(0.0, self._last_attempt + self.config.reconnect_floor_s - loop.time()))
        return await self._session()

    async def _call(self, client: Client, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        # Checked and used with no await between: a session a reconnect closed meanwhile sends nothing.
        session = entered(client)
        if session is None:
            raise _Unsent
        fast = self._fast
        if fast is None or not mcp_fastcall.ENABLED or fast.session.client is not client:
            return await client.call_tool(name, arguments, read_timeout_seconds=CALL_READ_TIMEOUT_S)
        try:
            try:
                raw = await fast.call(name, arguments)
            except MCPError as exc:
                if exc.error.code != mcp_types.HEADER_MISMATCH or not fast.session.modern:
                    raise
                # As the SDK's call: the upstream refused a call whose tool this session has not listed as it is
                # now (it ran nothing); list it again and send the call once more.
                try:
                    with anyio.fail_after(self.config.connect_timeout_s):
                        await client._relist_tool(name)
                except (MCPError, TimeoutError):
                    raise exc from None
                raw = await fast.call(name, arguments)
        except mcp_fastcall.Handover:
            return await client.call_tool(name, arguments, read_timeout_seconds=CALL_READ_TIMEOUT_S)
        return await finish_call(client, session, name, arguments, raw)

    async def list_tools(self) -> list[mcp_types.Tool]:
        """The upstream's tools, for a build (asked again on the next session when this one is lost: ``_listing``)."""
        try:
            return await self._listing(lambda client: mcp_listing.list_tools(client, self._fast, self.config))
        except MCPError as exc:
            if _gone(exc) or refusal_of(exc) is not None:
                raise unreachable(self.config, exc) from None
            raise

    async def request(self, ask: Callable[[Client], Awaitable[T]], *, listing: bool = False) -> T:
        """``ask(client)`` on this session (a prompt, a resource: ``gateway.sources.mcp_content``), with the errors
        of ``list_tools``; ``listing`` (a build listing the prompts and resources) is asked again as ``list_tools``
        is."""
        try:
            return await (self._listing(ask) if listing else self._asked(ask))
        except MCPError as exc:
            if _gone(exc):
                raise UpstreamUnavailable(f"{self.config.label}: {reason(exc)}") from None
            raise

    async def _listing(self, ask: Callable[[Client], Awaitable[T]]) -> T:
        """``ask(client)``, a build's listing, sent once more on the next session when the one it was given is lost
        under it (the upstream restarted or dropped it; ``_lost`` asks for the next one). A listing changes nothing
        upstream, and the build would otherwise serve the upstream as down for a restart the connection heals at
        once: stale, or without its tools where none were kept (a call then finds no such tool while the session is
        up again), and without its prompts and resources until some later rebuild."""
        try:
            return await self._asked(ask)
        except MCPError as exc:
            if not _gone(exc):
                raise
        return await self._asked(ask)

    async def _asked(self, ask: Callable[[Client], Awaitable[T]]) -> T:
        """``ask(client)`` on the current session; a session ``ask`` found gone is replaced (``_lost``)."""
        client = await self._session()
        try:
            return await ask(client)
        except MCPError as exc:
            self._lost(client, exc)
            raise

    def _lost(self, client: Client, exc: MCPError) -> bool:
        """Whether ``exc`` means the session is gone (then a new one is asked for)."""
        gone = _gone(exc)
        if gone and self._client is client and self._redo is not None:
            self._client = None
            self._attempt = asyncio.get_running_loop().create_future()  # what calls wait for: the next session
            self._redo.set()
        return gone

    async def _session(self) -> Client:
        if self._client is not None:
            return self._client
        if self.state == "closed":
            raise UpstreamUnavailable(f"{self.config.label} is not connected: the gateway is closing")
        self.start()
        assert self._attempt is not None and self._wake is not None
        loop = asyncio.get_running_loop()
        if self.state == "down":
            if loop.time() - self._last_attempt < self.config.reconnect_floor_s:
                raise self._down()
            self._wake.set()  # skip the rest of the backoff (not the floor): this call waits for one attempt
            for _ in range(100):  # the task starts its next attempt (a new future) within a few loop steps
                if self.state != "down":
                    break
                await asyncio.sleep(0)
        try:
            # Not wait_for: on 3.11 it swallows a cancellation (the call's own deadline) that lands as the attempt
            # ends, and the call would run on past its deadline.
            async with asyncio.timeout(self.config.connect_timeout_s):
                return await asyncio.shield(self._attempt)
        except TimeoutError:
            raise UpstreamUnavailable(f"{self.config.label} did not answer within "
                                      f"{self.config.connect_timeout_s:g} s (connect_timeout_s)") from None
        except UpstreamUnavailable:
            raise self._down() from None

    def _down(self) -> UpstreamUnavailable:
        if self.refusal is not None:
            return UpstreamUnavailable(f"{self.config.label} refused the gateway: {self.refusal}", self.refusal)
        if self.error == RECONNECTING:
            return UpstreamUnavailable(f"{self.config.label} is reconnecting: {self.error}; try again shortly")
        return UpstreamUnavailable(f"{self.config.label} is unreachable: {self.error or 'not connected'}; the "
                                   "gateway keeps retrying", None)

    def list_blocking(self, loop: asyncio.AbstractEventLoop | None, timeout: float) -> list[mcp_types.Tool]:
        """The upstream's tools, from a thread that is not the loop's (a build): through this session when the
        pool runs on ``loop``, else through a session of this thread's own; ``UpstreamUnavailable`` if not within
        ``timeout``."""
        try:
            if loop is not None and loop.is_running():
                future = asyncio.run_coroutine_threadsafe(self.list_tools(), loop)
                try:
                    tools = future.result(timeout)
                except TimeoutError:
                    future.cancel()
                    raise
            else:
                tools = mcp_listing.list_once(self.config, timeout, self.auth())
        except TimeoutError:
            self.listed = ""
            raise UpstreamUnavailable(f"{self.config.label} did not list its tools within {timeout:g} s") from None
        except ListingTooLarge as exc:
            self.listed = str(exc)  # what a reconnect's listing says too: no rebuild for the same refusal
            raise
        except UpstreamUnavailable:
            self.listed = ""
            raise
        self.listed = fingerprint(tools)
        return tools
