"""gzip for the large bodies the gateway answers again and again (tool listings): negotiated by ``Accept-Encoding``.

A listing of 10,000 tools is megabytes of JSON, most of it repeated keys and schema shapes: gzip makes it a few
hundred kilobytes. It is compressed once, with the body it compresses (``Catalog.memo``), so a request costs no
compression; a filtered body (a ``?toolset=`` filter) is compressed at the cheapest level when first asked for and
kept among the catalog's last few (``rest.Recent``).
"""

from __future__ import annotations

import gzip

# The body made once per catalog gets the default level: 3x the time of level 1 for a body ~7% smaller, paid once.
ONCE_LEVEL = 6
PER_REQUEST_LEVEL = 1
MIN_BYTES = 1024  # below this a gzip header and a round of deflate save nothing worth the client's decoding


def accepts_gzip(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header accepts gzip (RFC 9110 §12.5.3): listed (``gzip``, ``x-gzip``) or
    covered by ``*``, with a q-value above zero. No header means identity only, to be safe with every client."""
    if not header:
        return False
    named = star = None
    for item in header.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if coding == "*":
            star = _quality(params)
        elif coding in ("gzip", "x-gzip"):
            named = max(named or 0.0, _quality(params))
    quality = named if named is not None else star  # a named coding overrides the wildcard
    return quality is not None and quality > 0


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0  # a q-value we cannot read accepts nothing
    return 1.0


def gzipped(body: bytes, level: int = PER_REQUEST_LEVEL) -> bytes:
    """``body`` gzip-compressed; no timestamp in the header, so the same body always compresses to the same bytes."""
    return gzip.compress(body, level, mtime=0)
