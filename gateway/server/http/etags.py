"""Conditional GETs: whether a request's ``If-None-Match`` already holds the answer's ``ETag``. Shared by the
surfaces that serve versioned bodies (REST listings, the client runtime and tool scripts), so that none of them
imports another for it."""

from __future__ import annotations

from starlette.requests import Request


def not_modified(request: Request, etag: str) -> bool:
    header = request.headers.get("if-none-match")
    if not header:
        return False
    return header.strip() == "*" or any(tag.strip().removeprefix("W/") == etag for tag in header.split(","))
