"""Origin and Host validation for every route: what keeps a web page the user visits from driving the gateway.
``front.Front`` applies it.


A browser names the page that sent a request in ``Origin``; requests without one (every non-browser client)
pass. A page may use the gateway when its origin is

- in ``settings.allowed_origins`` (``scheme://host`` or ``scheme://host:port``, ``:*`` for any port). Once the
  admin writes that list it is exact: nothing else is added to it;
- a loopback page (``localhost``, ``127.0.0.1``, ``[::1]``, any port) while auth is off *and* the list is empty:
  the convenience of a gateway that serves the local machine only;
- the gateway's own: the address the request's connection reached (the listening socket, never a header), so
  the pages the gateway serves itself (``/client/demo``, ``/``, the console) work when opened at that address.
  On a loopback address ``localhost`` counts too. A gateway reached under another name (a DNS name, a reverse
  proxy) lists that origin in ``allowed_origins``.

The admin routes (``/admin/…``: the console's API, reloads) take the gateway's own origin and the written list
only, never the loopback default: a page served by something else on this machine must not drive the console.

Any other origin gets 403, the WebSocket handshake included. ``Host`` never makes an origin allowed: a DNS name
an attacker points at the gateway would otherwise make their page "same origin" (F7).

Without API keys the gateway listens on loopback only, and a DNS-rebinding page would reach it under its own
host name: so with auth off the ``Host`` must be a loopback name too (else 421, as the MCP SDK answers).
"""

from __future__ import annotations

import functools
import ipaddress

from ...settings import Settings

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
LOOPBACK_ORIGINS = tuple(f"{scheme}://{host}:*" for scheme in ("http", "https") for host in LOOPBACK_HOSTS) + tuple(
    f"{scheme}://{host}" for scheme in ("http", "https") for host in LOOPBACK_HOSTS)


class AllowedOrigins:
    """The origins the settings allow: the written list exactly, or loopback pages when it is empty and auth off.

    The gateway's own origin is not among them: it needs no CORS answer, so ``front.Front`` adds it alone.
    ``listed_only``: the written list alone, never loopback pages — what may use the admin routes (``writes``).
    """

    def __init__(self, settings: Settings, *, listed_only: bool = False):
        listed = settings.allowed_origins
        self.patterns = listed if listed or settings.auth_enabled or listed_only else LOOPBACK_ORIGINS

    def __contains__(self, origin: str) -> bool:
        return any(origin == allowed or (allowed.endswith(":*") and _with_port(origin, allowed[:-1]))
                   for allowed in self.patterns)


@functools.lru_cache(maxsize=64)  # one entry per local address the gateway listens on
def served_at(server: tuple[str, int | None] | None) -> frozenset[str]:
    """The origins of pages served from the local address ``server`` (ASGI's ``scope["server"]``, the socket a
    connection reached): http and https on that address and port, and ``localhost`` when it is loopback."""
    if not server or server[1] is None:  # a Unix socket: no origin is the gateway's own
        return frozenset()
    host, port = server
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        names = [host]
    else:
        if address.version == 6 and address.ipv4_mapped:  # a dual-stack socket reached over IPv4
            address = address.ipv4_mapped
        names = [str(address) if address.version == 4 else f"[{address}]"]
        if address.is_loopback:
            names.append("localhost")
    origins = {f"{scheme}://{name}:{port}" for scheme in ("http", "https") for name in names}
    # A browser leaves the scheme's default port out of an origin.
    default = {80: "http", 443: "https"}.get(port)
    if default:
        origins |= {f"{default}://{name}" for name in names}
    return frozenset(origins)


def _with_port(origin: str, prefix: str) -> bool:
    return origin.startswith(prefix) and origin[len(prefix):].isdigit()


def host_is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in LOOPBACK_HOSTS
