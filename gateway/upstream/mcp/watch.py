"""How an upstream MCP session's tool changes are heard, and whether the session still stands
(``gateway.upstream.mcp.connection.Connection`` holds the session and takes these as its own).

What the upstream declared decides it: a ``subscriptions/listen`` stream (2026-07-28) or notifications (2025-11-25)
when it tells list changes (``tools.listChanged``), with a ping every ``PING_INTERVAL_S``; a listing every
``relist_s`` (a source key) instead when it does not, or refused the stream (remembered: never asked again on its reconnects).
Either way an idle gateway sends the upstream only these.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import anyio
import mcp_types
from mcp import Client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError

from . import fastcall as mcp_fastcall
from . import listing as mcp_listing
from .client import ListingTooLarge, fingerprint, reason
from .config import UpstreamConfig

log = logging.getLogger("gateway.mcp_pool")

PING_INTERVAL_S = 10.0  # how often a 2025-11-25 session (no change stream to lose) is checked


class ChangeWatch:
    """The watching half of a ``Connection``: what it reads and sets of the connection."""

    config: UpstreamConfig
    error: str | None
    listed: str | None  # fingerprint of the listing the last build read
    listen_refused: bool
    _fast: mcp_fastcall.FastCall | None
    _changed: Callable[[], None]  # tell the pool the tools changed

    async def _listen(self, client: Client, scope: anyio.CancelScope) -> None:
        """What the upstream declared decides how its changes are heard. It tells them (``tools.listChanged``):
        on 2026-07-28 on a ``subscriptions/listen`` stream, whose end means the upstream went away (or
        restarted): reconnect; on 2025-11-25 as notifications (``_notified``), with a ping every
        ``PING_INTERVAL_S`` to find out whether the session still stands (the SDK gives up on a GET stream that
        broke without saying so). It does not tell them, or refused the stream while its session still answers
        (remembered for this upstream, not asked again on reconnects): pings, and a listing every ``relist_s``."""
        capabilities = client.server_capabilities
        tells = bool(capabilities and capabilities.tools and capabilities.tools.list_changed)
        if not tells or self.listen_refused:
            self.error = await self._watch(client, relist=True)
        else:
            try:
                async with client.listen(tools_list_changed=True, **_content_changes(capabilities)) as subscription:
                    async for _event in subscription:
                        self._changed()
                self.error = "its change stream ended"
            except ListenNotSupportedError:
                self.error = await self._watch(client, relist=False)
            except Exception as exc:  # noqa: BLE001 — refused, or lost: a ping tells which
                if await self._answers(client):
                    log.info("%s refused a change stream (%s): its tools are listed again every %g s",
                             self.config.label, reason(exc), self.config.relist_s)
                    self.listen_refused = True
                    self.error = await self._watch(client, relist=True)
                else:
                    self.error = f"its change stream ended: {reason(exc)}"
        scope.cancel()

    async def _watch(self, client: Client, *, relist: bool) -> str:
        """Ping every ``PING_INTERVAL_S`` (and, ``relist``, list the tools every ``relist_s`` instead of that
        ping, telling the pool when they changed) until the session stops answering; why it stopped.

        The first check is a listing either way: a 2025-11-25 server may change its tools right after the handshake,
        before the session's GET stream is open, and its ``list_changed`` then goes nowhere (server-everything
        registers its capability-dependent tools so: the gateway served 12 of its 16 tools for good)."""
        since_listing, first = 0.0, True
        while True:
            await asyncio.sleep(PING_INTERVAL_S)
            since_listing += PING_INTERVAL_S
            if first or (relist and since_listing >= self.config.relist_s):
                since_listing, first = 0.0, False
                try:
                    tools = await mcp_listing.list_tools(client, self._fast, self.config)
                except ListingTooLarge:
                    continue  # the session answered; the next build reports the bound
                except Exception as exc:  # noqa: BLE001 — whatever it is, the session no longer answers
                    return f"it stopped answering: {reason(exc)}"
                if self.listed is not None and await asyncio.to_thread(fingerprint, tools) != self.listed:
                    self._changed()
            elif not await self._answers(client):
                return "it stopped answering a ping"

    async def _answers(self, client: Client) -> bool:
        """Whether the session still answers a ping. An upstream without ``ping`` (FastMCP 4 on 2026-07-28 answers
        -32601) answered all the same."""
        try:
            with anyio.fail_after(self.config.connect_timeout_s):
                await client.session.send_ping()
        except MCPError as exc:
            return exc.code == mcp_types.METHOD_NOT_FOUND
        except Exception:  # noqa: BLE001 — whatever it is, the session no longer answers
            return False
        return True


def _content_changes(capabilities: mcp_types.ServerCapabilities) -> dict[str, bool]:
    """The listen flags for the prompts' and resources' changes the upstream said it tells (only those)."""
    return {"prompts_list_changed": bool(capabilities.prompts and capabilities.prompts.list_changed),
            "resources_list_changed": bool(capabilities.resources and capabilities.resources.list_changed)}
