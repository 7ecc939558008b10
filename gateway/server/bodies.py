"""Request bodies, as every HTTP surface reads them: bounded in size, then parsed as JSON into a 400 when bad."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from ..errors import BadRequest, PayloadTooLarge


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``limit`` — never read past it."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"Request body of {declared} bytes is over the limit of {limit} bytes.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"Request body is over the limit of {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """The JSON value a body holds; ``BadRequest`` saying why when it holds none."""
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise BadRequest("Request body is not UTF-8 text.") from None
    except RecursionError:  # the C parser recurses once per nesting level: [[[[… deep enough is not a bug of ours
        raise BadRequest("Request body is not JSON this server accepts: it is nested too deeply.") from None
    except ValueError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}.") from None
