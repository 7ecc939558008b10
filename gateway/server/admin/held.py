"""Tools the lock file holds (``gateway.catalog.held``), as admins see and approve them:

- ``GET /admin/api/held``: ``{held: [{tool, change, served, digest, fields: [{field, locked, now}]}]}`` — each
  changed field as the lock has it and as the tool says it now (every field of a tool the lock does not know);
- ``POST /admin/api/held/{tool}`` ``{"digest": "<the digest the admin saw>"}``: approves it — the lock file gets the
  tool's entry of now (the file written whole, as ``tool-gateway lock --tool`` writes it) and the gateway
  reloads; ``409`` when the tool changed again since the admin looked (another digest) or is held no more, ``403``
  when the definitions directory is read-only. An ``admin`` event names it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...catalog.lock import FIELDS, LOCK_FILE, approved, read, write
from ...errors import BadRequest
from ...runtime.gateway import Gateway
from ..http.auth import Caller
from ..http.bodies import parse_json, read_body
from ..http.errors import error_response, json_response
from .files import DefinitionsFiles


def routes(gateway: Gateway, files: DefinitionsFiles, *, admin: Callable[..., Awaitable[Caller]]) -> list[Route]:
    api = HeldApi(gateway, files, admin)
    return [Route("/admin/api/held", api.listing, methods=["GET"]),
            Route("/admin/api/held/{tool_id}", api.approve, methods=["POST"])]


class HeldApi:
    def __init__(self, gateway: Gateway, files: DefinitionsFiles, admin: Callable[..., Awaitable[Caller]]):
        self.gateway, self.files, self.admin = gateway, files, admin

    async def listing(self, request: Request) -> Response:
        await self.admin(request)
        return json_response({"held": [_shown(held) for held in self.gateway.catalog.held]})

    async def approve(self, request: Request) -> Response:
        caller = await self.admin(request, write=True)
        self.files.check_writable()
        body = parse_json(await read_body(request, self.gateway.settings.max_body_bytes))
        seen = body.get("digest") if isinstance(body, dict) else None
        if not isinstance(seen, str):
            raise BadRequest('Send {"digest": "<the digest of the tool as you saw it>"}.')
        tool_id = request.path_params["tool_id"]
        held = next((h for h in self.gateway.catalog.held if h["tool"] == tool_id), None)
        if held is None or held["now"]["digest"] != seen:
            return error_response(409, f"Tool '{tool_id}' is not held as you saw it (it changed again, or was "
                                       "approved meanwhile): look again.")
        path = self.gateway.catalog.root / LOCK_FILE
        try:
            await anyio.to_thread.run_sync(_approve, path, tool_id, held["now"])
        except (OSError, ValueError) as exc:
            return error_response(409, f"{LOCK_FILE} could not be updated: {exc}")
        self.gateway.events.emit("admin", action="approve held tool", caller=caller.name,
                                 detail={"tool": tool_id, "digest": seen})
        outcome = await self.gateway.reload()
        return json_response(outcome.as_dict(), 200 if outcome.ok else 422)


def _approve(path: Any, tool_id: str, now: Mapping[str, Any]) -> None:
    write(path, approved(read(path.read_text(encoding="utf-8")), {"tools": {tool_id: now}}, [tool_id]))


def _shown(held: Mapping[str, Any]) -> dict[str, Any]:
    locked = (held["locked"] or {}).get("content") or {}
    now = held["now"]["content"]
    fields = [{"field": name, "locked": locked.get(name), "now": now[name]} for name in FIELDS
              if held["locked"] is None or locked.get(name) != now[name]]
    return {"tool": held["tool"], "change": held["change"], "served": held["served"],
            "digest": held["now"]["digest"], "fields": fields}
