"""What the MCP fast path (``mcp.fast``) reads of a request, and how it writes an answer, as the SDK would.

- which requests are plain enough for it: ``request_of`` (one JSON-RPC request of a fast method, nothing else in
  the envelope), ``plain_post`` (the Content-Type and Accept the SDK's checks take), ``duplicated`` routing
  headers;
- the SDK's own validators (``Types``, imported in a thread at start) and the params model its handler gets
  (``validated``);
- the answer: a call result shaped as the SDK's result schema shapes it (``call_shaped``), request ids as its
  dispatcher correlates them (``coerce_id``), JSON bytes (``to_json``), and the JSON-RPC error codes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from starlette.types import Scope

from ..http.errors import dumps

FAST_METHODS = frozenset({"tools/call", "tools/list"})
# JSON-RPC's codes, and the SDK's answer to a cancelled 2025-era request (mcp.server.streamable_http).
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32602, -32603
REQUEST_CANCELLED = -32800
URL_ELICITATION_REQUIRED = -32042  # 2025-11-25: the client's user must open a URL first
MODERN_ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400}  # else 200 (mcp.shared.inbound)
ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})
ROUTING_HEADERS = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
JSON = "application/json"
JSON_BYTES = JSON.encode()
CALL_KEYS = frozenset({"content", "isError", "resultType", "structuredContent"})
TEXT_KEYS = frozenset({"type", "text"})
# Revisions whose result schema shapes a call result as call_shaped does (test_mcp_fast compares both), and
# whether it keeps ``resultType``; any other revision's results go through the schema itself.
CALL_SHAPES = {"2025-11-25": False, "2026-07-28": True}


class ProtocolError(Exception):
    """A JSON-RPC error a handler answers with (the SDK path raises it as its ``MCPError``)."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True)
class Types:
    """What the fast path needs of ``mcp_types`` (imported in a thread at start, ~0.3 s)."""

    validate: Any  # methods.validate_client_request
    serialize: Any  # methods.serialize_server_result
    params: dict[str, Any]  # method -> the params model the SDK hands its handler
    handshake: frozenset[str]
    modern: frozenset[str]
    version_key: str
    capabilities_key: str
    server_info_key: str
    implementation: Any
    metas: dict[tuple[str, bytes], dict[str, Any]] = field(default_factory=dict)  # judged _meta values (validated)


def import_types() -> Types:
    import mcp_types
    from mcp_types import methods, version

    return Types(methods.validate_client_request, methods.serialize_server_result,
                 {"tools/call": mcp_types.CallToolRequestParams, "tools/list": mcp_types.PaginatedRequestParams},
                 frozenset(version.HANDSHAKE_PROTOCOL_VERSIONS), frozenset(version.MODERN_PROTOCOL_VERSIONS),
                 mcp_types.PROTOCOL_VERSION_META_KEY, mcp_types.CLIENT_CAPABILITIES_META_KEY,
                 mcp_types.SERVER_INFO_META_KEY, mcp_types.Implementation)


def call_shaped(version: str, result: dict[str, Any]) -> dict[str, Any] | None:
    """What the SDK's result schema makes of a ``ToolHandlers.call_result`` (plain text blocks, ``isError``, an object
    or None as ``structuredContent``), without validating it again (~25 us a call): None values dropped, and
    ``resultType`` on the handshake revision. None for anything else — other blocks (an image, a text block with
    annotations) included: then the schema itself shapes it.
    test_mcp_fast compares this with the SDK's answers."""
    if version not in CALL_SHAPES or result.keys() - CALL_KEYS:
        return None
    structured = result.get("structuredContent")
    content = result.get("content")
    if (structured is not None and type(structured) is not dict) or type(result.get("isError")) is not bool or not (
            type(content) is list and all(type(item) is dict and item.keys() == TEXT_KEYS and item["type"] == "text"
                                          and type(item["text"]) is str for item in content)):
        return None
    keep_type = CALL_SHAPES[version]
    return {key: value for key, value in result.items() if value is not None and (keep_type or key != "resultType")}


def request_of(message: dict[str, Any]) -> tuple[Any, str, Any] | None:
    """(id, method, params) of a plain single request for the fast path, else None."""
    method = message.get("method")
    # A method may be any JSON value (a list is unhashable: no set lookup before its type is known).
    if type(method) is not str or method not in FAST_METHODS or message.keys() - ENVELOPE \
            or message.get("jsonrpc") != "2.0":
        return None
    request_id = message.get("id")
    if type(request_id) is int:
        if not -(2 ** 63) <= request_id < 2 ** 64:  # what orjson writes
            return None
    elif type(request_id) is not str:
        return None
    params = message.get("params")
    if "params" in message and type(params) is not dict:
        return None
    return request_id, method, params


