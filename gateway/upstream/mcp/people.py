"""Each person's own session to an upstream MCP server whose source declares ``person_auth``: calls made as the
calling person, with that person's token, never the gateway's credentials nor another person's session.

MCP ties a session to whoever opened it (a server may keep per-session state and SHOULD bind the session to its
user), so a person's token is not stamped onto the gateway's shared session: a ``PersonSession`` is opened per
person and token, on their first call with it, and reused by their next calls with the same token; a token
refreshed or exchanged anew opens a new one (the old one closes when idle). A session's token never changes, so
two calls of one person made with two tokens (two clients, or a refresh between them) each go out with their own.
It only calls: it neither lists the upstream's tools when it connects nor watches them (the gateway's own session
does both for the builds), and sends none of the source's headers that name a secret (``UpstreamConfig.
for_a_person``). What the upstream sends on it during a call goes to that call's client only (its relay key is
the session's own).

Sessions are bounded: one idle ``IDLE_S`` is closed, and past ``MAX_SESSIONS`` the least recently used idle ones
are closed first (a session with a call in progress never is), so ten thousand people calling once cost no more
than the bound, and the upstream is not left holding sessions nobody uses.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Generator, Hashable
from typing import Any

import httpx2
import mcp_types

from .config import UpstreamConfig
from .connection import Connection, Pool

IDLE_S = 300.0  # a person's session unused this long is closed
MAX_SESSIONS = 1_000  # people's sessions open at once, over all upstreams


class _Bearer(httpx2.Auth):
    """``Authorization`` on every request of the session: its person's token."""

    def __init__(self, authorization: str):
        self.authorization = authorization

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = self.authorization
        yield request


class PersonSession(Connection):
    """One person's session to one upstream, with one token."""

    watches = False

    def __init__(self, pool: Pool, config: UpstreamConfig, key: Hashable, authorization: str):
        super().__init__(pool, config.for_a_person())
        self.key = key
        self.used = time.monotonic()
        self.calls = 0  # in progress: never closed under them
        self._auth = _Bearer(authorization)

    @property
    def relay_key(self) -> Hashable:
        return self.key

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
    """The people's sessions of one pool, by (upstream, person, token); used on the pool's loop only."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self._sessions: OrderedDict[Hashable, PersonSession] = OrderedDict()
        self._sweep: asyncio.TimerHandle | None = None
        self._closing: set[asyncio.Task[None]] = set()

    def session(self, config: UpstreamConfig, person: Hashable, authorization: str) -> PersonSession:
        """``person``'s session to ``config``'s upstream with the token ``authorization``."""
        key = (config, person, hashlib.sha256(authorization.encode()).digest())
        found = self._sessions.get(key)
        if found is None or found.state == "closed":
            found = self._sessions[key] = PersonSession(self.pool, config, key, authorization)
        found.used = time.monotonic()
        self._sessions.move_to_end(key)
        self._close(self._unused(keep=key))
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(IDLE_S, self._swept)
        return found

    def __len__(self) -> int:
        return len(self._sessions)

    def _unused(self, keep: Hashable = None) -> list[PersonSession]:
        """The sessions to close now: idle too long, or the least recently used past the bound (none calling, nor
        ``keep``'s, about to call). Every session is looked at: one that was calling is not where its last use
        would put it."""
        cutoff, over = time.monotonic() - IDLE_S, len(self._sessions) - MAX_SESSIONS
        closing = []
        for key, session in list(self._sessions.items()):  # least recently asked for first
            if session.calls or key == keep or (session.used > cutoff and over <= 0):
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

    def _close(self, sessions: list[PersonSession]) -> None:
        for session in sessions:
            task = asyncio.ensure_future(session.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        sessions, self._sessions = list(self._sessions.values()), OrderedDict()
        await asyncio.gather(*(session.aclose() for session in sessions), *self._closing, return_exceptions=True)
