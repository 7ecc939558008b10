"""Approval requests and decisions in the shared state (``gateway.state``): memory for one process, Redis in
cluster mode, so that a decision made on one replica is the one every replica reads.

Under the state's prefix:

- ``approval:<id>``: the request as JSON — its tool, the arguments' digest (and the arguments themselves unless the
  tool keeps them out of the audit trail), the caller, the reason, the approvers, when it expires, its status
  (``pending``, ``approved``, ``denied``) and who decided, when and how;
- ``approval-call:<digest>``: the id of the request of one call (tool, arguments, caller): the same call again
  finds it rather than asking anew;
- ``approval-open:<id>``: present while nobody has decided; a decision takes it (of two approvers deciding at once,
  one does);
- ``approval-grant:<id>``: an approval not yet used; the call that runs takes it (used once, even by two replicas
  running the same call at once).

Every record lives ``approvals.ttl_s`` (a request nobody decides expires; so does an approval nobody uses).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..state.base import SharedState

PENDING, APPROVED, DENIED = "pending", "approved", "denied"
OPEN_PER_CALLER = 100  # requests one caller may open per ttl_s
OPEN_IN_ALL = 1000  # and all callers together
LISTED = 500  # pending requests an admin listing shows, oldest first
ID = re.compile(r"[A-Za-z0-9_-]{22}")  # what secrets.token_urlsafe(16) makes: anything else is no approval


class TooManyOpen(Exception):
    """A caller opened too many requests lately."""


@dataclass
class Request:
    id: str
    tool: str
    digest: str  # SHA-256 of the tool, the canonical arguments and the caller: what the approval is bound to
    caller: str | None
    user: str | None
    arguments: Any  # None when the tool keeps its arguments out of the audit trail
    reason: str
    approvers: list[str]
    created_at: float
    expires_at: float
    status: str = PENDING
    by: str | None = None
    via: str | None = None  # elicitation | api
    decided_at: float | None = None

    def shown(self) -> dict[str, Any]:
        """As an approver or the caller sees it: without the digest when the arguments are kept out of sight (a
        digest of a PIN is the PIN, to whoever tries them all)."""
        shown = asdict(self)
        if self.arguments is None:
            del shown["digest"]
        return shown


def call_digest(tool_id: str, arguments: Mapping[str, Any], caller: str | None, user: str | None) -> str:
    canonical = json.dumps({"tool": tool_id, "arguments": arguments, "caller": caller, "user": user},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class Approvals:
    """The requests and decisions of one shared state."""

    def __init__(self, state: SharedState, ttl_s: float):
        self.state, self.ttl_s = state, ttl_s

    async def of_call(self, digest: str) -> Request | None:
        """The live request of the call whose digest is ``digest``."""
        found = await self.state.get(f"approval-call:{digest}")
        return await self.get(found.decode()) if found else None

    async def open(self, tool_id: str, digest: str, arguments: Any, caller: str | None, user: str | None,
                   reason: str, approvers: list[str]) -> Request:
        """A new pending request; ``TooManyOpen`` when its caller opened ``OPEN_PER_CALLER`` within the last
        ``ttl_s``, or all callers ``OPEN_IN_ALL`` (callers sending ever new arguments cannot fill the shared state,
        nor bury a request in the admins' list)."""
        if await self.state.acquire(f"approval-opened:{caller or ''}", OPEN_PER_CALLER, self.ttl_s) > 0:
            raise TooManyOpen(f"{OPEN_PER_CALLER} approvals were asked for by this caller within {self.ttl_s:g} s; "
                              "wait for them to be decided or to expire")
        if await self.state.acquire("approval-opened", OPEN_IN_ALL, self.ttl_s) > 0:  # many callers at once
            raise TooManyOpen(f"{OPEN_IN_ALL} approvals were asked for within {self.ttl_s:g} s; wait for them to be "
                              "decided or to expire")
        now = time.time()
        request = Request(secrets.token_urlsafe(16), tool_id, digest, caller, user, arguments, reason, approvers, now,
                          now + self.ttl_s)
        await self._save(request)
        await self.state.put(f"approval-open:{request.id}", b"1", self.ttl_s)
        await self.state.put(f"approval-call:{digest}", request.id.encode(), self.ttl_s)
        return request

    async def get(self, approval_id: str) -> Request | None:
        if not ID.fullmatch(approval_id):
            return None
        found = await self.state.get(f"approval:{approval_id}")
        if found is None:
            return None
        request = Request(**json.loads(found))
        return request if request.expires_at > time.time() else None

    async def decide(self, request: Request, approve: bool, by: str | None, via: str) -> bool:
        """Record a decision on a pending ``request``; False when it was decided meanwhile (or expired)."""
        if await self.state.take(f"approval-open:{request.id}") is None:
            return False
        request.status, request.by, request.via, request.decided_at = (APPROVED if approve else DENIED), by, via, \
            time.time()
        await self._save(request)
        if approve:
            await self.state.put(f"approval-grant:{request.id}", b"1", max(1.0, request.expires_at - time.time()))
        return True

    async def use(self, request: Request) -> bool:
        """Take ``request``'s approval for the call about to run: True once, for one call."""
        if await self.state.take(f"approval-grant:{request.id}") is None:
            return False
        await self.forget(request)
        return True

    async def forget(self, request: Request) -> None:
        """Drop a request that was used or told: the same call again asks anew."""
        await self.state.delete(f"approval-call:{request.digest}")
        await self.state.delete(f"approval:{request.id}")

    async def pending(self) -> list[Request]:
        """The live requests nobody has decided, oldest first, at most ``LISTED`` (the console's and the admin
        API's list)."""
        found = await self.state.scan("approval:")
        requests = [Request(**json.loads(value)) for value in found.values()]
        now = time.time()
        return sorted((r for r in requests if r.status == PENDING and r.expires_at > now),
                      key=lambda r: r.created_at)[:LISTED]

    async def _save(self, request: Request) -> None:
        await self.state.put(f"approval:{request.id}", json.dumps(asdict(request), default=str).encode(),
                             max(1.0, request.expires_at - time.time()))
