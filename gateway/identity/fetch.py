"""Reading an issuer's JSON documents (discovery, keys) within bounds: a time limit for the whole exchange, a size
limit read as the body streams (a huge or endless answer costs at most that much memory), and redirects followed
only within the origin asked (a redirect elsewhere could hand the gateway someone else's keys)."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

MAX_REDIRECTS = 3
DISCOVERY_MAX_BYTES = 262_144


class FetchFailed(Exception):
    """The document could not be had: the message says why, without its content."""


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


async def fetch_json(client: httpx.AsyncClient, url: str, *, max_bytes: int, timeout_s: float) -> Any:
    """The JSON object at ``url``; ``FetchFailed`` otherwise."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _fetch(client, url, max_bytes)
    except TimeoutError:
        raise FetchFailed(f"{url}: no answer within {timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{url}: {type(exc).__name__}") from None


async def _fetch(client: httpx.AsyncClient, url: str, max_bytes: int) -> Any:
    start = origin(url)
    for _ in range(MAX_REDIRECTS + 1):
        async with client.stream("GET", url, headers={"Accept": "application/json"}) as answer:
            if answer.is_redirect:
                target = urljoin(url, answer.headers.get("location", ""))
                if origin(target) != start:
                    raise FetchFailed(f"{url}: redirected to another origin, not followed")
                url = target
                continue
            if answer.status_code != 200:
                raise FetchFailed(f"{url}: HTTP {answer.status_code}")
            body = bytearray()
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise FetchFailed(f"{url}: answer larger than {max_bytes:,} bytes")
        try:
            document = json.loads(body)
        except ValueError:
            raise FetchFailed(f"{url}: not JSON") from None
        if not isinstance(document, dict):
            raise FetchFailed(f"{url}: expected a JSON object")
        return document
    raise FetchFailed(f"{url}: more than {MAX_REDIRECTS} redirects")


def discovery_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID Connect's (``<issuer>/.well-known/openid-configuration``), then
    RFC 8414's, which puts the well-known part before the issuer's path."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return [f"{issuer.rstrip('/')}/.well-known/openid-configuration",
            f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{path}"]


async def discover(client: httpx.AsyncClient, issuer: str, timeout_s: float) -> dict[str, Any]:
    """The issuer's metadata document; ``FetchFailed`` naming each place tried when none is its own."""
    problems = []
    for url in discovery_urls(issuer):
        try:
            document = await fetch_json(client, url, max_bytes=DISCOVERY_MAX_BYTES, timeout_s=timeout_s)
        except FetchFailed as exc:
            problems.append(str(exc))
            continue
        # RFC 8414 §3.3: a document naming another issuer is not this issuer's (a mix-up attack).
        if document.get("issuer") != issuer:
            problems.append(f"{url}: names issuer {str(document.get('issuer'))[:200]!r}")
            continue
        return document
    raise FetchFailed("no discovery document: " + "; ".join(problems))
