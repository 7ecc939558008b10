"""``POST /v1/chat/completions`` (OpenAI-compatible, JSON or SSE) and ``GET /v1/models``: the gateway's LLM loop.

The request is a Chat Completions body; ``model`` names a configured provider (``default``) or a provider and
a model (``default/gpt-4o``). The extension object ``gateway`` chooses tools and where they run (see
``gateway.loop.request``). The response is a Chat Completions body plus ``tool_executions``, the trace of the
tools run in this request (see ``gateway.loop.trace``), and with ``tool_selection`` ``tools_offered``: the tools the
model was offered and why (``gateway.loop.selection``). When tools are handed back to the caller, the message
holds them as ordinary ``tool_calls`` with ``finish_reason: "tool_calls"``; the caller runs them and sends the
conversation back with ``role: "tool"`` results (optionally ``"is_error": true``), and the loop goes on.

Streaming (``"stream": true``) sends ``chat.completion.chunk`` events: the text as the model writes it, after
each round of tools a chunk with no choices and that round's ``tool_executions``, handed-back ``tool_calls``,
the finish reason, the usage when ``stream_options.include_usage`` is set, then ``[DONE]``.

Errors use OpenAI's shape and vocabulary, ``{"error": {"message", "type", "param", "code"}}``, so OpenAI clients
raise their usual exception (by status) and read the usual ``code``; see ``openai_error``. A failure after a
stream started arrives as one ``{"error": ...}`` event.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import loop as chat_loop  # its names are imported on first use: a gateway without chat never does
from ..errors import GatewayError, Unauthorized
from ..loop.config import LoopConfig, load_loop_config
from ..loop.request import parse_chat_request
from ..runtime.gateway import Gateway
from .http.auth import authenticate
from .http.bodies import parse_json, read_body
from .http.errors import dumps, internal_error, refused

if TYPE_CHECKING:
    from ..loop.loop import ChatLoop, Event, Finished

log = logging.getLogger("gateway.server")
# OpenAI's error types, as its API sends them. The documented Error object is {message, type, param, code}, code
# and param string-or-null (OpenAI's OpenAPI spec 2.3.0, components.schemas.Error). The values follow OpenAI's
# own answers (platform.openai.com/docs/guides/error-codes and bodies it sends): a wrong key 401
# {"type": "invalid_request_error", "code": "invalid_api_key"}, a missing key the same with "code": null, an
# unknown model 404 {"type": "invalid_request_error", "code": "model_not_found"}, a bad field 400 with "param"
# naming it, 5xx "server_error". Every client error is an invalid_request_error: the SDKs choose their exception
# class by status, and clients branch on code. (Should the chat path ever answer 429, OpenAI's is
# {"type": "requests", "code": "rate_limit_exceeded"}.)
CLIENT_ERROR = "invalid_request_error"
SERVER_ERROR = "server_error"


def routes(gateway: Gateway, loop: ChatLoop | None = None) -> list[Route]:
    """The chat routes; ``loop`` defaults to one built from ``gateway.settings`` (``SettingsInvalid`` if wrong)."""
    endpoint = ChatEndpoint(gateway, load_loop_config(gateway.settings), loop)  # wrong settings stop the start
    return [
        Route("/v1/chat/completions", endpoint.completions, methods=["POST"]),
        Route("/v1/models", endpoint.models, methods=["GET"]),
    ]


class ChatEndpoint:
    def __init__(self, gateway: Gateway, config: LoopConfig, loop: ChatLoop | None = None):
        self.gateway = gateway
        self.config = config
        if loop is not None or config.providers:  # chat is served: the loop is built now, its errors seen at start
            self.loop = loop or self._build()

    @functools.cached_property
    def loop(self) -> ChatLoop:
        """Without a provider the loop only answers that none is configured: it is imported and built by the first
        request that asks."""
        return self._build()

    def _build(self) -> ChatLoop:
        from ..loop.handoff import Handoffs

        # The hand-back history lives in the gateway's shared state, so a follow-up may reach any replica.
        return chat_loop.ChatLoop(self.config, self.gateway.http_client, handoffs=Handoffs(self.gateway.state),
                                  searches=self.gateway.searches)

    async def completions(self, request: Request) -> Response:
        try:
            caller = await authenticate(self.gateway, request.headers, request.client.host if request.client else None)
            chat = parse_chat_request(parse_json(await read_body(request, self.gateway.settings.max_body_bytes)),
                                      request.headers.get("x-conversation-id"))
            # The body's user, else X-User, when the caller may assert one (see Caller.user); else the key's name.
            user = caller.user(chat.user or request.headers.get("x-user"))
            # The provider's own `user` field (abuse monitoring) carries the same effective user, never a spoof.
            params = {**chat.params, "user": user} if "user" in chat.params and user else chat.params
            chat = dataclasses.replace(chat, user=user, params=params, traceparent=request.headers.get("traceparent"))
            turn = await self.loop.turn(self.gateway.catalog, chat, caller, caller.who())
            completion = Completion(turn.model, chat.include_usage)
            events = turn.run()
            if not chat.stream:
                finished = [event async for event in events if isinstance(event, chat_loop.Finished)][-1]
                return Response(dumps(completion.body(finished)), media_type="application/json")
            # Wait for the first event before answering, so a provider that is down still gets an HTTP status.
            first = await anext(events)
        except GatewayError as exc:
            return error_response(exc, request)
        except Exception as exc:  # noqa: BLE001 -- any bug becomes a logged 500 with a reference, never a traceback
            return Response(dumps({"error": _server_error(internal_error(request, exc))}), 500,
                            media_type="application/json")
        return StreamingResponse(completion.stream(request, first, events), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def models(self, request: Request) -> Response:
        """Every name ``model`` accepts (see ``gateway.loop.models``), each owned by the provider it selects."""
        try:
            await authenticate(self.gateway, request.headers, request.client.host if request.client else None)
        except GatewayError as exc:
            return error_response(exc, request)
        kinds = {name: provider.config.kind for name, provider in self.loop.providers.items()}
        data = [{"id": name, "object": "model", "created": 0,
                 "owned_by": f"tool-gateway ({kinds[provider]} provider '{provider}')"}
                for name, provider in self.loop.models.listing()]
        return Response(dumps({"object": "list", "data": data}), media_type="application/json")


class Completion:
    """One response's identity, rendered as a body or as chunks."""

    def __init__(self, model: str, include_usage: bool):
        self.id = "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model  # as asked; the provider's own name for it once known
        self.include_usage = include_usage

    def body(self, finished: Finished) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": finished.content or (
            None if finished.tool_calls else "")}
        if finished.tool_calls:
            message["tool_calls"] = [call.as_openai() for call in finished.tool_calls]
        body: dict[str, Any] = {
            "id": self.id, "object": "chat.completion", "created": self.created, "model": finished.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finished.finish_reason, "logprobs": None}],
        }
        if finished.usage:
            body["usage"] = dict(finished.usage)
        body["tool_executions"] = [e.as_dict() for e in finished.trace]
        if finished.offered is not None:
            body["tools_offered"] = [dict(offered) for offered in finished.offered]
        return body

    async def stream(self, request: Request, first: Event, events: AsyncGenerator[Event, None]
                     ) -> AsyncIterator[bytes]:
        yield self.chunk({"role": "assistant", "content": ""})
        try:
            # aclosing: a client that goes away stops the turn at once, with its upstream request and tool calls.
            async with aclosing(events):
                for chunk in self.render(first):
                    yield chunk
                async for event in events:
                    for chunk in self.render(event):
                        yield chunk
        except GatewayError as exc:
            yield _event({"error": openai_error(exc)})
            return
        except Exception as exc:  # noqa: BLE001 -- logged with its traceback by internal_error
            yield _event({"error": _server_error(internal_error(request, exc))})
            return
        yield b"data: [DONE]\n\n"

    def render(self, event: Event) -> list[bytes]:
        if isinstance(event, chat_loop.TextDelta):
            return [self.chunk({"content": event.text})]
        if isinstance(event, chat_loop.Executed):
            return [self.chunk(None, tool_executions=[e.as_dict() for e in event.executions])]
        assert isinstance(event, chat_loop.Finished)
        self.model = event.model
        chunks = []
        if event.tool_calls:
            calls = [{"index": i, **call.as_openai()} for i, call in enumerate(event.tool_calls)]
            chunks.append(self.chunk({"tool_calls": calls}))
        chunks.append(self.chunk({}, finish_reason=event.finish_reason))
        if event.offered is not None:
            chunks.append(self.chunk(None, tools_offered=[dict(offered) for offered in event.offered]))
        if self.include_usage:
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, **(event.usage or {})}
            chunks.append(self.chunk(None, usage=usage))
        return chunks

    def chunk(self, delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> bytes:
        """A ``chat.completion.chunk``; with ``delta`` None, a chunk without choices (usage, tool executions)."""
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason,
                                             "logprobs": None}]
        return _event({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                       "model": self.model, "choices": choices, **extra})


