"""``GET /``: what runs here. People (a browser asking for HTML) get a page, clients get a small JSON index.

Both list the endpoints — REST, MCP, chat, browser runtime, demo — with a one-line example built on the URL the
request came to, and the admin console (noted as not built yet while no ``/admin/`` page is served). The
catalog's version and tool count are shown to anyone while auth is off (the gateway then listens on loopback
only); with API keys configured, only to a request that presents a valid key, and then counting the tools that
key may use. A visitor without a key learns the endpoints and that a key is needed, nothing of the catalog.

The page is rendered from ``gateway/static/landing.html`` (Jinja2, autoescaped: the base URL comes from the
request's Host header). It loads nothing and runs no script; its Content-Security-Policy says so.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from .. import __version__
from ..runtime.gateway import Gateway
from .http.auth import Caller, authenticate
from .http.errors import error_response, json_response
from .http.metadata import WELL_KNOWN
from .http.metadata import document as protected_resource

if TYPE_CHECKING:
    from jinja2 import Environment

ADMIN_CONSOLE = "/admin/"
HEADERS = {"Vary": "Accept", "Cache-Control": "no-cache"}
PAGE_HEADERS = {
    **HEADERS,
    # No script, nothing from elsewhere: the page is static text with its own stylesheet inline.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


@functools.cache
def _templates() -> Environment:
    """The page's template environment, made by the first browser that asks: serving needs no Jinja2 before."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(loader=PackageLoader("gateway", "static"), autoescape=select_autoescape(["html"]))


@dataclass(frozen=True)
class Endpoint:
    key: str  # the JSON index's name for it
    title: str
    path: str
    what: str
    example: str  # a shell command or a line of HTML; "{base}", "{auth}" and "{header}" are filled per request
    link: bool = True  # a page a browser can open (GET); /mcp and the chat completions are not


ENDPOINTS = (
    Endpoint("rest", "REST", "/tools", "list the tools, get one, call one (POST /tools/{id}/call)",
             "curl{auth} {base}/tools"),
    Endpoint("mcp", "MCP", "/mcp", "Model Context Protocol over streamable HTTP",
             "npx @modelcontextprotocol/inspector --cli {base}/mcp --transport http --method tools/list{header}",
             link=False),
    Endpoint("chat", "Chat", "/v1/chat/completions", "OpenAI-compatible chat completions running the tools",
             "curl{auth} {base}/v1/chat/completions -H 'Content-Type: application/json' "
             "-d '{{\"messages\": [{{\"role\": \"user\", \"content\": \"What is the square root of 2?\"}}]}}'",
             link=False),
    Endpoint("models", "Models", "/v1/models", "the names the chat endpoint accepts as model",
             "curl{auth} {base}/v1/models"),
    Endpoint("browser_runtime", "Browser runtime", "/client/gateway-tools.js",
             "runs client tools in a web page, over a WebSocket bridge",
             '<script src="{base}/client/gateway-tools.js"></script>'),
    Endpoint("demo", "Demo page", "/client/demo", "a task form an LLM fills through browser tools",
             "{base}/client/demo"),
    Endpoint("demo_api", "Demo API", "/demo/stations", "the weather stations the HTTP-bound example tools call",
             "curl '{base}/demo/stations?q=oslo'"),
    Endpoint("status", "Status", "/status", "catalog version, tool count, last reload",
             "curl{auth} {base}/status"),
)


def routes(gateway: Gateway) -> list[Route]:
    async def landing(request: Request) -> Response:
        caller = await authenticate(gateway, request.headers, request.client.host if request.client else None,
                              required=False)
        view = _view(gateway, caller, request)
        if _wants_html(request.headers.get("accept", "")):
            page = _templates().get_template("landing.html").render(**view)
            return Response(page, headers=PAGE_HEADERS, media_type="text/html; charset=utf-8")
        return json_response(_index(view), headers=HEADERS)

    async def resource_metadata(request: Request) -> Response:
        """RFC 9728's document, public as the RFC means it: where to get a token for this gateway (or its /mcp)."""
        if gateway.settings.oauth is None:
            return error_response(404, "This gateway does not accept OAuth access tokens (no 'oauth' setting).")
        body = protected_resource(gateway.settings.oauth, mcp=request.url.path.endswith("/mcp"))
        return json_response(body, headers={"Cache-Control": "public, max-age=3600"})

    return [Route("/", landing, methods=["GET"]),
            Route(WELL_KNOWN, resource_metadata, methods=["GET"]),
            Route(WELL_KNOWN + "/mcp", resource_metadata, methods=["GET"])]


def _view(gateway: Gateway, caller: Caller, request: Request) -> dict[str, Any]:
    base = str(request.base_url).rstrip("/")
    auth = gateway.settings.auth_enabled
    fill = {"base": base, "auth": " -H 'Authorization: Bearer $KEY'" if auth else "",
            "header": ' --header "Authorization: Bearer $KEY"' if auth else ""}
    catalog = release = None
    if not auth or caller.authenticated:  # with auth on, nothing of the catalog (or the release) without a key
        snapshot = gateway.catalog
        catalog = {"version": snapshot.version, "tools": sum(map(caller.may_use, snapshot.tools.values()))}
        release = __version__
    return {
        "product": "tool-gateway",
        "release": release,
        "base": base,
        "auth": auth,
        "catalog": catalog,
        "endpoints": [(endpoint, endpoint.example.format(**fill)) for endpoint in ENDPOINTS],
        "admin_console": ADMIN_CONSOLE if _serves(request, ADMIN_CONSOLE) else None,
    }


def _index(view: dict[str, Any]) -> dict[str, Any]:
    base = view["base"]
    endpoints = {endpoint.key: base + endpoint.path for endpoint, _ in view["endpoints"]}
    endpoints["admin_console"] = base + view["admin_console"] if view["admin_console"] else None
    return {"name": view["product"], "release": view["release"], "auth": view["auth"], "catalog": view["catalog"],
            "endpoints": endpoints}


def _serves(request: Request, path: str) -> bool:
    """Whether the app answers GET ``path``: the console link appears by itself once a later release adds it."""
    scope = {"type": "http", "method": "GET", "path": path, "root_path": ""}
    return any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes)


def _wants_html(accept: str) -> bool:
    """HTML only when the Accept header prefers it to JSON: browsers name text/html; curl, httpx and the like send
    ``*/*`` (a tie, which goes to JSON) or nothing."""
    html = _preference(accept, "text", "html")
    return html[0] > 0 and html > _preference(accept, "application", "json")


def _preference(accept: str, kind: str, subtype: str) -> tuple[float, int]:
    """``(q, specificity)`` of the most specific media range in ``accept`` matching ``kind/subtype`` (RFC 9110
    12.5.1); ``(0, -1)`` when none does."""
    best = (0.0, -1)
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        range_kind, _, range_subtype = media.lower().partition("/")
        if (range_kind, range_subtype) == (kind, subtype):
            specificity = 2
        elif (range_kind, range_subtype) == (kind, "*"):
            specificity = 1
        elif (range_kind, range_subtype) == ("*", "*"):
            specificity = 0
        else:
            continue
        if specificity > best[1]:
            best = (_quality(params), specificity)
    return best


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return min(max(float(value), 0.0), 1.0)
            except ValueError:
                return 0.0
    return 1.0
