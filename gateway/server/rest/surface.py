"""The REST surface: ``/healthz``, ``/status``, ``/tools``, ``/tools/search``, ``/tools/{id}``,
``POST /tools/{id}/call``.

Every handler reads ``Gateway.catalog`` once and answers from that snapshot, so a reload in the middle of a
request never mixes two catalogs. Listings carry the catalog version as their ``ETag`` and answer
``If-None-Match`` with 304; the bodies are computed once per catalog (``Catalog.memo``) and sent as bytes,
gzip-compressed (once, beside them) for a client whose ``Accept-Encoding`` takes gzip. A call is
``rest.fast.RestCalls.answer``, which ``front.Front`` also runs below Starlette for most clients (the fast path).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...catalog.snapshot import Catalog, Tool
from ...errors import BadRequest
from ...formats import SEARCHES, deferred, known, render_tools
from ...runtime.cluster import public_view
from ...runtime.gateway import Gateway
from ...search import DEFAULT_K, MAX_K
from ..http.auth import Caller, authenticate
from ..http.compression import MIN_BYTES, ONCE_LEVEL, accepts_gzip, gzipped
from ..http.errors import dumps, json_response
from ..http.etags import not_modified
from ..http.search import narrowed, scoped

if TYPE_CHECKING:
    from .fast import RestCalls

LISTING_VARY = "Accept-Encoding, Authorization"
GZIP = {"Content-Encoding": "gzip"}
FILTERED_KEPT = 64  # filtered listings kept per catalog, most recently asked first: bounded whatever callers ask


def routes(gateway: Gateway, calls: RestCalls) -> list[Route]:
    api = RestApi(gateway, calls)
    return [  # calls first: the router tries each path in turn, and calls are most of the traffic
        Route("/tools/{tool_id}/call", api.call_tool, methods=["POST"]),
        Route("/tools/search", api.search_tools, methods=["GET"]),
        Route("/tools/{tool_id}", api.get_tool, methods=["GET"]),
        Route("/tools", api.list_tools, methods=["GET"]),
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/status", api.status, methods=["GET"]),
    ]


class RestApi:
    def __init__(self, gateway: Gateway, calls: RestCalls):
        self.gateway = gateway
        self.settings = gateway.settings
        self.calls = calls

    async def caller(self, request: Request, *, required: bool = True) -> Caller:
        client = request.client.host if request.client else None
        return await authenticate(self.gateway, request.headers, client, required=required)

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def status(self, request: Request) -> Response:
        """Summary for anyone (the plugins only to a key holder when auth is on); the definitions directory and the
        last reload's problems for admins only; each tool's SLO figures (``tools_slo``) to anyone with auth off,
        to admin keys only with it on."""
        caller = await self.caller(request, required=False)
        catalog = self.gateway.catalog
        last = self.gateway.last_reload
        body: dict[str, Any] = {"status": "ok", "version": catalog.version, "tools": len(catalog.tools),
                                "last_reload_ok": last.ok}
        if not caller.auth or caller.authenticated:  # installed software and its versions: not for anonymous eyes
            body["plugins"] = [{"name": p.name, "distribution": p.distribution, "version": p.version}
                               for p in catalog.plugins]
            body["sources"] = list(catalog.sources)  # upstreams (openapi, mcp): kind, tools, health, last refresh
        if caller.is_admin:
            body |= {"definitions": str(self.settings.definitions), "auth": self.settings.auth_enabled,
                     "last_reload": last.as_dict()}
            if catalog.held:  # what changed upstream since the lock file, and how it is served (gateway.catalog.held)
                body["held"] = [{k: held[k] for k in ("tool", "change", "served")} for held in catalog.held]
            if self.gateway.identity is not None:  # the identity provider's keys: held, how old, why not
                body["oauth"] = self.gateway.identity.keys.status()
        if self.gateway.replicas is not None:  # the registry runs with the app's lifespan (gateway.cluster)
            cluster = await self.gateway.replicas.view()
            if cluster["degraded"]:  # the shared state is unreachable: only calls that need it fail
                body["status"] = "degraded"
            # Which replicas run where, and why degraded (the store's address): for admins only.
            body["cluster"] = cluster if caller.is_admin else public_view(cluster)
        slos = self.gateway.observers.get("slo")
        if slos is not None and (not caller.auth or caller.is_admin):  # which tools run, and how: not for anyone
            body["tools_slo"] = slos.figures()  # type: ignore[attr-defined]  # gateway.observe.slo.Slos
        return json_response(body)

    async def list_tools(self, request: Request) -> Response:
        """``{"tools": [...]}``; ``?format=`` gives a provider's declarations, ``?toolset=``/``?tag=`` filter.
        gzip-compressed for a client that accepts it (``compression``)."""
        caller = await self.caller(request)
        catalog = self.gateway.catalog
        # A wrong request is a 400 whatever ETag it sends: a condition is not evaluated for an answer that would
        # not be a 2xx (RFC 9110 13.2.1).
        query = request.query_params
        fmt = known(query.get("format"))
        toolsets, tags = _listed(query.getlist("toolset")), _listed(query.getlist("tag"))
        defer = query.get("defer_loading")
        if defer is not None and defer not in SEARCHES.get(fmt or "", ()):
            raise BadRequest("defer_loading is a provider's own tool search: give " + "; or ".join(
                f"format={name} and defer_loading={' or '.join(variants)}" for name, variants in SEARCHES.items())
                + ".")
        headers = _cache_headers(catalog, LISTING_VARY)
        # The gzip body is another representation, so another strong ETag (RFC 9110 8.8.3); either one names this
        # catalog's listing, so either answers 304, with the tag it matched (`*`: the one this client would get).
        zipped = headers | GZIP | {"ETag": f'"{catalog.version}-gzip"'}
        gzip = accepts_gzip(request.headers.get("accept-encoding"))
        for matched in ((zipped, headers) if gzip else (headers, zipped)):
            if not_modified(request, matched["ETag"]):
                return Response(status_code=304, headers=headers | {"ETag": matched["ETag"]})

        labels = narrowed(catalog, toolsets, tags) if toolsets or tags else ((), ())

        def listing() -> bytes:
            tools = [] if labels is None else [tool for tool in catalog.select(toolsets=labels[0], tags=labels[1])
                                               if caller.may_use(tool)]
            if fmt is None:
                return dumps({"tools": [tool.describe() for tool in tools]})
            rendered = render_tools(tools, fmt)  # each tool's rendering is memoised on the tool
            declarations = rendered.tools if defer is None else deferred(fmt, defer, rendered.tools, self._loaded(tools))
            return dumps({"format": fmt, "tools": declarations, "diagnostics": rendered.diagnostics})

        if toolsets or tags:
            recent = catalog.memo("rest:filtered", Recent)
            key = (fmt, defer, caller.reach, labels, gzip)
            made = recent.get(key)
            if made is None:
                def filtered() -> tuple[bytes, bool]:
                    plain = listing()
                    return (gzipped(plain), True) if gzip and len(plain) >= MIN_BYTES else (plain, False)

                made = recent.keep(key, await _off_loop(filtered))
            body, packed = made
            if packed:
                headers = zipped
        else:  # the common case: one body per catalog, format and caller's reach, and its gzip beside it
            key = ("rest", fmt, defer, caller.reach)
            body = catalog.memoised(key) or await _off_loop(lambda: catalog.memo(key, listing))
            if gzip and len(body) >= MIN_BYTES:
                plain = body
                body = catalog.memoised((*key, "gzip")) or await _off_loop(
                    lambda: catalog.memo((*key, "gzip"), lambda: gzipped(plain, ONCE_LEVEL)))
                headers = zipped
        return Response(body, headers=headers, media_type="application/json")

    def _loaded(self, tools: list[Tool]) -> frozenset[str]:
        """Of ``tools``, the ids a deferred listing loads up front: the pinned ones, and with ``tool_search.toolsets``
        those of no toolset it names (an API key's own ``tool_search`` is its MCP list's: a deferred listing is what
        the request asked for)."""
        search = self.settings.tool_search
        return frozenset(search.always).union(
            tool.id for tool in tools if not search.leaves_to_search(tool.definition.toolsets))

    async def search_tools(self, request: Request) -> Response:
        """``?q=TEXT&k=N`` (and ``toolset``/``tag`` filters): ``{"tools": [...]}``, the best ``k`` of the tools this
        caller may use, best first, each its listing entry with its ``score`` and the ids of the tools folded into it as
        the same tool offered again (``alike``; ``gateway.search``). ``&format=`` gives the found tools as that
        provider's declarations instead, as ``GET /tools?format=`` does: what a caller executing a provider's tool
        search answers the model with (the Responses API's ``tool_search_output``)."""
        caller = await self.caller(request)
        query = request.query_params
        text = query.get("q", "")
        if not text.strip():
            raise BadRequest("Say what to search for: ?q=TEXT (and &k=N, at most 50).")
        k = _count(query.get("k"))
        toolsets, tags = _listed(query.getlist("toolset")), _listed(query.getlist("tag"))
        catalog = self.gateway.catalog
        fmt = known(query.get("format"))
        found = await self.gateway.searches.search(catalog, text, k, **scoped(caller, catalog, toolsets, tags))
        if fmt is None:
            return json_response({"tools": [hit.entry() for hit in found]})
        # Memoised on each tool once made, but a first rendering of up to 50 strict schemas is not the loop's work.
        rendered = await _off_loop(lambda: render_tools([hit.tool for hit in found], fmt))
        return json_response({"format": fmt, "tools": rendered.tools, "diagnostics": rendered.diagnostics})

    async def get_tool(self, request: Request) -> Response:
        caller = await self.caller(request)
        catalog = self.gateway.catalog
        tool = caller.tool(catalog, request.path_params["tool_id"])
        headers = _cache_headers(catalog, "Authorization")
        if not_modified(request, headers["ETag"]):
            return Response(status_code=304, headers=headers)
        return Response(tool.memo("rest:describe", lambda: dumps(tool.describe())), headers=headers,
                        media_type="application/json")

    async def call_tool(self, request: Request) -> Response:
        """Run one call (``rest.fast.RestCalls.answer``, which the fast path below Starlette answers too)."""
        answer = await self.calls.answer(request.scope, request.receive, request.path_params["tool_id"])
        return Response(answer.body, answer.status, answer.headers, media_type="application/json")


class Recent(OrderedDict):
    """The last ``FILTERED_KEPT`` filtered listings of one catalog: a caller repeating a filter gets bytes made
    once, and callers varying filters without end cannot grow it. Touched on the event loop only (two requests
    for the same new filter at once may both make it; one is kept)."""

    def keep(self, key: Any, made: tuple[bytes, bool]) -> tuple[bytes, bool]:
        self[key] = made
        if len(self) > FILTERED_KEPT:
            self.popitem(last=False)
        return made

    def get(self, key: Any) -> Any:  # type: ignore[override]  # no default: None is "not kept"
        made = super().get(key)
        if made is not None:
            self.move_to_end(key)
        return made


async def _off_loop(make: Callable[[], Any]) -> Any:
    """``make()`` in a worker thread: a listing of 10,000 tools is tens of milliseconds of JSON (and gzip) that
    must not stop the event loop's other requests meanwhile."""
    return await anyio.to_thread.run_sync(make)


def _count(value: str | None) -> int:
    """``?k=``: how many tools a search returns (default ``DEFAULT_K``, at most ``MAX_K``)."""
    if value is None:
        return DEFAULT_K
    # ASCII digits, and few: str.isdigit takes '²', which int() refuses.
    if not (value.isascii() and value.isdigit() and len(value) <= 3) or not 1 <= int(value) <= MAX_K:
        raise BadRequest(f"k must be a whole number from 1 to {MAX_K}, not {value[:20]!r}.")
    return int(value)


def _listed(values: list[str]) -> list[str]:
    """``?tag=a&tag=b`` and ``?tag=a,b`` alike."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _cache_headers(catalog: Catalog, vary: str) -> dict[str, str]:
    # The body also depends on the caller's key, so caches must keep one copy per Authorization header (and per
    # Accept-Encoding where the body may be compressed). One dict per catalog: Response only reads it.
    return catalog.memo(("rest:headers", vary), lambda: {"ETag": f'"{catalog.version}"', "Vary": vary,
                                                          "Cache-Control": "no-cache"})
