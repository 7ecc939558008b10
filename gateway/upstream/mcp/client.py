"""One session with an upstream MCP server through the official client: entering ``mcp.Client`` for an
``UpstreamConfig`` (streamable HTTP with its headers, or a spawned stdio server with its env, secrets filled in
at connect time), listing every page of its tools, and its failures in words that name it.

``FastSession`` and ``finish_call`` are what ``gateway.upstream.mcp.fastcall`` (a ``tools/call`` posted by the gateway
itself) takes from an entered client: its stamp, callbacks and result validators. They use names private to the
SDK (``mcp`` is pinned to 2.3.x in pyproject.toml for this and the server's own two).

``gateway.upstream.mcp.pool`` holds such sessions for the gateway; ``call_once`` (and ``gateway.upstream.mcp.listing.list_once``)
open one for a single request where no gateway runs (the first build, before the server's loop starts; the CLI).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import methods as wire_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ... import secrets as secret_store
from ...schema.argerrors import shape_problem
from . import relay as mcp_relay
from .config import UpstreamConfig
from .refusals import STAND_INS, Heard, HttpRefused, Refusal

SSE_READ_TIMEOUT_S = 300.0  # a listen or GET stream stays open this long without a byte (the SDK's default)
CALL_READ_TIMEOUT_S = 3600.0  # the tool's own timeout (invoke) bounds a call; this only lifts the client's
MAX_PAGES = 100  # a paginator that never ends cannot hold a build


class UpstreamUnavailable(Exception):
    """The upstream cannot be reached now; the message names it and says why (never a secret). ``refusal``: the
    HTTP error status it answered, if that is why."""

    def __init__(self, message: str, refusal: Refusal | None = None):
        super().__init__(message)
        self.refusal = refusal


class ListingTooLarge(UpstreamUnavailable):
    """The upstream lists more than its source may bring (``ListingBounds``); the message names the setting."""


def counted(config: UpstreamConfig, tools: int) -> None:
    """``ListingTooLarge`` once the pages read so far list more tools than the source may bring."""
    if tools > config.bounds.tools:
        raise ListingTooLarge(config.bounds.too_many(config.label))


def shaped(config: UpstreamConfig, tools: Iterable[mcp_types.Tool]) -> None:
    """``ListingTooLarge`` for a tool whose schemas nest deeper than the source may bring (or hold a number JSON
    has not): serialising it fails (pydantic, json), and it would fail every build and reconnect of the session."""
    for tool in tools:
        for schema in (tool.input_schema, tool.output_schema):
            problem = shape_problem(schema, config.bounds.depth) if schema is not None else None
            if problem is not None:
                raise ListingTooLarge(config.bounds.too_deep(config.label, tool.name, problem))


def fingerprint(tools: list[mcp_types.Tool]) -> str:
    return listing_digest(tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools)


def listing_digest(dumped: Iterable[Any]) -> str:
    """A digest of a listing's tools (as JSON data), serialised one by one: ``json.dumps`` of a whole listing is
    one call that holds the GIL, so the event loop too, for as long as it runs (half a second for 100,000 tools)."""
    digest = hashlib.sha256()
    for tool in dumped:
        digest.update(json.dumps(tool, sort_keys=True).encode())
    return digest.hexdigest()


def _leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the SDK's task groups wrap)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def refusal_of(exc: BaseException) -> Refusal | None:
    """The HTTP error status behind ``exc``, unless it only said the session was forgotten (a restart)."""
    exc = _leaf(exc)
    return exc.refusal if isinstance(exc, HttpRefused) and not forgotten(exc) else None


def unreachable(config: UpstreamConfig, exc: BaseException) -> UpstreamUnavailable:
    """``exc`` (a failure to connect, list or call) as the ``UpstreamUnavailable`` naming the upstream."""
    refused = refusal_of(exc)
    if refused is not None:
        return UpstreamUnavailable(f"{config.label} refused the gateway: {refused}", refused)
    return UpstreamUnavailable(f"{config.label} is unreachable: {reason(exc)}")


def reason(exc: BaseException) -> str:
    """What went wrong, in words."""
    exc = _leaf(exc)
    if (refused := refusal_of(exc)) is not None:
        return str(refused)
    if isinstance(exc, httpx2.ConnectError):
        return "could not connect (is it running?)"
    if isinstance(exc, httpx2.TimeoutException | TimeoutError) or (
            isinstance(exc, MCPError) and exc.error.code == mcp_types.REQUEST_TIMEOUT and not forgotten(exc)):
        # the client gave up waiting (the TypeScript SDK's "Session not found" has that code too)
        return "it did not answer in time"
    if isinstance(exc, httpx2.HTTPError):
        return f"HTTP error: {type(exc).__name__}: {exc}"
    if isinstance(exc, MCPError):
        return f"it answered with error {exc.error.code}: {exc.error.message}"
    if isinstance(exc, secret_store.SecretsMissing):
        return str(exc)
    if isinstance(exc, OSError):
        return f"could not start it: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


# How each SDK's server answers a request on a session it does not know (it restarted, or expired it): the Python
# SDK's HTTP 404, which its client reports as "Session terminated" (-32600) or as the server's own error ("Session
# not found"); the TypeScript SDK's 404 "Session not found" (-32001) and, in server-everything and the SDK's older
# examples, HTTP 400 "Bad Request: No valid session ID provided" (-32000, which the Python client also uses for a
# closed connection: the words tell them apart).
_FORGOTTEN_CODES = frozenset({mcp_types.INVALID_REQUEST, mcp_types.CONNECTION_CLOSED, mcp_types.REQUEST_TIMEOUT})
_FORGOTTEN_WORDS = ("terminated", "not found", "expired", "invalid", "no valid session")


def forgotten(exc: MCPError) -> bool:
    """Whether the upstream refused a request for not knowing its session (see ``_FORGOTTEN_WORDS``)."""
    message = exc.error.message.lower()
    return exc.error.code in _FORGOTTEN_CODES and "session" in message and any(
        word in message for word in _FORGOTTEN_WORDS)


async def all_tools(client: Client, config: UpstreamConfig) -> list[mcp_types.Tool]:
    """Every page of the listing through the SDK's session, which reads and parses each page whole on its loop
    (``gateway.upstream.mcp.listing`` reads a streamable-HTTP session's pages itself, within ``source_max_bytes``)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        counted(config, len(tools))
        shaped(config, page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@contextlib.asynccontextmanager
async def connected(config: UpstreamConfig, on_message: Callable[[Any], Any] | None = None,
                    on_http: Callable[[httpx2.AsyncClient], None] | None = None,
                    relays: bool = False, auth: httpx2.Auth | None = None,
                    relay_key: Hashable | None = None) -> AsyncIterator[Client]:
    """An entered ``mcp.Client`` for ``config``: enter and leave it in one task. ``on_http`` is shown the HTTP
    client of a streamable-HTTP session before the SDK uses it (the fast path posts on it too). ``relays``: what
    the upstream sends during a call goes to the calling client (``gateway.upstream.mcp.relay``), and the session declares
    the elicitation and sampling capabilities (its calls' channels found under ``relay_key``, by default the
    config). ``auth``: the source's OAuth (``gateway.upstream.oauth``) on every request of the session's HTTP
    client."""
    headers, env = config.rendered()
    relay = mcp_relay.Relay(config if relay_key is None else relay_key) if relays else None
    common: dict[str, Any] = {"mode": "auto", "cache": None, "read_timeout_seconds": config.connect_timeout_s,
                              "message_handler": on_message if relay is None else relay.handling(on_message),
                              "client_info": mcp_types.Implementation(name="tool-gateway", version="1"),
                              **({} if relay is None else relay.callbacks())}
    if config.url is None:
        assert config.command is not None
        parameters = StdioServerParameters(command=config.command, args=list(config.args), env=env or None,
                                           cwd=config.cwd)
        async with Client(parameters, **common) as client:
            yield client
        return
    timeout = httpx2.Timeout(config.connect_timeout_s, read=SSE_READ_TIMEOUT_S)
    heard = Heard(headers.values())
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks={"response": [heard]},
                                  auth=auth) as http:
        if on_http is not None:
            on_http(http)
        async with contextlib.AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(
                    Client(streamable_http_client(config.url, http_client=http), **common))
            except Exception as exc:
                # The SDK says "Server returned an error response": the status it met says what happened.
                leaf = _leaf(exc)
                if heard.last is None or refusal_of(exc) is not None or not (
                        heard.last.credentials or not isinstance(leaf, MCPError) or leaf.error.message in STAND_INS):
                    raise  # nothing heard, or the upstream's own JSON-RPC error says what happened
                code, message = ((leaf.error.code, leaf.error.message) if isinstance(leaf, MCPError)
                                 else (mcp_types.INTERNAL_ERROR, str(leaf)))
                raise HttpRefused(heard.last, code, message) from exc
            yield client


async def call_once(config: UpstreamConfig, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
    """One call through a session of its own: where no gateway runs (the CLI's ``call``)."""
    try:
        async with connected(config) as client:
            return await client.call_tool(name, arguments, read_timeout_seconds=CALL_READ_TIMEOUT_S)
    except MCPError as exc:
        if refusal_of(exc) is None:
            raise
        raise unreachable(config, exc) from None
    except Exception as exc:  # noqa: BLE001 — said in words naming the upstream
        raise unreachable(config, exc) from None


@dataclass(frozen=True)
class _Inbound:
    """The dispatch context the session's handlers read (only the id of a server→client request)."""

    request_id: Any


class FastSession:
    """An entered client's session as ``gateway.upstream.mcp.fastcall.Session``: how it stamps a request, answers a
    server→client request and hears a notification, exactly as for the messages it carries itself."""

    def __init__(self, client: Client, session_id: str | None):
        self.client = client
        # The ClientSession itself, not ``client.session``: once a reconnect has closed the client, that raises
        # RuntimeError, and a call whose answer was on its way still needs the session's stamps and validators.
        self.session = client.session
        self.session_id = session_id
        self.protocol_version = client.protocol_version
        self.modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS

    def stamp(self, message: dict[str, Any]) -> dict[str, str]:
        mcp_relay.stamp(message)
        options: dict[str, Any] = {}
        self.session._stamp(message, options)
        return options.get("headers", {})

    async def answer(self, request_id: Any, method: str, params: Any) -> dict[str, Any]:
        return await self.session._on_request(_Inbound(request_id), method, params)

    async def notified(self, method: str, params: Any) -> None:
        await self.session._on_notify(_Inbound(None), method, params)


def entered(client: Client) -> ClientSession | None:
    """The client's session while it is entered; None once it has left its context (a reconnect closed it)."""
    try:
        return client.session
    except RuntimeError:
        return None


async def finish_call(client: Client, session: ClientSession, name: str, arguments: dict[str, Any],
                      raw: dict[str, Any]) -> mcp_types.CallToolResult:
    """The result of a ``tools/call`` the fast path made on ``session`` (``client``'s, which a reconnect may have
    closed since), through the steps the SDK's own call takes after its answer arrives
    (``ClientSession.send_request``, ``call_tool``, ``Client.call_tool``): the revision's result check, the typed
    result, the tool's output schema, input-required rounds (sent by the SDK)."""
    _clamp_inbound_ttl(raw)
    version = session.protocol_version or "2025-11-25"
    with contextlib.suppress(KeyError):
        wire_methods.validate_server_result("tools/call", version, raw)
    if not (foreign := _later_revision_fields("tools/call", version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    result = session._call_tool_adapter.validate_python(raw, by_name=False)
    if isinstance(result, mcp_types.CallToolResult):
        if not result.is_error:
            await session.validate_tool_result(name, result)
        return result

    async def send(responses: Any, state: str | None) -> Any:
        return await session.call_tool(name, arguments, read_timeout_seconds=CALL_READ_TIMEOUT_S,
                                       input_responses=responses, request_state=state, allow_input_required=True)

    # An InputRequiredResult (our client claims no extension result shapes): the SDK's driver runs its rounds, on
    # the client, so only while it is entered.
    if entered(client) is not session:
        raise MCPError(code=mcp_types.CONNECTION_CLOSED, message="Connection closed")
    return await client._drive_input_required(result, send)
