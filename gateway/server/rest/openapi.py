"""``GET /openapi.json``: the OpenAPI 3.1 document of the REST API (REST, admin and chat routes).

The document describes the HTTP surface only — request and response shapes, every status a route answers —
never the catalog: it is the same for every caller and names no tool, so it is public like ``/healthz``.
(Tools are described by ``GET /tools``; their argument schemas are data, not API.) MCP (``/mcp``), the
browser runtime (``/client/…``) and the demo API are other protocols and are not part of it.

It is built once per app from the settings (the security scheme appears when API keys are configured) and
sent as bytes. ``tests/fuzz/test_openapi.py`` runs schemathesis against it, so a route that answers a status
or a shape not written here fails CI.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ... import __version__
from ...formats import FORMATS, SEARCHES
from ...loop.request import ROLES
from ...runtime.gateway import Gateway
from ...search import MAX_K
from ...settings import Settings
from ..http.errors import dumps

JSON = "application/json"


def routes(gateway: Gateway) -> list[Route]:
    body = dumps(document(gateway.settings))

    async def openapi(request: Request) -> Response:
        return Response(body, media_type=JSON)

    return [Route("/openapi.json", openapi, methods=["GET"])]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description, "content": {JSON: {"schema": schema}}}
    if headers:
        answer["headers"] = headers
    return answer


def _errors(*statuses: int, shape: str = "Error") -> dict[str, Any]:
    """The error answers of a route, in the REST shape or (``shape="ChatError"``) OpenAI's."""
    return {str(status): _json(_ref(shape), ERROR_MEANINGS[status]) for status in statuses}


ERROR_MEANINGS = {
    400: "The request is malformed (body not JSON, not UTF-8, duplicate keys, an unknown query value, ...).",
    401: "Missing or invalid API key (auth on).",
    403: "The key may not do this, or the request's Origin is not allowed.",
    404: "No such tool (or one the key may not use: the answer is the same), or no such model.",
    413: "The request body is over max_body_bytes.",
    421: "With auth off, a Host that is not a loopback name.",
    502: "The LLM provider failed.",
    503: "No LLM provider is configured.",
    504: "The LLM provider did not answer in time.",
}
# Every route sits behind the Origin guard (front.Front).
GUARDED = (403, 421)
ETAG = {"ETag": {"description": "The catalog version; send it back as If-None-Match.", "schema": {"type": "string"}}}
IF_NONE_MATCH = {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"},
                 "description": "An ETag from an earlier answer: 304 while the catalog is unchanged."}
TOOL_ID = {"name": "tool_id", "in": "path", "required": True, "schema": {"type": "string"}}
NOT_MODIFIED = {"304": {"description": "The catalog has not changed since the ETag given.", "headers": ETAG}}


def _call_headers() -> list[dict[str, Any]]:
    described = {
        "X-Conversation-Id": "Conversation the call belongs to (passed to tools that declare it).",
        "X-User": "The user to act for; honoured with auth off or for keys with may_assert_user.",
        "X-Gateway-Session": "A browser bridge session: tools of scope all run in that page.",
    }
    return [{"name": name, "in": "header", "required": False, "schema": {"type": "string"}, "description": text}
            for name, text in described.items()]