def plain_post(headers: Mapping[str, str]) -> bool:
    """``Content-Type: application/json`` (as both the SDK's checks read it) and an ``Accept`` taking JSON (its
    ``check_accept_headers``)."""
    content_type = headers.get("content-type")
    if content_type is None or not content_type.startswith(JSON) or content_type.partition(";")[0].strip() != JSON:
        return False
    return bool(_accepted(headers) & {"*/*", JSON, "application/*"})


def accepts_sse(headers: Mapping[str, str]) -> bool:
    """Whether the ``Accept`` takes an SSE stream (as the SDK's ``check_accept_headers`` reads it)."""
    return bool(_accepted(headers) & {"*/*", "text/event-stream", "text/*"})


def _accepted(headers: Mapping[str, str]) -> set[str]:
    return {part.strip().split(";")[0].strip().lower() for part in headers.get("accept", "").split(",")}


def duplicated(scope: Scope, names: tuple[bytes, ...]) -> bool:
    seen = [name for name, _ in scope["headers"] if name in names]
    return len(seen) != len(set(seen))


class PlainCall(NamedTuple):
    """The params of a plain ``tools/call`` — a name, an arguments object or none, and ``_meta`` or none, nothing
    else — as the handler reads them (``name``, ``arguments``, ``meta``), without the SDK's params models
    (checking and building them cost ~9 µs a call; ``model_construct`` ~20). Every revision's params model takes
    a string name and a JSON object of arguments as they are; ``_meta`` is judged by the SDK itself, once per
    distinct value (``Types.metas``). test_mcp_messages compares the two readings."""

    name: str
    arguments: dict[str, Any] | None
    meta: dict[str, Any] | None = None  # as the SDK's model holds it (it renames keys: progressToken)


PLAIN_CALL_KEYS = frozenset({"name", "arguments"})
ENVELOPED_CALL_KEYS = frozenset({"name", "arguments", "_meta"})
METAS_KEPT = 256  # distinct _meta values judged (a client sends the same one on every call, bar a progress token)
META_BYTES_KEPT = 1024  # JSON bytes of a kept value: 256 kept values of 1 KiB of empty objects hold 5.6 MiB


def validated(types: Types, method: str, version: str, params: dict[str, Any] | None) -> Any:
    """The params model the SDK would hand its handler (for a plain call, ``PlainCall``), or None where the SDK
    would refuse them (it answers)."""
    if method == "tools/call" and params is not None and type(params.get("name")) is str:
        arguments = params.get("arguments")
        if arguments is None or type(arguments) is dict:
            keys = params.keys()
            if keys <= PLAIN_CALL_KEYS:
                if version in types.handshake:  # 2026-07-28 requires _meta: left to the SDK to refuse
                    return PlainCall(params["name"], arguments)
            elif keys <= ENVELOPED_CALL_KEYS:
                meta = _judged_meta(types, version, params["_meta"])
                if meta is not None:
                    return PlainCall(params["name"], arguments, meta)
    try:
        types.validate(method, version, params)
        return types.params[method].model_validate({} if params is None else params, by_name=False)
    except (KeyError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


def _judged_meta(types: Types, version: str, meta: Any) -> dict[str, Any] | None:
    """A call's ``_meta`` as the SDK's params model holds it, when the SDK accepts it on ``version``; None when it
    does not, or for a value orjson cannot write (then the whole params go through the SDK's models)."""
    if type(meta) is not dict:
        return None
    try:
        key = (version, orjson.dumps(meta))
    except (TypeError, orjson.JSONEncodeError):
        return None
    kept = types.metas.get(key)
    if kept is not None:
        return kept
    try:
        probe = {"name": "", "_meta": meta}
        types.validate("tools/call", version, probe)
        judged = types.params["tools/call"].model_validate(probe, by_name=False).meta
    except (KeyError, ValueError):
        return None
    if type(judged) is not dict:
        return None
    # Not kept when its JSON holds null: orjson writes an infinite number (JSON's 1e400) as null too, so the key
    # would name two values. Judged afresh each time instead (a progress token "null-1" included).
    if len(key[1]) <= META_BYTES_KEPT and b"null" not in key[1]:
        if len(types.metas) >= METAS_KEPT:
            types.metas.clear()
        types.metas[key] = judged
    return judged


def coerce_id(request_id: Any) -> Any:
    """A request id as the SDK's dispatcher correlates it: "7" and 7 are one id."""
    if isinstance(request_id, str):
        with contextlib.suppress(ValueError):
            return int(request_id)
    return request_id


def to_json(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):  # an integer past 64 bits, a lone surrogate: the slow way
        return dumps(value)
