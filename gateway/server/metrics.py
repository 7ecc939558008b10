"""``GET /metrics``: the gateway's metrics (``gateway.observe.metrics``) in the Prometheus text format.

Who may scrape: with auth off, loopback callers only (like admin operations); with auth on, an admin key or a
key marked ``metrics: true`` (a Prometheus server's credentials need no admin rights). Anyone else gets the
gateway's JSON error: 401 without a valid key, 403 with a key that may not scrape.

The text is generated on the event loop: a registry of this size (tens of families, series bounded by the
catalog's tools) renders in well under a millisecond per hundred series, less than handing it to a thread.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import Forbidden
from ..runtime import Gateway
from .auth import Caller, authenticate
from .errors import error_response


def may_scrape(caller: Caller) -> bool:
    return caller.is_admin or (caller.key is not None and caller.key.metrics)


def routes(gateway: Gateway) -> list[Route]:
    async def metrics(request: Request) -> Response:
        caller = authenticate(gateway.settings, request.headers, request.client.host if request.client else None)
        if not may_scrape(caller):
            raise Forbidden("Scraping /metrics needs an admin key or a key with 'metrics: true'." if caller.auth
                            else "Without API keys configured, /metrics is open to loopback callers only.")
        observer = gateway.observers.get("metrics")
        if observer is None:  # the gateway is stopping (its observers are detached)
            return error_response(503, "Metrics are not collected now: the gateway is stopping.")
        return Response(generate_latest(observer.registry), media_type=CONTENT_TYPE_LATEST)  # type: ignore[attr-defined]

    return [Route("/metrics", metrics, methods=["GET"])]