def _paths(settings: Settings) -> dict[str, Any]:
    auth = (401,) if settings.auth_enabled else ()
    tool_listing = {"oneOf": [_ref("ToolList"), _ref("FormattedToolList")]}
    fmt = {"name": "format", "in": "query", "required": False, "schema": {"enum": list(FORMATS)},
           "description": "A provider's declaration format instead of the gateway's own entries."}
    filters = [{"name": name, "in": "query", "required": False, "explode": True,
                "schema": {"type": "array", "items": {"type": "string"}},
                "description": f"Only tools in these {name}s (repeat it, or separate with commas)."}
               for name in ("toolset", "tag")]
    return {
        "/healthz": {"get": {
            "summary": "Liveness", "operationId": "healthz", "security": [],
            "responses": {"200": _json(_ref("Health"), "The server answers."), **_errors(*GUARDED)}}},
        "/status": {"get": {
            "summary": "Catalog summary; admins also see the definitions directory and the last reload",
            "operationId": "status", "security": [{"bearer": []}, {}] if settings.auth_enabled else [],
            "responses": {"200": _json(_ref("Status"), "The catalog served now."), **_errors(*auth, *GUARDED)}}},
        "/tools": {"get": {
            "summary": "The tools the caller may use", "operationId": "listTools",
            "parameters": [
                fmt,
                {"name": "defer_loading", "in": "query", "required": False,
                 "schema": {"enum": sorted({variant for variants in SEARCHES.values() for variant in variants})},
                 "description": "With a format that has one, the provider's own tool search first and every tool "
                                "deferred but the pinned: " + "; ".join(
                                    f"{name}: {', '.join(variants)}" for name, variants in SEARCHES.items()) + "."},
                *filters, IF_NONE_MATCH],
            "responses": {"200": _json(tool_listing, "The listing.", ETAG), **NOT_MODIFIED,
                          **_errors(400, *auth, *GUARDED)}}},
        "/tools/search": {"get": {
            "summary": "The tools that best fit a request, best first", "operationId": "searchTools",
            "parameters": [
                {"name": "q", "in": "query", "required": True, "schema": {"type": "string"},
                 "description": "What the tools sought must do (its last 4,096 characters are read)."},
                {"name": "k", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": MAX_K}, "description": "How many."},
                fmt, *filters],
            "responses": {"200": _json({"oneOf": [_ref("SearchResults"), _ref("FormattedToolList")]},
                                       "The tools found, best first."),
                          **_errors(400, *auth, *GUARDED)}}},
        "/tools/{tool_id}": {"get": {
            "summary": "One tool", "operationId": "getTool", "parameters": [TOOL_ID, IF_NONE_MATCH],
            "responses": {"200": _json(_ref("Tool"), "The tool's entry.", ETAG), **NOT_MODIFIED,
                          **_errors(*auth, 404, *GUARDED)}}},
        "/tools/{tool_id}/call": {"post": {
            "summary": "Call a tool", "operationId": "callTool", "parameters": [TOOL_ID, *_call_headers()],
            "requestBody": {"required": False, "description": (
                "The arguments: a JSON object, a JSON string holding one, or a bare value for a tool with one "
                "parameter; an empty body means no arguments."), "content": {JSON: {"schema": {}}}},
            "responses": {
                "200": _json(_ref("ToolResult"), "The call ran: argument and tool failures are results with "
                                                 "is_error set, never HTTP errors."),
                "202": _json(_ref("ToolResult"), "The call did not run: it waits for a person's approval (its "
                                                 "approval member; Location is where it is decided). The same "
                                                 "call, made again once approved, runs once.",
                             {"Location": {"description": "/approvals/{id}", "schema": {"type": "string"}}}),
                **_errors(400, *auth, 404, 413, *GUARDED)}}},
        "/admin/reload": {"post": {
            "summary": "Reload the definitions now", "operationId": "reload",
            "description": "Needs an admin key (with auth off: a loopback caller).",
            "responses": {"200": _json(_ref("ReloadOutcome"), "The build succeeded (changed says if a new "
                                                              "catalog is served)."),
                          "422": _json(_ref("ReloadOutcome"), "The build failed; the last good catalog "
                                                              "keeps serving."),
                          **_errors(*auth, 403, 421)}}},
        "/v1/chat/completions": {"post": {
            "summary": "OpenAI-compatible chat completion through the gateway's LLM loop",
            "operationId": "chatCompletions",
            "requestBody": {"required": True, "content": {JSON: {"schema": _ref("ChatRequest")}}},
            "responses": {
                "200": {"description": "The completion; with stream: true, chat.completion.chunk events.",
                        "content": {JSON: {"schema": _ref("ChatCompletion")},
                                    "text/event-stream": {"schema": _ref("ChatStreamEvent")}}},
                # The Origin guard answers before the endpoint, in the REST shape.
                **_errors(400, *auth, 404, 413, 502, 503, 504, shape="ChatError"), **_errors(*GUARDED)}}},
        "/v1/models": {"get": {
            "summary": "The configured LLM providers", "operationId": "listModels",
            "responses": {"200": _json(_ref("ModelList"), "One entry per provider."),
                          **_errors(*auth, shape="ChatError"), **_errors(*GUARDED)}}},
        "/openapi.json": {"get": {
            "summary": "This document", "operationId": "openapi", "security": [],
            "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1."), **_errors(*GUARDED)}}},
    }


