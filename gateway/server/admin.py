"""Admin operations: ``POST /admin/reload`` rebuilds the catalog now and answers with the outcome.

Needs an admin key (or, with auth off, a loopback caller). The answer is the reload's outcome, the same shape
``/status`` shows as ``last_reload``: 200 when the build succeeded (``changed`` says whether a new catalog is
served), 422 when it failed, with every problem as file:line:col while the last good catalog keeps serving.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..runtime import Gateway
from .auth import authenticate
from .errors import json_response


def routes(gateway: Gateway) -> list[Route]:
    async def reload(request: Request) -> Response:
        client = request.client.host if request.client else None
        authenticate(gateway.settings, request.headers, client).check_admin()
        outcome = await gateway.reload()
        return json_response(outcome.as_dict(), 200 if outcome.ok else 422)

    return [Route("/admin/reload", reload, methods=["POST"])]
