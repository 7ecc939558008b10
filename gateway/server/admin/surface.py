"""The admin console: its page (``/admin/``), its assets (``/admin/static/…``) and its API (``/admin/api/…``), and
``POST /admin/reload``, which rebuilds the catalog now and answers with the outcome.

Everything but the page, its assets and the sign-in's options needs an admin key or an admin's OAuth access token
(``Authorization: Bearer <key or token>``) or, with auth off,
a loopback caller (``Caller.check_admin``); writes (every ``POST`` and ``PUT``) need a JSON body and, with auth off,
the console token too (``writes``), so that no web page can send one. The page asks for the key and keeps it in the tab; the live call
stream is read with ``fetch`` so that it sends the key as a header too: a key is never put in a URL, where
proxies and access logs would keep it.

API (JSON; errors in the gateway's ``{"error", "status"}`` shape):

- ``GET /admin/api/token``: ``{header, token}``, what admin writes carry with auth off (``writes``).
- ``GET /admin/api/signin`` (public): how the console signs in at the identity provider, ``404`` without
  ``oauth.console`` (``signin``).
- ``GET /admin/api/overview``: version, tool count, definitions directory, read-only and why, auth, the last
  reload, plugins (with their tool counts), upstream sources.
- ``GET /admin/api/tools``, ``GET /admin/api/tools/{id}``: the catalog as the console lists it; one tool in full
  (both descriptions, schemas, each provider format, where it is declared, examples, live figures).
- ``GET /admin/api/problems``: the last reload's problems and warnings, each with the lines around it.
- ``GET /admin/api/reloads``: the reload history, newest first (``gateway.observe.reloads``).
- ``GET /admin/api/calls``, ``/calls/{id}``, ``/calls/stream``: recent calls, one with its arguments and result
  (secrets redacted), and server-sent events as calls end (``gateway.observe.live``).
- ``GET /admin/api/files``, ``GET|PUT /admin/api/files/{path}``, ``POST /admin/api/files``,
  ``POST /admin/api/check``: the definitions files (``edit``).
- ``GET /admin/api/connections``, ``DELETE /admin/api/connections/{name}?person=``: people's own connections to
  upstreams, listed without their tokens, and ended (``connections``).

``200`` for a reload that built (``changed`` says whether a new catalog is served), ``422`` for one that failed,
with every problem as file:line:col while the last good catalog keeps serving. Reloads and edits asked for here
are ``admin`` events (``gateway.events``), named by the key that asked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from ...observe.live import STOP
from ...runtime.gateway import Gateway
from ..http.auth import Caller, authenticate
from ..http.errors import dumps, error_response, json_response
from . import approvals as admin_approvals
from . import catalog as admin_catalog
from . import connections as admin_connections
from . import edit as admin_edit
from . import held as admin_held
from .files import DefinitionsFiles, NotFound
from .signin import ConsoleSignIn, SignInUnavailable
from .writes import TOKEN_HEADER, WriteGuard

STATIC = Path(__file__).resolve().parents[2] / "static" / "admin"
HEARTBEAT_S = 15.0  # a comment line on an idle stream: proxies keep it open, a client that left is noticed
# The console holds an admin key: nothing but its own files may run in it, and no other site may frame it.
# With a sign-in at the identity provider, the page may also post to its token endpoint: that one origin
# (``signin.origin_of``), never a wildcard.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'{connect}; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": CSP.format(connect=""),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
ASSET_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}  # revalidated by ETag


class ConsoleAssets(StaticFiles):
    """The console's files: no directory listing (``html=False``), revalidated on each load (an upgrade of the
    gateway changes them), never sniffed as another type."""

    def file_response(self, full_path: Any, stat_result: Any, scope: Scope, status_code: int = 200) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(ASSET_HEADERS)
        return response


def routes(gateway: Gateway) -> list[BaseRoute]:
    console = AdminConsole(gateway)
    api = "/admin/api"
    return [
        Route("/admin/reload", console.reload, methods=["POST"]),
        Route("/admin/", console.page, methods=["GET"]),
        Mount("/admin/static", app=ConsoleAssets(directory=STATIC, check_dir=False)),
        Route(f"{api}/token", console.token, methods=["GET"]),
        Route(f"{api}/signin", console.signin, methods=["GET"]),
        Route(f"{api}/overview", console.overview, methods=["GET"]),
        Route(f"{api}/tools", console.tools, methods=["GET"]),
        Route(f"{api}/tools/{{tool_id}}", console.tool, methods=["GET"]),
        Route(f"{api}/problems", console.problems, methods=["GET"]),
        Route(f"{api}/reloads", console.reloads, methods=["GET"]),
        Route(f"{api}/calls", console.calls, methods=["GET"]),
        Route(f"{api}/calls/stream", console.stream, methods=["GET"]),
        Route(f"{api}/calls/{{call_id}}", console.call, methods=["GET"]),
        *admin_edit.routes(gateway, console.files, admin=console.admin),
        *admin_connections.routes(gateway, admin=console.admin),
        *admin_approvals.routes(gateway, admin=console.admin, writes=console.writes),
        *admin_held.routes(gateway, console.files, admin=console.admin),
    ]


class AdminConsole:
    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.settings = gateway.settings
        self.files = DefinitionsFiles.of(gateway.settings)
        self.writes = WriteGuard(gateway.settings.auth_enabled)
        self.sign_in = ConsoleSignIn(gateway.settings.oauth)

    async def admin(self, request: Request, *, write: bool = False) -> Caller:
        """The caller, if it may use admin operations (else 401/403) — and, for a ``write``, if the request is one
        no web page could have sent (else 403/415)."""
        client = request.client.host if request.client else None
        caller = await authenticate(self.gateway, request.headers, client)
        caller.check_admin()
        if write:
            self.writes.check(request)
        return caller

    async def token(self, request: Request) -> Response:
        await self.admin(request)
        return json_response({"header": TOKEN_HEADER, "token": self.writes.token})

    async def signin(self, request: Request) -> Response:
        """Public: how to sign in at the identity provider (``signin``)."""
        try:
            return json_response(await self.sign_in.answer())
        except SignInUnavailable as exc:  # the issuer's trouble, not a bug: said, not logged as one
            return error_response(exc.status, str(exc))

    async def reload(self, request: Request) -> Response:
        caller = await self.admin(request, write=True)
        self.gateway.events.emit("admin", action="reload", caller=caller.name, detail={})
        outcome = await self.gateway.reload()
        return json_response(outcome.as_dict(), 200 if outcome.ok else 422)

    async def page(self, request: Request) -> Response:
        """The console's page: static, no key needed to load it (it asks for one)."""
        index = STATIC / "index.html"
        if not index.is_file():
            raise NotFound("The admin console's page is not installed.")
        headers = PAGE_HEADERS
        token_origin = await self.sign_in.token_origin()
        if token_origin is not None:
            headers = {**PAGE_HEADERS, "Content-Security-Policy": CSP.format(connect=" " + token_origin)}
        return FileResponse(index, headers=headers, media_type="text/html; charset=utf-8")

    async def overview(self, request: Request) -> Response:
        caller = await self.admin(request)
        catalog = self.gateway.catalog
        reason = await run_in_threadpool(self.files.read_only_reason)
        per_plugin = admin_catalog.tools_per_plugin(catalog)
        return json_response({
            "version": catalog.version, "tools": len(catalog.tools), "definitions": str(self.settings.definitions),
            "read_only": reason is not None, "read_only_reason": reason, "auth": self.settings.auth_enabled,
            "user": caller.identity.user if caller.identity is not None else None,  # signed in at the issuer
            "last_reload": self.gateway.last_reload.as_dict(),
            "plugins": [{"name": p.name, "distribution": p.distribution, "version": p.version,
                         "tools": per_plugin.get(p.name, 0)} for p in catalog.plugins],
            "sources": list(catalog.sources),  # upstreams as /status shows them: health, why one is down or stale
        })

    async def tools(self, request: Request) -> Response:
        await self.admin(request)
        catalog = self.gateway.catalog
        # Off the event loop: the first listing of a catalog finds every tool's line in its file.
        body = await run_in_threadpool(catalog.memo, ("admin", "tools-body"),
                                       lambda: dumps({"tools": admin_catalog.tools(catalog)}))
        return Response(body, media_type="application/json")

    async def tool(self, request: Request) -> Response:
        await self.admin(request)
        catalog = self.gateway.catalog
        tool = catalog.get(request.path_params["tool_id"])  # an admin sees every tool the console lists
        figures = admin_catalog.figures_of(self.gateway, tool.id)
        # Off the event loop: the first rendering in each format, and reading its file for the line.
        return json_response(await run_in_threadpool(admin_catalog.tool_detail, tool, catalog, figures))

    async def problems(self, request: Request) -> Response:
        await self.admin(request)
        last = self.gateway.last_reload
        shown = await run_in_threadpool(admin_catalog.problems, (*last.problems, *last.warnings),
                                        str(self.settings.definitions), self.settings.max_file_bytes)
        return json_response({"last_reload": last.as_dict(), "problems": shown})

    async def reloads(self, request: Request) -> Response:
        await self.admin(request)
        return json_response({"reloads": self._observer("reloads").history()})

    def _observer(self, name: str) -> Any:
        """The console's own consumer of the event stream (``gateway.observe.<name>``)."""
        observer = self.gateway.observers.get(name)
        if observer is None:
            raise NotFound(f"The console's '{name}' view is not running on this gateway.")
        return observer

    async def calls(self, request: Request) -> Response:
        await self.admin(request)
        return json_response({"calls": self._observer("live").recent()})

    async def call(self, request: Request) -> Response:
        await self.admin(request)
        call_id = request.path_params["call_id"]
        record = self._observer("live").get(call_id)
        if record is None:
            raise NotFound(f"No recent call {call_id!r}: the console keeps the last calls only.")
        return json_response(await run_in_threadpool(record.detail))

    async def stream(self, request: Request) -> Response:
        """``text/event-stream``: ``event: call`` with a call's summary as each call ends; a comment every
        ``HEARTBEAT_S`` seconds; ``event: dropped`` when this reader fell behind and missed some."""
        await self.admin(request)
        live = self._observer("live")

        async def events() -> AsyncIterator[bytes]:
            subscription = live.subscribe()  # here, not before: a response never started leaves no subscriber
            try:
                yield b": calls as they end\n\n"  # sends the head now: the reader knows it is connected
                while True:
                    summary = await subscription.next(HEARTBEAT_S)
                    if summary is STOP:
                        return
                    if subscription.dropped:
                        missed, subscription.dropped = subscription.dropped, 0
                        yield b"event: dropped\ndata: " + dumps({"dropped": missed}) + b"\n\n"
                    if summary is None:
                        yield b": heartbeat\n\n"
                    else:
                        yield b"event: call\ndata: " + dumps(summary) + b"\n\n"
            finally:
                live.unsubscribe(subscription)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