def _schemas() -> dict[str, Any]:
    string, integer, boolean, anything = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {}
    strings = {"type": "array", "items": string}
    problem = {"type": "object", "required": ["file", "line", "column", "message", "severity", "text"],
               "properties": {"file": string, "line": integer, "column": integer, "message": string,
                              "severity": {"enum": ["error", "warning"]}, "text": string}}
    return {
        "Error": {"type": "object", "required": ["error", "status"], "properties": {
            "error": {"type": "string", "description": "What went wrong, for a person."},
            "status": {"type": "integer", "description": "The HTTP status again."},
            "tool": {"type": "string", "description": "404: the tool id asked for."},
            "did_you_mean": {**strings, "description": "404: close matches among the caller's tools."}}},
        # OpenAI's error object: code and param are strings or null.
        "ChatError": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type", "param", "code"],
            "properties": {"message": string, "type": string, "param": {"type": ["string", "null"]},
                           "code": {"type": ["string", "null"]}}}}},
        "Health": {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}},
        "Status": {"type": "object", "required": ["status", "version", "tools", "last_reload_ok"], "properties": {
            "status": {"const": "ok"}, "version": string, "tools": integer, "last_reload_ok": boolean,
            "definitions": {**string, "description": "Admins only."},
            "auth": {**boolean, "description": "Admins only."},
            "last_reload": {**_ref("ReloadOutcome"), "description": "Admins only."},
            "held": {"type": "array", "description": "Admins only, when the lock file holds tools: each changed since "
                     "it or not in it, and whether it is served as locked.",
                     "items": {"type": "object", "required": ["tool", "change", "served"],
                               "properties": {"tool": string, "change": string,
                                              "served": {"enum": ["as_locked", "no"]}}}}}},
        "ReloadOutcome": {"type": "object", "required": ["ok", "changed", "version", "problems", "warnings"],
                          "properties": {"ok": boolean, "changed": boolean, "version": string,
                                         "problems": {"type": "array", "items": problem},
                                         "warnings": {"type": "array", "items": problem},
                                         "duration_ms": {"type": "number"}, "at": {"type": "number"}}},
        "Tool": {"type": "object", "required": ["id", "name", "user_description", "ai_description", "scope",
                                                "input_schema", "tags", "toolsets", "annotations"], "properties": {
            "id": string, "name": string, "user_description": string, "ai_description": string,
            "scope": {"enum": ["server", "client", "all"]}, "input_schema": {"type": "object"},
            "output_schema": {"type": ["object", "boolean"]}, "tags": strings, "toolsets": strings,
            "annotations": {"type": "object"}, "return_direct": boolean}},
        "ToolList": {"type": "object", "required": ["tools"], "additionalProperties": False,
                     "properties": {"tools": {"type": "array", "items": _ref("Tool")}}},
        "SearchResults": {"type": "object", "required": ["tools"], "additionalProperties": False, "properties": {
            "tools": {"type": "array", "items": {"allOf": [_ref("Tool"), {
                "type": "object", "required": ["score"], "properties": {
                    "score": {"type": "number"},
                    "alike": {**strings, "description": "The ids of the tools folded into this one: the same "
                                                        "tool offered again."}}}]}}}},
        "FormattedToolList": {"type": "object", "required": ["format", "tools", "diagnostics"], "properties": {
            "format": {"enum": list(FORMATS)}, "tools": {"type": "array", "items": {"type": "object"}},
            "diagnostics": {"type": "array"}}},
        "ToolResult": {"type": "object", "required": ["tool", "is_error", "result", "text"], "properties": {
            "tool": string, "is_error": boolean,
            "result": {**anything, "description": "The structured result (any JSON value); null on error."},
            "text": {**string, "description": "What an LLM reads."},
            "error": {**string, "description": "Set on failure; argument errors name the JSON path ($.a.b)."},
            "content": {"type": "array", "items": {"type": "object"},
                        "description": "The MCP content blocks (text, image, audio, resource, resource_link) as the "
                                       "tool answered them; only for a tool that answers with them (an upstream "
                                       "MCP tool's)."},
            "truncated": boolean,
            "approval": {"type": "object", "required": ["id", "status", "expires_at", "url"],
                         "description": "A call waiting for a person's approval (HTTP 202).",
                         "properties": {"id": string, "status": {"const": "pending"},
                                        "expires_at": {"type": "number"}, "url": string}}}},
        "ChatMessage": {"type": "object", "required": ["role"], "properties": {
            "role": {"enum": sorted(ROLES)}, "content": {"type": ["string", "array", "null"]},
            "tool_call_id": string, "name": string}},
        "ChatRequest": {"type": "object", "required": ["messages"], "properties": {
            "model": {**string, "description": "A provider name, or provider/model."},
            # Assistant and tool messages need ids that tie them together: the schema offers the plain roles.
            "messages": {"type": "array", "minItems": 1, "items": {"allOf": [_ref("ChatMessage"), {
                "properties": {"role": {"enum": ["system", "developer", "user"]}}}]}},
            "stream": boolean, "stream_options": {"type": "object", "properties": {"include_usage": boolean}},
            "n": {"const": 1}, "user": string,
            "tool_choice": {"enum": ["auto", "required", "none"]},
            "metadata": {"type": "object"},
            "gateway": {"type": "object", "additionalProperties": False, "properties": {
                "toolsets": strings, "tags": strings, "tools": strings, "side": {"enum": ["server", "client"]},
                "conversation_id": string}}},
            "description": "A Chat Completions body; fields not named here are passed to the provider."},
        "ChatCompletion": {"type": "object", "required": ["id", "object", "created", "model", "choices"],
                           "properties": {"id": string, "object": {"const": "chat.completion"}, "created": integer,
                                          "model": string, "choices": {"type": "array"}, "usage": {"type": "object"},
                                          "tool_executions": {"type": "array", "items": {"type": "object"}}}},
        # An OpenAPI 3.1 event-stream schema describes one event (its fields as a server-sent event).
        "ChatStreamEvent": {"type": "object", "required": ["data"], "properties": {"data": {
            "type": "string", "description": "A chat.completion.chunk (JSON), an {\"error\": ...} object after a "
                                             "failure mid-stream, or [DONE] last."}}},
        "ModelList": {"type": "object", "required": ["object", "data"], "properties": {
            "object": {"const": "list"}, "data": {"type": "array", "items": {
                "type": "object", "required": ["id", "object", "owned_by"],
                "properties": {"id": string, "object": {"const": "model"}, "created": integer, "owned_by": string}}}}},
    }


def document(settings: Settings) -> dict[str, Any]:
    """The OpenAPI 3.1 document for a server with these settings."""
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Tool gateway", "version": __version__,
                 "description": "REST, admin and chat routes of the tool gateway. MCP is served at /mcp."},
        "paths": _paths(settings),
        "components": {"schemas": _schemas()},
    }
    if settings.auth_enabled:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer",
                                                           "description": "An API key from the settings."}}
        doc["security"] = [{"bearer": []}]
    return doc
