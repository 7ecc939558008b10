"""Listings gzip-compressed for clients that accept it, identity for the others, with ETags and 304s as before."""

from __future__ import annotations

import gzip
import http.client
from urllib.parse import urlsplit

import httpx
import pytest

from gateway.formats import FORMATS
from gateway.server.http.compression import accepts_gzip

LISTINGS = ["/tools", *(f"/tools?format={fmt}" for fmt in FORMATS)]


def raw_get(url: str, path: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    """GET ``path`` sending exactly ``headers`` (and Host): no Accept-Encoding unless given, nothing decoded."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.putrequest("GET", path, skip_accept_encoding=True)
    for name, value in headers.items():
        connection.putheader(name, value)
    connection.endheaders()
    response = connection.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    connection.close()
    return response


@pytest.mark.parametrize("path", LISTINGS)
def test_a_gzip_listing_decompresses_to_the_identity_body(server, path):
    """Every format's listing, asked with Accept-Encoding: gzip, is gzip whose bytes decompress to the very body
    a client without Accept-Encoding gets, which is not compressed."""
    plain = raw_get(server.url, path, {})
    assert plain.status == 200 and plain.getheader("content-encoding") is None
    assert plain.body.startswith(b"{")  # type: ignore[attr-defined]
    packed = raw_get(server.url, path, {"Accept-Encoding": "gzip, deflate, br"})
    assert packed.status == 200 and packed.getheader("content-encoding") == "gzip"
    assert int(packed.getheader("content-length")) == len(packed.body)  # type: ignore[attr-defined]
    assert len(packed.body) < len(plain.body)  # type: ignore[attr-defined]
    assert gzip.decompress(packed.body) == plain.body  # type: ignore[attr-defined]


def test_listings_vary_on_accept_encoding_and_keep_their_etag(server):
    """Each encoding has its own strong ETag made of the catalog version (RFC 9110 8.8.3: another representation,
    another tag), and Vary names Accept-Encoding and Authorization."""
    version = server.gateway.catalog.version
    for headers, etag in (({}, f'"{version}"'), ({"Accept-Encoding": "gzip"}, f'"{version}-gzip"')):
        response = raw_get(server.url, "/tools", headers)
        assert response.getheader("etag") == etag
        vary = {part.strip().lower() for part in response.getheader("vary").split(",")}
        assert {"accept-encoding", "authorization"} <= vary


def test_a_304_still_answers_a_gzip_client(server):
    """If-None-Match with the catalog version is a 304 without a body for a client accepting gzip too, and it
    says Vary: Accept-Encoding like the 200 it stands for."""
    version = server.gateway.catalog.version
    for etag in (f'"{version}"', f'"{version}-gzip"', f'W/"{version}-gzip"'):  # the tag of either encoding
        response = raw_get(server.url, "/tools?format=openai", {"Accept-Encoding": "gzip", "If-None-Match": etag})
        assert response.status == 304 and response.body == b"", etag  # type: ignore[attr-defined]
        assert response.getheader("content-encoding") is None
        assert response.getheader("etag") == etag.removeprefix("W/")  # the tag it matched
        assert "accept-encoding" in response.getheader("vary").lower()


def test_a_client_refusing_gzip_gets_identity(server):
    """gzip;q=0, identity alone, or a wildcard with q=0 each get the plain body."""
    for accept in ("gzip;q=0", "identity", "*;q=0", "br"):
        response = raw_get(server.url, "/tools", {"Accept-Encoding": accept})
        assert response.status == 200 and response.getheader("content-encoding") is None, accept
        assert response.body.startswith(b"{")  # type: ignore[attr-defined]


def test_a_filtered_listing_is_compressed_too(server):
    """A ?toolset= listing (made per request) is gzip for a gzip client and decompresses to its identity body."""
    plain = raw_get(server.url, "/tools?toolset=lights", {})
    packed = raw_get(server.url, "/tools?toolset=lights", {"Accept-Encoding": "gzip"})
    assert plain.status == packed.status == 200
    if packed.getheader("content-encoding") == "gzip":
        assert gzip.decompress(packed.body) == plain.body  # type: ignore[attr-defined]
    else:  # too small to be worth it: sent as is
        assert packed.body == plain.body  # type: ignore[attr-defined]


def test_httpx_reads_the_compressed_listing_like_the_plain_one(server):
    """httpx (which asks for gzip by default) reads the same JSON as a client that asked for identity."""
    compressed = httpx.get(f"{server.url}/tools?format=anthropic", timeout=10)
    assert compressed.headers["content-encoding"] == "gzip"
    identity = httpx.get(f"{server.url}/tools?format=anthropic", headers={"Accept-Encoding": "identity"}, timeout=10)
    assert "content-encoding" not in identity.headers
    assert compressed.json() == identity.json()


@pytest.mark.parametrize(("header", "accepted"), [
    ("gzip", True), ("gzip, deflate, br, zstd", True), ("GZIP;Q=0.5", True), ("x-gzip", True), ("*", True),
    ("deflate, *;q=0.1", True), (None, False), ("", False), ("identity", False), ("br;q=1, gzip;q=0", False),
    ("*;q=0", False), ("gzip;q=0, *", False), ("gzip;q=abc", False),
])
def test_accept_encoding_negotiation(header, accepted):
    """gzip is used when the header names it (or a wildcard covers it) with a q-value above zero."""
    assert accepts_gzip(header) is accepted
