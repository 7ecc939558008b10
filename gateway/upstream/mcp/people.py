"""Each person's own session to an upstream MCP server whose source declares ``person_auth``: calls made as the
calling person, with that person's token, never the gateway's credentials nor another person's session.

MCP ties a session to whoever opened it (a server may keep per-session state and SHOULD bind the session to its
user), so a person's token is not stamped onto the gateway's shared session: each person gets a ``PersonSession``
of their own, opened on their first call and reused by the next ones. It only calls: it neither lists the
upstream's tools when it connects nor watches them (the gateway's own session does both for the builds). The
token is the one the call got (``gateway.bindings.mcp``: exchanged, or the person's connection), set before each
call and sent on every request of the session from then on, so a token refreshed or exchanged anew replaces the
old one without a new session.

Sessions are bounded: one idle ``IDLE_S`` is closed, and past ``MAX_SESSIONS`` the least recently used idle ones
are closed first (a session with a call in progress never is), so ten thousand people calling once cost no more
than the bound, and the upstream is not left holding sessions nobody uses.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Generator
from typing import Any

import httpx2
import mcp_types

from .config import UpstreamConfig
from .connection import Connection, Pool

IDLE_S = 300.0  # a person's session unused this long is closed
MAX_SESSIONS = 1_000  # people's sessions open at once, over all upstreams


class _Bearer(httpx2.Auth):
    """``Authorization`` on every request of the session: the token of the person's last call."""

    def __init__(self, session: PersonSession):
        self.session = session

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = self.session.authorization
        yield request


class PersonSession(Connection):
    """One person's session to one upstream."""

    watches = False

    def __init__(self, pool: Pool, config: UpstreamConfig, authorization: str):
        super().__init__(pool, config)
        self.authorization = authorization
        self.used = time.monotonic()
        self.calls = 0  # in progress: never closed under them
        self._auth = _Bearer(self)

    def auth(self) -> httpx2.Auth:
        return self._auth

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        self.calls += 1
        try:
            return await super().call_tool(name, arguments)
        finally:
            self.calls -= 1
            self.used = time.monotonic()


class People:
    """The people's sessions of one pool, by (upstream, person); used on the pool's loop only."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self._sessions: OrderedDict[tuple[UpstreamConfig, Any], PersonSession] = OrderedDict()
        self._sweep: asyncio.TimerHandle | None = None

    def session(self, config: UpstreamConfig, person: Any, authorization: str) -> PersonSession:
        """``person``'s session to ``config``'s upstream, its token now ``authorization``."""
        key = (config, person)
        found = self._sessions.get(key)
        if found is None or found.state == "closed":
            found = self._sessions[key] = PersonSession(self.pool, config, authorization)
        elif found.authorization != authorization:
            found.authorization = authorization
            found.retry()  # refused with the token it had: a new one is worth an attempt now, not after the backoff
        found.used = time.monotonic()
        self._sessions.move_to_end(key)
        self._close(self._unused(keep=key))
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(IDLE_S, self._swept)
        return found

    def __len__(self) -> int:
        return len(self._sessions)

    def _unused(self, keep: tuple[UpstreamConfig, Any] | None = None) -> list[PersonSession]:
        """The sessions to close now: idle too long, or the least recently used past the bound (none calling, nor
        ``keep``'s, about to call)."""
        cutoff, over = time.monotonic() - IDLE_S, len(self._sessions) - MAX_SESSIONS
        closing = []
        for key, session in list(self._sessions.items()):  # least recently used first
            if session.used > cutoff and over <= 0:
                break
            if session.calls or key == keep:
                continue
            del self._sessions[key]
            closing.append(session)
            over -= 1
        return closing

    def _swept(self) -> None:
        self._sweep = None
        self._close(self._unused())
        if self._sessions:
            self._sweep = asyncio.get_running_loop().call_later(IDLE_S, self._swept)

    @staticmethod
    def _close(sessions: list[PersonSession]) -> None:
        for session in sessions:
            asyncio.ensure_future(session.aclose())

    async def aclose(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        sessions, self._sessions = list(self._sessions.values()), OrderedDict()
        await asyncio.gather(*(session.aclose() for session in sessions), return_exceptions=True)
