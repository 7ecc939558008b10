"""Tells approvers that a call waits (``approvals: {webhook: URL}``): each new approval request is POSTed there as
JSON — its id, tool, caller, reason, when it expires and where it is decided — never its arguments (a chat channel
is no place for them; the approver reads them at ``GET /approvals/{id}``).

Off the call path: the POST is a task of its own with a short deadline, at most ``IN_FLIGHT`` at once (past
that a request is not told, and the log says so); a failure is a warning naming the host, never the URL, which
may hold a secret (a chat service's incoming-webhook token).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..events import Event, Observer

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

log = logging.getLogger("gateway.approvals")

TIMEOUT_S = 5.0
IN_FLIGHT = 64


class ApprovalWebhook(Observer):
    def __init__(self, gateway: Gateway, url: str):
        self.gateway, self.url, self.host = gateway, url, urlsplit(url).hostname or "?"
        self.tasks: set[asyncio.Task[None]] = set()

    def event(self, event: Event) -> None:
        if event.kind != "approval" or event.data.get("action") != "requested":
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a build's thread): nothing to tell from here
            return
        if len(self.tasks) >= IN_FLIGHT:
            log.warning("approval webhook to %s: %d posts in flight; this request is not told", self.host, IN_FLIGHT)
            return
        detail = event.data.get("detail") or {}
        task = loop.create_task(self._post({"event": "approval_requested", "caller": event.data.get("caller"),
                                            **{k: detail.get(k) for k in ("id", "tool", "reason", "expires_at")},
                                            "url": f"/approvals/{detail.get('id')}"}))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _post(self, body: dict[str, Any]) -> None:
        import httpx

        try:
            response = await self.gateway.http_client().post(self.url, json=body, timeout=TIMEOUT_S)
        except httpx.HTTPError as exc:
            log.warning("approval webhook to %s failed: %s", self.host, type(exc).__name__)
            return
        if response.status_code >= 300:
            log.warning("approval webhook to %s answered %d", self.host, response.status_code)

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()


def make(gateway: Gateway) -> ApprovalWebhook | None:
    url = gateway.settings.approvals.webhook
    return ApprovalWebhook(gateway, url) if url else None
