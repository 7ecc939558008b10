"""The gateway's own release, as its installed distribution names it (the landing page, MCP, OpenAPI)."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version


@functools.cache  # reading the distribution's metadata searches sys.path; the running code does not change
def release() -> str | None:
    """``tool-gateway``'s version; None when run from a source tree that was never installed."""
    try:
        return version("tool-gateway")
    except PackageNotFoundError:
        return None
