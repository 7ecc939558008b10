"""Approvals of calls (``gateway.approvals``), out of band:

- ``GET /admin/api/approvals``: ``{approvals: [...]}``, every request nobody has decided, oldest first (admins);
- ``GET /approvals/{id}``: one request, for its caller, whoever may decide it, and admins;
- ``POST /approvals/{id}`` ``{"decision": "approve" | "deny"}``: the decision of an approver the request names
  (``admins``, ``key:<name>``, ``user:<sub>``) — never of its own caller, and sent as an admin write is (JSON, and
  with auth off the console's token), so that no web page can approve. An ``approval`` event tells it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...approvals.gate import tell
from ...approvals.records import PENDING, Approvals
from ...approvals.records import Request as ApprovalRequest
from ...errors import BadRequest, Forbidden
from ...runtime.gateway import Gateway
from ..http.auth import Caller, authenticate
from ..http.bodies import parse_json, read_body
from ..http.errors import error_response, json_response
from .writes import WriteGuard

DECISIONS = {"approve": True, "deny": False}


def routes(gateway: Gateway, *, admin: Callable[..., Awaitable[Caller]], writes: WriteGuard) -> list[Route]:
    api = ApprovalsApi(gateway, admin, writes)
    return [Route("/admin/api/approvals", api.pending, methods=["GET"]),
            Route("/approvals/{approval_id}", api.show, methods=["GET"]),
            Route("/approvals/{approval_id}", api.decide, methods=["POST"])]


class ApprovalsApi:
    def __init__(self, gateway: Gateway, admin: Callable[..., Awaitable[Caller]], writes: WriteGuard):
        self.gateway, self.admin, self.writes = gateway, admin, writes

    @property
    def approvals(self) -> Approvals:
        return Approvals(self.gateway.state, self.gateway.settings.approvals.ttl_s)

    async def pending(self, request: Request) -> Response:
        await self.admin(request)
        return json_response({"approvals": [r.shown() for r in await self.approvals.pending()]})

    async def show(self, request: Request) -> Response:
        caller = await self._caller(request)
        found = await self.approvals.get(request.path_params["approval_id"])
        if found is None or not _sees(caller, found):
            return error_response(404, "No such approval (it may have expired).")
        return json_response(found.shown())

    async def decide(self, request: Request) -> Response:
        caller = await self._caller(request)
        self.writes.check(request)
        body = parse_json(await read_body(request, self.gateway.settings.max_body_bytes))
        decision = body.get("decision") if isinstance(body, dict) else None
        if decision not in DECISIONS:
            raise BadRequest('Send {"decision": "approve"} or {"decision": "deny"}.')
        found = await self.approvals.get(request.path_params["approval_id"])
        if found is None or not _sees(caller, found):
            return error_response(404, "No such approval (it may have expired).")
        if _is_callers(caller, found):
            raise Forbidden("Nobody approves their own call out of band: an approver the tool names decides it.")
        if not may_decide(caller, found):
            raise Forbidden(f"Not an approver of this call (approvers: {', '.join(found.approvers)}).")
        if found.status != PENDING or not await self.approvals.decide(found, DECISIONS[decision], caller.name, "api"):
            return error_response(409, "This approval was decided already.")
        tell(self.gateway.events, "approved" if DECISIONS[decision] else "denied", found, caller.name)
        return json_response(found.shown())

    async def _caller(self, request: Request) -> Caller:
        client = request.client.host if request.client else None
        return await authenticate(self.gateway, request.headers, client)


def _sees(caller: Caller, found: ApprovalRequest) -> bool:
    """Whether ``caller`` may know of ``found``: its caller, its approvers, and admins (who list them all)."""
    return caller.is_admin or _is_callers(caller, found) or may_decide(caller, found)


def _is_callers(caller: Caller, found: ApprovalRequest) -> bool:
    """Whether ``caller`` made the call (with auth off nobody is named, and the loopback admin decides)."""
    return found.caller is not None and caller.name == found.caller


def may_decide(caller: Caller, found: ApprovalRequest) -> bool:
    """Whether ``caller`` is one of the approvers ``found`` names (``caller`` itself is asked only in-band)."""
    names: set[Any] = set(found.approvers)
    if "admins" in names and caller.is_admin:
        return True
    if caller.key is not None and f"key:{caller.key.name}" in names:
        return True
    return caller.identity is not None and f"user:{caller.identity.user}" in names
