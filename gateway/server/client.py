"""The browser side of the gateway, under ``/client``: the runtime, the tools' scripts, the live bridge, the demo.

    GET /client/gateway-tools.js       the browser runtime (``gateway/static/gateway-tools.js``)
    GET /client/scripts/<tool id>.js   the script of a tool with a browser binding — only those are served
    WS  /client/bridge                 a live session: the page answers the calls ``gateway.runtime.bridge`` forwards
    GET /client/demo                   the demo page: a task form with a chat box whose tools read and fill it

None of these needs an API key: a browser cannot send one with ``<script src>`` or a WebSocket, the scripts are
code that every page using the tools runs anyway, and a bridge session only answers calls from callers that know
its random id. What keeps other web sites out is the Origin check (``http.origins``, applied by ``http.front.Front``,
which covers the WebSocket handshake too and never trusts the ``Host`` header) and ``http.cors.ClientCors``, which
answers CORS for the allowed origins and no others.

Scripts are cached by the catalog version: their ``ETag`` is the version, so a browser revalidates with one
conditional request and fetches again only after a reload changed the catalog.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..runtime.bridge import Bridge, Session, TooManySessions
from ..runtime.bridge_cluster import ClusterBridge
from ..runtime.gateway import Gateway
from .http.errors import error_response
from .http.etags import not_modified

log = logging.getLogger("gateway.server")
JAVASCRIPT = "text/javascript; charset=utf-8"


def routes(gateway: Gateway) -> list[BaseRoute]:
    """The ``/client`` routes; attaches a ``ClusterBridge`` (this process's ``Bridge``, reachable from every
    replica) to the gateway unless it has one."""
    if gateway.bridge is None:
        gateway.bridge = ClusterBridge(gateway, Bridge(max_per_client=gateway.settings.bridge_sessions_per_client,
                                                       events=gateway.events))
    client = ClientApi(gateway, gateway.bridge)
    return [
        Route("/client/gateway-tools.js", client.runtime, methods=["GET"]),
        Route("/client/scripts/{tool_id}.js", client.script, methods=["GET"]),
        Route("/client/demo", client.demo, methods=["GET"]),
        WebSocketRoute("/client/bridge", client.bridge_session),
    ]


class ClientApi:
    def __init__(self, gateway: Gateway, bridge: ClusterBridge):
        self.gateway = gateway
        self.cluster = bridge  # registers the sessions of this replica's bridge for the others
        self.bridge = bridge.local
        self.runtime_body = _static("gateway-tools.js")
        self.runtime_etag = '"' + hashlib.sha256(self.runtime_body).hexdigest()[:16] + '"'
        self.demo_body = _static("demo.html")

    async def runtime(self, request: Request) -> Response:
        headers = {"ETag": self.runtime_etag, "Cache-Control": "no-cache"}
        if not_modified(request, self.runtime_etag):
            return Response(status_code=304, headers=headers)
        return Response(self.runtime_body, headers=headers, media_type=JAVASCRIPT)

    async def script(self, request: Request) -> Response:
        """The script a browser-bound tool declares, read once per catalog; 404 for any other name."""
        catalog = self.gateway.catalog
        tool_id = request.path_params["tool_id"]
        tool = catalog.tools.get(tool_id)
        if tool is None or tool.script is None:
            return error_response(404, f"No tool '{tool_id}' with a browser script in this gateway.")
        try:
            body = catalog.memo(("client:script", tool.id), tool.script.read_bytes)
        except OSError:  # removed since the catalog was built; the next reload will say so
            return error_response(404, f"The script of tool '{tool.id}' is no longer on disk.")
        # The catalog version and the bytes served: a script edited before the reload that swaps the catalog
        # must not be cached under the old version's tag.
        digest = catalog.memo(("client:script-digest", tool.id), lambda: hashlib.sha256(body).hexdigest()[:12])
        headers = {"ETag": f'"{catalog.version}-{digest}"', "Cache-Control": "no-cache"}
        if not_modified(request, headers["ETag"]):
            return Response(status_code=304, headers=headers)
        return Response(body, headers=headers, media_type=JAVASCRIPT)

    async def demo(self, request: Request) -> Response:
        return Response(self.demo_body, headers={"Cache-Control": "no-cache"}, media_type="text/html; charset=utf-8")

    async def bridge_session(self, websocket: WebSocket) -> None:
        """One page's live session, from its connection to its end (which fails the calls still pending)."""
        try:
            session = self.bridge.connect(websocket.client.host if websocket.client else None)
        except TooManySessions as exc:
            log.warning("refused a browser session: %s", exc)
            # Accepted, then closed: a refused handshake would reach the page as a bare 1006 with no reason.
            await websocket.accept()
            await websocket.close(code=1013, reason=exc.reason)
            return
        await self.cluster.opened(session)  # before the page learns its id (its first frame, sent after accept)
        await websocket.accept()
        writer = asyncio.create_task(_write(websocket, session))
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                if message.get("text") is not None:
                    self.bridge.receive(session, message["text"])
        finally:
            self.bridge.disconnect(session)
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
            await self.cluster.closed(session)


async def _write(websocket: WebSocket, session: Session) -> None:
    while True:
        frame = await session.outbox.get()
        try:
            await websocket.send_text(frame)
        except Exception:  # the page went away mid-send; the reader sees the disconnect and ends the session
            log.debug("bridge: could not send to a closing page", exc_info=True)
            return


def _static(name: str) -> bytes:
    return files("gateway").joinpath("static", name).read_bytes()