def error_response(exc: GatewayError, request: Request) -> Response:
    refused(request, exc)
    if exc.status >= 500:  # the provider failing, or none configured: the admin should hear of it
        log.warning("chat request failed: %s", exc)
    error = openai_error(exc)
    if isinstance(exc, Unauthorized) and request.headers.get("authorization"):
        error["code"] = "invalid_api_key"  # OpenAI's code for a wrong key; a missing one has none
    challenge = getattr(exc, "challenge", None) or ("Bearer" if exc.status == 401 else None)
    return Response(dumps({"error": error}), exc.status, media_type="application/json",
                    headers={"WWW-Authenticate": challenge} if challenge else None)


def openai_error(exc: GatewayError) -> dict[str, Any]:
    """OpenAI's error object for ``exc``. The loop's errors carry OpenAI's ``code`` and ``param`` where OpenAI
    has them (``InvalidRequest``, ``UnknownModel``) or the gateway's own code (provider failures, none
    configured); the gateway's other errors (body too large, ...) have neither: null."""
    return {"message": str(exc), "type": CLIENT_ERROR if exc.status < 500 else SERVER_ERROR,
            "param": getattr(exc, "param", None), "code": getattr(exc, "code", None)}


def _server_error(message: str) -> dict[str, Any]:
    return {"message": message, "type": SERVER_ERROR, "param": None, "code": None}


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + dumps(data) + b"\n\n"
