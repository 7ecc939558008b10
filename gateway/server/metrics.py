"""``GET /metrics``: the gateway's metrics (``gateway.observe.metrics``) in the Prometheus text format.

Who may scrape: with auth off, loopback callers only (like admin operations); with auth on, an admin key or a
key marked ``metrics: true`` (a Prometheus server's credentials need no admin rights). Anyone else gets the
gateway's JSON error: 401 without a valid key, 403 with a key that may not scrape.

The text is generated in a worker thread, not on the event loop: prometheus_client renders some 10-40 µs per
line, and a catalog of 50 tools called over three surfaces makes ~2,200 lines (histogram buckets mostly), tens of
milliseconds that would hold every other request.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import Forbidden
from ..runtime.gateway import Gateway
from .http.auth import Caller, authenticate
from .http.errors import error_response


def may_scrape(caller: Caller) -> bool:
    return caller.is_admin or (caller.key is not None and caller.key.metrics)


def routes(gateway: Gateway) -> list[Route]:
    async def metrics(request: Request) -> Response:
        caller = await authenticate(gateway, request.headers, request.client.host if request.client else None)
        if not may_scrape(caller):
            raise Forbidden("Scraping /metrics needs an admin key or a key with 'metrics: true'." if caller.auth
                            else "Without API keys configured, /metrics is open to loopback callers only.")
        observer = gateway.observers.get("metrics")
        if observer is None:  # the gateway is stopping (its observers are detached)
            return error_response(503, "Metrics are not collected now: the gateway is stopping.")
        text = await run_in_threadpool(generate_latest, observer.registry)  # type: ignore[attr-defined]
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    return [Route("/metrics", metrics, methods=["GET"])]
