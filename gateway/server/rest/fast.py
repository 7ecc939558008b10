"""``POST /tools/{id}/call``: one REST call, answered by the Starlette route and, below Starlette, by the fast path.

``RestCalls.answer`` is the call itself (authenticate, find the tool, read and parse the body, build the context,
``invoke``, shape the answer); the route (``rest.RestApi.call_tool``) wraps what it answers in a ``Response``, and
``RestCalls.fast`` — called by ``front.Front`` for a request without ``Origin`` that passed its guard — sends
the same status, headers and bytes itself, without Starlette's per-request machinery (its exception and routing
layers, a ``Request``, a ``Response`` and a ``send`` wrapper per layer): about a fifth of a call's CPU.

What the fast path takes: a POST whose path the route's own pattern matches, with no ``root_path`` (behind a
proxy that sets one, the router strips it first). Everything else — other paths and methods, a browser's
request (``Origin``: CORS answers it) — goes to Starlette. A refusal (``GatewayError``: 401, 404, 413, 400) is
rendered by the app's own handler (``errors.on_gateway_error``, its ``auth_failure`` event included) and
anything unexpected propagates to Starlette's outermost middleware, as from the route. ``ENABLED`` is the
switch (``TOOL_GATEWAY_REST_FAST=0`` for a server process; tests compare both paths).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from starlette.requests import Request
from starlette.routing import compile_path
from starlette.types import Receive, Scope, Send

from ...context import CallContext
from ...errors import GatewayError
from ...invoke import invoke
from ...runtime.gateway import Gateway
from ...state.rate_limits import retry_after_seconds
from ..http.auth import authenticate
from ..http.bodies import first_headers, parse_json, receive_body
from ..http.errors import dumps, on_gateway_error
from ..http.sending import VARY_ORIGIN, adding

ENABLED = os.environ.get("TOOL_GATEWAY_REST_FAST", "1") != "0"
CALL_PATH = "/tools/{tool_id}/call"
# The route's own pattern and convertor: the fast path takes exactly the paths the route would.
_PATTERN, _, _CONVERTORS = compile_path(CALL_PATH)
_TOOL_ID = _CONVERTORS["tool_id"]
JSON_TYPE = (b"content-type", b"application/json")


class CallAnswer(NamedTuple):
    status: int
    body: bytes  # JSON
    headers: dict[str, str]  # besides Content-Length and Content-Type


class RestCalls:
    """The REST calls of one gateway."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.settings = gateway.settings

    async def answer(self, scope: Scope, receive: Receive, tool_id: str) -> CallAnswer:
        """Run one call: 200 with the result (``is_error`` for argument and tool failures), 429 with
        ``Retry-After`` and the result when a rate limit refused it, 202 with the approval's URL as ``Location``
        when it waits for a person's approval; a refusal raises its ``GatewayError``."""
        sent = first_headers(scope)
        client = scope.get("client")
        caller = await authenticate(self.gateway, sent, client[0] if client else None)
        catalog = self.gateway.catalog
        tool = caller.tool(catalog, tool_id)
        body = await receive_body(scope, receive, sent.get("content-length", ""), self.settings.max_body_bytes)
        arguments = parse_json(body) if body.strip() else None  # empty means no arguments
        session = sent.get("x-gateway-session")
        context = CallContext(
            conversation_id=sent.get("x-conversation-id"),
            user=caller.user(sent.get("x-user")),
            session=session,
            side="client" if session else "server",  # a named page runs scope-all tools
            surface="rest",
            **caller.who(),
            traceparent=sent.get("traceparent"),
        )
        result = await invoke(catalog, tool.id, arguments, context)
        if result.retry_after_s is not None:
            return CallAnswer(429, dumps({"error": result.text, "status": 429, "result": result.as_dict()}),
                              {"Retry-After": str(retry_after_seconds(result.retry_after_s))})
        if result.approval is not None:  # accepted, not run: it runs when called again once approved
            return CallAnswer(202, dumps(result.as_dict()), {"Location": str(result.approval["url"])})
        return CallAnswer(200, dumps(result.as_dict()), {})

    async def fast(self, scope: Scope, receive: Receive, send: Send, added: list[tuple[bytes, bytes]]) -> bool:
        """Answer a call below Starlette and say so; False (nothing done) for any other request. ``added``: the
        version headers ``Front`` adds to every answer."""
        if not ENABLED or scope["method"] != "POST" or scope.get("root_path"):
            return False
        match = _PATTERN.match(scope["path"])
        if match is None:
            return False
        try:
            answer = await self.answer(scope, receive, _TOOL_ID.convert(match["tool_id"]))
        except GatewayError as exc:  # as Starlette's exception middleware answers the route's refusals
            response = await on_gateway_error(Request(scope, receive), exc)
            await response(scope, receive, adding(send, added, vary_origin=True))
            return True
        # What the route's Response sends (its headers in its order), then what Front adds.
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers.items()]
        headers += [(b"content-length", b"%d" % len(answer.body)), JSON_TYPE, VARY_ORIGIN, *added]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})
        return True

