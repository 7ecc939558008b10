"""Where the gateway listens, as seen from the gateway itself.

Tools that call the gateway's own endpoints (the shipped demo tools call its demo API under ``/demo``) name it
as ``{{ gateway.base_url }}`` at the start of their ``url``; it is fixed when the catalog is built, from the
settings the server is started with (``--host``/``--port`` included), so it always names the address served.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings

LOOPBACK = "127.0.0.1"
_UNSPECIFIED = ("", "0.0.0.0", "::", "[::]")


@functools.lru_cache(maxsize=1024)  # parsing an address costs more than the rest of authenticating a request
def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def served_host(settings: Settings) -> str:
    """The address the server binds: loopback only while no API key protects the gateway."""
    if settings.auth_enabled or is_loopback(settings.host):
        return settings.host
    return LOOPBACK


def base_url(settings: Settings) -> str:
    """``http://host:port`` at which the gateway reaches itself: the address it binds, or loopback where it
    binds every interface (or ``localhost``, which may resolve to an address it does not bind)."""
    host = served_host(settings)
    if host in _UNSPECIFIED or host == "localhost":
        host = LOOPBACK
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{settings.port}"
